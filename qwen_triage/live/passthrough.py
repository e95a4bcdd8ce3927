"""The pass-through: the child's pipes, the pump process that tees them, and the receive side.

A *pump* process (:mod:`qwen_triage.live.pump`) reads the child's stdout and
stderr pipes and writes each chunk unchanged to our stdout/stderr and to the log,
then tells us on a records pipe. :meth:`PassThrough.run` (the receive thread)
reads those records and hands the chunks to the triage feed — read back from the
log once a burst of output ends (the pump's PAUSED record: the child said nothing for
``pump.FLUSH_AFTER_MS``; at most :data:`BURST_MAX` after the burst began), so that while
the output flows the pass-through has the machine to itself; the triage thread reads
them from the log at its own pace (live.feed). The bytes themselves come through the input layer's reader of a child's output
(:class:`qwen_triage.inputs.process.ChildOutput`), as every source is read. A pump that dies is
started again (:data:`PUMP_RESTARTS`) on the same pipes: the child's output must keep flowing.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from qwen_triage.live import pump
from qwen_triage.live.feed import STDERR, STDOUT, TriageFeed
from qwen_triage.live.hooks import Hooks

if TYPE_CHECKING:
    from qwen_triage.inputs.process import ChildOutput
    from qwen_triage.live.live_report import Sink

# Seconds without output after which a multi-line record still open (an NVRM message, a kernel OOM report, a Go
# panic: engine.multiline) is complete: the lines of one such record are written together, and its diagnosis
# waits this long after its last line (bench/bench_latency.py). A kernel message (NVRM, AER) is one write of the
# kernel's: PAUSED_AFTER completes it; a kernel OOM report or a Go panic (many writes) waits QUIET_AFTER.
PAUSED_AFTER = 0.008
QUIET_AFTER = 0.05
# Triage reads a burst of output back from the log once the pump says the child paused (its PAUSED record, sent
# after pump.FLUSH_AFTER_MS of silence), or BURST_MAX after the burst began: while the output flows, the
# pass-through has the machine to itself; a line after a pause is triaged as soon as the pump has seen the pause.
BURST_MAX = 0.25
IDLE_POLL = 0.2  # seconds between looks while nothing is pending
PUMP_RESTARTS = 3  # a pump process that dies is started again this often: the child's output must keep flowing



class PassThrough:
    """The child's output on its way to the ``sinks`` (by stream; None: not forwarded), the log and ``feed``.

    ``log_fd`` is the log (or an unnamed spool file) opened for reading too: the
    pump writes it, the receive side reads the chunks back; None: the pump hands
    every chunk over in its record.
    """

    def __init__(self, sinks: "dict[int, Sink | None]", log_fd: int | None, log_path: Path | None, label: str,
                 feed: TriageFeed, hooks: Hooks):
        self.sinks = sinks
        self.log_fd = log_fd
        self.log_path = log_path
        self.label = label
        self.reader: ChildOutput | None = None  # see open_reader(); the log descriptor is then its own
        self.feed = feed
        self.hooks = hooks
        self.link: pump.PumpLink | None = None
        self.pipes: dict[int, int] = {}  # read ends of the child's pipes, kept for a pump restart
        self.done = threading.Event()  # the receive side has ended: everything the pump gave is delivered
        self.abandon = False  # stop reading: someone outside the child holds its pipes open

    def open(self) -> dict[int, int]:
        """The child's pipes; the write ends (by stream) are for the child, the caller closes them."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self.pipes = {STDOUT: out_r, STDERR: err_r}
        return {STDOUT: out_w, STDERR: err_w}

    def start(self) -> None:
        """The pump, on the read ends of the child's pipes."""
        self.link = self._start_pump()

    def open_reader(self) -> "ChildOutput":
        """The reader of what the pump logs, made by the receive thread, so that its import holds back neither the
        child's start nor the caller's signal handlers (a SIGTERM before they are set would kill the wrapper, not
        stop the child). Its positions (pydantic models) are imported at its first read, after the child's first
        burst: while that flows, the child has the machine."""
        from qwen_triage.inputs.process import ChildOutput

        self.reader = ChildOutput(self.log_fd, self.label)
        self.feed.attach(self.reader)  # read, and closed, by the triage thread
        return self.reader

    def _start_pump(self) -> "pump.PumpLink":
        sinks = {stream: (sink.fd if sink is not None and sink.alive else -1) for stream, sink in self.sinks.items()}
        link = pump.PumpLink(self.pipes, sinks, self.log_fd if self.log_fd is not None else -1)
        for stream, sink in self.sinks.items():
            if sink is not None:
                sink.relay = functools.partial(self._send_block, stream)
        return link

    def _send_block(self, stream: int, data: bytes) -> bool:
        link = self.link
        return link is not None and link.send_block(stream, data)

    def end(self) -> None:
        """The pump is gone or must go: blocks are written here again; nothing of the child is kept open."""
        if self.link is not None:
            self.link.close()
            self.link = None
        for sink in self.sinks.values():
            if sink is not None:
                sink.relay = None
        for fd in self.pipes.values():
            os.close(fd)
        self.pipes = {}
        if self.reader is None and self.log_fd is not None:  # else the triage thread reads the rest, then closes it
            os.close(self.log_fd)
        self.log_fd = None

    def drain(self) -> None:
        """The child is gone: wait for its output still in the pipes, not forever for a process holding them."""
        if not self.done.wait(2.0):
            self.abandon = True
            if not self.done.wait(1.0):
                self.feed.end()  # the pump is stuck writing (a paused terminal?): let triage end
            self.hooks.note("stopped reading: a process outside the child's session still holds its output open",
                            report=True)

    # -- the receive thread ---------------------------------------------------------

    def run(self) -> None:
        """Chunks from the pump to triage; notes on what it gave up; a new pump should it die."""
        last_output, quiet_sent, paused_sent = time.monotonic(), True, True
        restarts = 0
        held: list[threading.Lock] = []  # the sinks' locks, from the pump's EOF to its FINAL
        since = 0.0  # when the burst waiting to be read back began
        burst = False  # output logged that triage has not been told of
        try:
            reader = self.open_reader()
            self.feed.started(time.monotonic())  # the stall clock starts once triage can read
            while not self.abandon and self.link is not None:
                got = self.link.receive(self._timeout(burst, since, quiet_sent, paused_sent, last_output))
                now = time.monotonic()
                if got is None or (burst and now - since >= BURST_MAX):
                    burst = self._read_back(burst)
                if got is None:
                    if held or restarts >= PUMP_RESTARTS:
                        break  # it ended (or keeps dying): what is left of the output cannot be read
                    restarts += 1
                    self._restart()
                    continue
                for kind, stream, payload, when in got:
                    if kind == pump.LOGGED:
                        if not burst:
                            since, burst = now, True
                        reader.logged(stream, int.from_bytes(payload, "little"), when)
                        last_output, quiet_sent, paused_sent = now, False, False
                    elif kind == pump.DATA:
                        reader.handed(stream, payload, when)
                        burst = self._read_back(True)  # in order: what was logged before it, then it
                        last_output, quiet_sent, paused_sent = time.monotonic(), False, False
                    elif kind == pump.PAUSED:
                        burst = self._read_back(burst)  # the burst has ended: triage's turn
                        last_output = min(last_output, when)  # the silence began at the last chunk, not on receipt
                    else:
                        burst = self._read_back(burst)  # in order: what was logged before this record first
                        self._record(kind, stream, payload, held)
                if not got and not quiet_sent and not burst:
                    idle = time.monotonic() - last_output
                    if idle >= QUIET_AFTER:
                        self.feed.quiet()
                        quiet_sent = paused_sent = True
                    elif idle >= PAUSED_AFTER and not paused_sent:
                        self.feed.quiet(brief=True)
                        paused_sent = True
        finally:
            self.end()
            for lock in held:
                lock.release()
            self.feed.end()
            self.done.set()

    @staticmethod
    def _timeout(burst: bool, since: float, quiet_sent: bool, paused_sent: bool, last_output: float) -> float:
        """How long the receive thread may wait for the pump: until a burst's longest (the pump's PAUSED record
        ends it sooner), else until the output counts as paused, then quiet (so a record held open is released on
        time), else the idle poll."""
        if burst:
            return max(BURST_MAX - (time.monotonic() - since), 0.001)
        if not quiet_sent:
            mark = QUIET_AFTER if paused_sent else PAUSED_AFTER
            return min(max(mark - (time.monotonic() - last_output), 0.001), IDLE_POLL)
        return IDLE_POLL

    def _restart(self) -> None:
        self.hooks.note("the pass-through process died; starting it again (a chunk in flight may be "
                        "missing from the output and the log)", report=True)
        assert self.link is not None
        self.link.close()
        self.link = self._start_pump()

    def _record(self, kind: int, stream: int, payload: bytes, held: list[threading.Lock]) -> None:
        """A record other than a chunk: the pump's end, its last bytes, or trouble."""
        if kind == pump.EOF:
            # Our blocks still go through the pump until it has printed them all;
            # the sinks' locks keep new ones back until they are written here.
            for lock in {id(s.lock): s.lock for s in self.sinks.values() if s is not None}.values():
                lock.acquire()
                held.append(lock)
            assert self.link is not None
            self.link.end_control()
        elif kind == pump.FINAL:
            for i, sink in ((0, self.sinks[STDOUT]), (1, self.sinks[STDERR])):
                if sink is not None:
                    sink.relay = None
                    sink.last = payload[i : i + 1] or b"\n"
        else:
            self._trouble(kind, stream, payload)

    def _trouble(self, kind: int, stream: int, payload: bytes) -> None:
        if kind == pump.SKIPPED:
            self.feed.skip(int.from_bytes(payload, "little"))
            return
        code, _, message = payload.decode("utf-8", "replace").partition(":")
        error = OSError(int(code) if code.lstrip("-").isdigit() else 0, message)
        if kind == pump.SINK_ERROR:
            sink = self.sinks.get(stream)
            if sink is not None:
                sink.alive, sink.error = False, error
            name = "stdout" if stream == STDOUT else "stderr"
            self.hooks.note(f"cannot write to {name} any more ({message}); the log keeps everything", report=True)
        elif kind == pump.LOG_ERROR:
            self.hooks.note(f"writing the log {self.log_path} failed ({message}); output still passes through",
                            report=True)

    def _read_back(self, burst: bool) -> bool:
        """Triage's turn, when a burst waits: its chunks are read back from the log (by the triage thread). Returns
        that no burst waits any more."""
        if burst:
            self.feed.ready(time.monotonic())
        return False
