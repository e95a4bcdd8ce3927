"""Run a child under live triage: tee, stall watchdog, process-group shutdown.

The child starts in a session of its own (so it is also its own process group)
with its stdout and stderr on two pipes. A *pump* process
(:mod:`qwen_triage.live.pump`) reads both and, for each chunk, writes it
unchanged to our stdout/stderr and to the log, then hands it over on a records
pipe. Here a *receive* thread reads the chunks back from the log and takes them
to the *triage* thread through a bounded queue — once a burst of output pauses
(:data:`BURST_GAP`, at most :data:`BURST_MAX` later), so that while the output
flows the pass-through has the machine to itself. It therefore costs about what
``cat`` costs: it waits neither for this interpreter's lock nor for triage, and
an error in triage only stops triage: output keeps flowing and the log keeps
growing. Triage catches up, or skips what is over :data:`MAX_BACKLOG` behind.

Ordering: each stream's bytes reach their descriptor and the log exactly, in
order. Between stdout and stderr, chunks keep the order in which the pump sees
them arrive; two writes to different pipes within the same instant (well under a
millisecond) can come out swapped, which a pipe cannot avoid. The log holds the
chunks in that same order, as a terminal showing both would.

Shutdown: a signal for the child (Ctrl-C, SIGTERM, SIGHUP) goes to every process
of the child's session — its process group and any group a worker moved to —
and to descendants that left the session (tracked while they ran); after the
grace period everything still alive gets SIGKILL. When the child exits by itself
and leaves processes behind, they get the grace period, then the same treatment.
The pump ignores Ctrl-C (the child's last words still come through) and ends
when the child's pipes close.

Orphans: the child's environment carries a run marker (``QWEN_TRIAGE_RUN_ID``)
that every descendant inherits, so a daemon that double-forked into a session of
its own is found and stopped with the rest; with ``subreaper`` it is re-parented
to this process and reaped here. With ``die_with_parent`` (the command line sets
it) the wrapper's own death is covered too: the child gets ``PR_SET_PDEATHSIG``
(SIGKILL) and a guard process (:mod:`qwen_triage.live.watchdog`) stops the whole
tree when the wrapper is gone without having stopped it, ``kill -9`` included.
"""

from __future__ import annotations

import functools
import os
import queue
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from qwen_triage.filemode import make_private
from qwen_triage.live import procs
from qwen_triage.engine.sources import clean_lines
from qwen_triage.live import pump
from qwen_triage.live.lines import LineSplitter, Lines
from qwen_triage.live.stall import (
    LastLines,
    Stall,
    StageState,
    StageTracker,
    StallWatchdog,
    bundled_table,
    has_progress,
    table_of,
)

if TYPE_CHECKING:
    from qwen_triage.live.live_report import Sink
    from qwen_triage.live.watchdog import Watchdog
    from qwen_triage.live.session import LiveEvent, LiveSession
    from qwen_triage.engine.matcher import CompiledPack
    from qwen_triage.report.model import Report

SETTLE, STDOUT, STDERR, QUIET = 0, 1, 2, 3  # SETTLE: release pending findings; QUIET: the output paused
QUIET_AFTER = 0.5  # seconds without output after which a multi-line record still open is complete
TRIAGE_BATCH = 1 << 16  # bytes merged for one engine pass: short C calls, so other threads get the GIL soon
LAST_LINES_FED = 64  # the tail of each chunk the stall report's last lines can show
MAX_BACKLOG = 64 << 20  # bytes waiting for triage before triage starts skipping
# Triage reads a burst of output back from the log once the child pauses BURST_GAP seconds, or
# BURST_MAX after it began: while the output flows, the pass-through has the machine to itself.
BURST_GAP = 0.05
BURST_MAX = 0.25
PUMP_RESTARTS = 3  # a pump process that dies is started again this often: the child's output must keep flowing
TICK = 0.1


def default_log_path(argv: Sequence[str], now: datetime | None = None, base: Path | None = None) -> Path:
    """`<state dir>/runs/20250107-101500-vllm-serve.log`: named by time and command."""
    if base is None:
        from platformdirs import user_state_dir

        base = Path(user_state_dir("qwen-triage")) / "runs"
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    return base / f"{stamp}-{command_slug(argv)}.log"


def command_slug(argv: Sequence[str]) -> str:
    words = list(argv)
    if not words:
        return "run"
    first = os.path.basename(words[0])
    rest = words[1:]
    if re.fullmatch(r"python[\d.]*", first) and rest:
        if rest[0] == "-m" and len(rest) > 1:
            first, rest = rest[1], rest[2:]
        elif not rest[0].startswith("-"):
            first, rest = os.path.basename(rest[0]), rest[1:]
    parts = [first]
    if rest and re.fullmatch(r"[A-Za-z][\w-]{0,30}", rest[0]):
        parts.append(rest[0])  # a subcommand: `vllm serve`, `ollama serve`
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(parts)).strip("._-")
    return slug[:48] or "run"


class LogFileError(Exception):
    """The log file cannot be created; nothing was started."""


def open_log(path: Path, exclusive: bool = False) -> tuple[int, Path]:
    """Create (or truncate) the log. ``exclusive``: never overwrite, add -2, -3… to the name instead.

    Open for reading too: the pump writes it, triage reads the chunks back from it.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not exclusive:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            make_private(fd)  # an existing log keeps its mode on O_TRUNC: it holds the server's output, secrets too
            return fd, path
        for n in range(1, 1000):
            candidate = path if n == 1 else path.with_name(f"{path.stem}-{n}{path.suffix}")
            try:
                return os.open(candidate, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), candidate
            except FileExistsError:
                continue
        raise FileExistsError(path)
    except OSError as exc:
        raise LogFileError(f"cannot write the log {path}: {exc.strerror or exc}") from exc




@dataclass
class _Tracked:
    starttime: int
    session: int


class Supervisor:
    """One child process under live triage.

    ``argv`` runs with ``env`` (default: ours, plus PYTHONUNBUFFERED=1 unless
    ``unbuffered`` is False; always the run marker ``QWEN_TRIAGE_RUN_ID``) in a
    new session. Its output is forwarded to the ``stdout``/``stderr`` sinks (None: not forwarded), appended to ``log`` (a path;
    None: no file) and, with ``compiled``, triaged live: ``on_event`` gets each
    new diagnosis as it forms, ``on_stall`` each silence longer than ``stall``
    seconds, ``on_stage`` each stage change, ``on_note`` remarks worth showing
    (shutdown steps, triage trouble), ``on_exit`` the exit status. Callbacks run
    on the supervisor's threads; an exception in one is reported through
    ``on_note`` and does not stop anything.

    ``log_exclusive`` never overwrites an existing log (a -2, -3… name instead).
    ``kill_on_fatal`` stops the child once a critical or error diagnosis is
    certain. ``grace`` is the time between the polite signal and SIGKILL.
    ``subreaper`` makes this process adopt orphaned descendants (Linux
    PR_SET_CHILD_SUBREAPER, process-wide) so they can be found and reaped; the
    command line sets it, library users decide. ``die_with_parent``: the child and
    everything it started are stopped when this process dies without stopping
    them (``kill -9``): ``PR_SET_PDEATHSIG`` in the child and a guard process.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
        log: str | Path | None = None,
        log_exclusive: bool = False,
        compiled: "CompiledPack | None" = None,
        stall: float | None = None,
        kill_on_fatal: bool = False,
        grace: float = 10.0,
        unbuffered: bool = True,
        stdout: "Sink | None" = None,
        stderr: "Sink | None" = None,
        stdin: int | None = None,
        on_event: Callable[["LiveEvent"], None] | None = None,
        on_stall: Callable[[Stall], None] | None = None,
        on_stage: Callable[[StageState], None] | None = None,
        on_note: Callable[[str], None] | None = None,
        on_output: Callable[[int, bytes], None] | None = None,
        on_exit: Callable[[int], None] | None = None,
        subreaper: bool = False,
        die_with_parent: bool = False,
        source_name: str | None = None,
    ):
        if not argv:
            raise ValueError("no command to run")
        self.argv = list(argv)
        self.env = dict(os.environ if env is None else env)
        if unbuffered:
            self.env.setdefault("PYTHONUNBUFFERED", "1")
        self.cwd = cwd
        self.log_path = Path(log) if log is not None else None
        self.log_exclusive = log_exclusive
        self.compiled = compiled
        self.kill_on_fatal = kill_on_fatal
        self.grace = grace
        self.sinks = {STDOUT: stdout, STDERR: stderr}
        self.stdin = stdin
        self.on_event, self.on_stall, self.on_stage = on_event, on_stall, on_stage
        self.on_note, self.on_output, self.on_exit = on_note, on_output, on_exit
        self.subreaper = subreaper
        self.die_with_parent = die_with_parent
        self.source_name = source_name
        marker, self._marker_entry = procs.run_marker()
        self.env[procs.RUN_MARKER] = marker
        self._guard: "Watchdog | None" = None

        self.proc: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.stop_reason: str | None = None
        self.events: list[LiveEvent] = []
        self.stalls: list[Stall] = []
        self.notes: list[str] = []  # also go into the report
        self.watchdog = StallWatchdog(stall)
        table = table_of(compiled.pack) if compiled is not None else bundled_table()
        self.stages = StageTracker(table=table)
        self.last = LastLines(heartbeat=table.heartbeat)
        self.session: LiveSession | None = None
        self._input = None
        self._log_fd: int | None = None  # written by the pump; triage reads it back (pread at _log_pos)
        self._log_pos = 0
        self._link: pump.PumpLink | None = None
        self._pipes: dict[int, int] = {}  # read ends of the child's pipes, kept for a pump restart
        self._queue: queue.SimpleQueue[tuple[int, bytes, float] | None] = queue.SimpleQueue()
        self._backlog = 0
        self._backlog_lock = threading.Lock()
        self._skipped = 0
        self._triage_ok = compiled is not None
        self._activity = time.monotonic()  # last byte from the child
        self._progress = self._activity  # last output that was not a heartbeat line
        self._done = threading.Event()
        self._pump_done = threading.Event()
        self._abandon = False
        self._stop_lock = threading.Lock()
        self._stopper: threading.Thread | None = None
        self._kill_now = threading.Event()
        self._tracked: dict[int, _Tracked] = {}
        self._sid: int | None = None
        self._threads: list[threading.Thread] = []
        self._warned: set[str] = set()
        self._plain: dict[int, LineSplitter] = {}

    # -- public -------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def exit_status(self) -> int | None:
        """The child's exit status, 128+N when signal N killed it; None while it runs."""
        return procs.exit_status(self.returncode) if self.returncode is not None else None

    @property
    def stage(self) -> StageState | None:
        return self.stages.current

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def start(self) -> "Supervisor":
        if self.proc is not None:
            raise RuntimeError("already started")
        if self.subreaper:
            procs.set_child_subreaper()
        preexec = None
        if self.die_with_parent:
            from qwen_triage.live.watchdog import Watchdog

            self._guard = Watchdog(self.env[procs.RUN_MARKER]).start()
            preexec = procs.parent_death_preexec()
        if self.log_path is not None:
            self._log_fd, self.log_path = open_log(self.log_path, self.log_exclusive)
        else:
            self._log_fd = _spool()
        if self.compiled is not None:
            from qwen_triage.live.session import LiveSession

            self.session = LiveSession(self.compiled, on_event=self._event)
            name = self.source_name or (str(self.log_path) if self.log_path is not None else "<child>")
            self._input = self.session.add_input(name, kind="text")
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self._pipes = {STDOUT: out_r, STDERR: err_r}
        try:
            self._link = self._start_pump()
            self.proc = subprocess.Popen(
                self.argv,
                stdin=self.stdin,
                stdout=out_w,
                stderr=err_w,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
                bufsize=0,
                preexec_fn=preexec,
            )
        except BaseException:
            if self._guard is not None:
                self._guard.disarm()
            for fd in (out_w, err_w):
                os.close(fd)  # the pump sees both pipes end and leaves
            self._end_pump()
            raise
        finally:
            if self.proc is not None:
                os.close(out_w)
                os.close(err_w)
        self.started_at = time.monotonic()
        self._activity = self.started_at
        self.watchdog.activity(self.started_at)
        self._sid = self.proc.pid  # setsid: the child leads its session and its group
        if self._guard is not None:
            self._guard.child(self.proc.pid)
        for target, name in (
            (self._receive, "receive"),
            (self._triage, "triage"),
            (self._watch, "watch"),
            (self._wait_child, "wait"),
        ):
            t = threading.Thread(target=target, name=f"qwen-triage-{name}", daemon=True)
            self._threads.append(t)
            t.start()
        return self

    def wait(self, timeout: float | None = None) -> int | None:
        """Exit status once the child has exited, its leftovers are gone and its output is drained."""
        if not self._done.wait(timeout):
            return None
        return self.exit_status

    def send_signal(self, sig: int) -> int:
        """Send ``sig`` to every process of the child; returns how many got it."""
        return self._signal_all(sig)

    def request_stop(self, sig: int = signal.SIGTERM, reason: str | None = None, grace: float | None = None) -> None:
        """Begin stopping (returns at once): ``sig`` to every process, SIGKILL after the grace period.

        A second request while one runs kills at once.
        """
        with self._stop_lock:
            if self._stopper is not None:
                if not self._kill_now.is_set():
                    self._note("stopping now: SIGKILL to every process of the child")
                self._kill_now.set()
                return
            self.stop_reason = self.stop_reason or reason or f"{procs.signal_name(sig)}"
            self._stopper = threading.Thread(
                target=self._terminate,
                args=(sig, self.grace if grace is None else grace),
                name="qwen-triage-stop",
                daemon=True,
            )
            self._stopper.start()

    def kill_now(self) -> None:
        self.request_stop(signal.SIGKILL, grace=0)
        self._kill_now.set()

    def stop(self, grace: float | None = None, sig: int = signal.SIGTERM, timeout: float | None = None) -> int | None:
        """Stop the child and everything it started; its exit status."""
        if not self.done:
            self.request_stop(sig, grace=grace)
        return self.wait(timeout)

    def report(self) -> "Report":
        """The same report as `scan`, over everything the child printed (once it is done)."""
        if self.session is None:
            from qwen_triage.report.model import Report, Stats

            return Report(notes=list(self.notes), stats=Stats(lines=0, bytes=0, seconds=0.0, rules=0))
        if not self.done:
            raise RuntimeError("report() is available once the child is done (wait() returned)")
        from qwen_triage.redact import redact_text

        report = self.session.report()
        report.notes.extend(redact_text(n) for n in self.notes)  # stall notes quote log lines
        return report

    def last_lines(self) -> list[str]:
        return self.last.snapshot(self._partial())

    def processes(self) -> list[int]:
        """Pids of the child's processes still running (its session and tracked descendants)."""
        return [pid for pid, _, _ in self._members()]

    def __enter__(self) -> "Supervisor":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        if not self.done:
            self.stop()

    # -- callbacks ----------------------------------------------------------

    def _call(self, fn: Callable | None, *args: object) -> None:  # type: ignore[type-arg]
        if fn is None:
            return
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - a callback must not stop the run
            key = getattr(fn, "__qualname__", repr(fn))
            if key not in self._warned:
                self._warned.add(key)
                self._note(f"callback {key} failed: {exc!r} (the run goes on)")

    def _note(self, text: str, report: bool = False) -> None:
        if report:
            self.notes.append(text)
        if self.on_note is not None:
            try:
                self.on_note(text)
            except Exception:  # noqa: BLE001
                pass

    def _event(self, ev: "LiveEvent") -> None:
        self.events.append(ev)
        self._call(self.on_event, ev)

    # -- pump: pipes -> sinks, log, triage ------------------------------------

    def _start_pump(self) -> "pump.PumpLink":
        sinks = {stream: (sink.fd if sink is not None and sink.alive else -1) for stream, sink in self.sinks.items()}
        link = pump.PumpLink(self._pipes, sinks, self._log_fd if self._log_fd is not None else -1)
        for stream, sink in self.sinks.items():
            if sink is not None:
                sink.relay = functools.partial(self._send_block, stream)
        return link

    def _send_block(self, stream: int, data: bytes) -> bool:
        link = self._link
        return link is not None and link.send_block(stream, data)

    def _end_pump(self) -> None:
        """The pump is gone or must go: blocks are written here again; nothing of the child is kept open."""
        if self._link is not None:
            self._link.close()
            self._link = None
        for sink in self.sinks.values():
            if sink is not None:
                sink.relay = None
        for fd in self._pipes.values():
            os.close(fd)
        self._pipes = {}
        if self._log_fd is not None:
            os.close(self._log_fd)
            self._log_fd = None

    def _receive(self) -> None:
        """Chunks from the pump to triage; notes on what it gave up; a new pump should it die."""
        last_output, quiet_sent = time.monotonic(), True
        restarts = 0
        held: list[threading.Lock] = []  # the sinks' locks, from the pump's EOF to its FINAL
        burst: list[tuple[int, int, float]] = []  # logged runs not read back yet: the output is still flowing
        since = 0.0
        try:
            while not self._abandon and self._link is not None:
                got = self._link.receive(BURST_GAP if burst else 0.2)
                now = time.monotonic()
                if got is None or (burst and (not got or now - since >= BURST_MAX)):
                    self._read_back(burst)
                if got is None:
                    if held or restarts >= PUMP_RESTARTS:
                        break  # it ended (or keeps dying): what is left of the output cannot be read
                    restarts += 1
                    self._note("the pass-through process died; starting it again (a chunk in flight may be "
                               "missing from the output and the log)", report=True)
                    self._link.close()
                    self._link = self._start_pump()
                    continue
                for kind, stream, payload, when in got:
                    if kind == pump.LOGGED:
                        if not burst:
                            since = now
                        burst.append((stream, int.from_bytes(payload, "little"), when))
                        last_output, quiet_sent = now, False
                        continue
                    self._read_back(burst)  # in order: what was logged before this record first
                    if kind == pump.DATA:
                        self._deliver(stream, payload, when)
                        last_output, quiet_sent = time.monotonic(), False
                    elif kind == pump.EOF:
                        # Our blocks still go through the pump until it has printed them all;
                        # the sinks' locks keep new ones back until they are written here.
                        for lock in {id(s.lock): s.lock for s in self.sinks.values() if s is not None}.values():
                            lock.acquire()
                            held.append(lock)
                        self._link.end_control()
                    elif kind == pump.FINAL:
                        for i, sink in ((0, self.sinks[STDOUT]), (1, self.sinks[STDERR])):
                            if sink is not None:
                                sink.relay = None
                                sink.last = payload[i : i + 1] or b"\n"
                    else:
                        self._pump_trouble(kind, stream, payload)
                if not got and not quiet_sent and time.monotonic() - last_output >= QUIET_AFTER:
                    self._queue.put((QUIET, b"", time.monotonic()))
                    quiet_sent = True
        finally:
            self._end_pump()
            for lock in held:
                lock.release()
            self._queue.put(None)
            self._pump_done.set()

    def _read_back(self, burst: list[tuple[int, int, float]]) -> None:
        """Triage's turn: the chunks of a burst, read back from the log."""
        for stream, n, when in burst:
            self._deliver(stream, self._read_log(n), when)
        burst.clear()

    def _read_log(self, n: int) -> bytes:
        """The next ``n`` bytes the pump logged (b"" should the log be unreadable)."""
        fd = self._log_fd
        parts = []
        while n > 0 and fd is not None:
            try:
                part = os.pread(fd, n, self._log_pos)
            except OSError:
                part = b""
            if not part:
                self._log_pos += n  # truncated behind our back: that much is lost to triage
                break
            parts.append(part)
            self._log_pos += len(part)
            n -= len(part)
        return b"".join(parts)

    def _pump_trouble(self, kind: int, stream: int, payload: bytes) -> None:
        if kind == pump.SKIPPED:
            with self._backlog_lock:
                self._skipped += int.from_bytes(payload, "little")
            return
        code, _, message = payload.decode("utf-8", "replace").partition(":")
        error = OSError(int(code) if code.lstrip("-").isdigit() else 0, message)
        if kind == pump.SINK_ERROR:
            sink = self.sinks.get(stream)
            if sink is not None:
                sink.alive, sink.error = False, error
            name = "stdout" if stream == STDOUT else "stderr"
            self._note(f"cannot write to {name} any more ({message}); the log keeps everything", report=True)
        elif kind == pump.LOG_ERROR:
            self._note(f"writing the log {self.log_path} failed ({message}); output still passes through",
                       report=True)

    def _deliver(self, stream: int, data: bytes, when: float) -> None:
        self._activity = when
        if self.on_output is not None:
            self._call(self.on_output, stream, data)
        with self._backlog_lock:
            if self._backlog + len(data) > MAX_BACKLOG:
                self._skipped += len(data)
                return
            self._backlog += len(data)
        self._queue.put((stream, data, when))

    # -- triage: lines -> engine, stages --------------------------------------

    def _triage(self) -> None:
        q = self._queue
        while True:
            item = q.get()
            if item is None:
                break
            batch = [item]
            end = False
            size = len(item[1])
            while size < TRIAGE_BATCH:
                try:
                    more = q.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    end = True
                    break
                batch.append(more)
                size += len(more[1])
            with self._backlog_lock:
                self._backlog -= size
            if any(b[0] == SETTLE for b in batch):
                self._settle()
            if any(b[0] == QUIET for b in batch):
                self._quiet()
            if any(b[0] in (SETTLE, QUIET) for b in batch):
                batch = [b for b in batch if b[0] not in (SETTLE, QUIET)]
                if not batch:
                    continue
            # merge runs of the same stream: fewer, larger blocks
            stream, chunks, when = batch[0][0], [batch[0][1]], batch[0][2]
            for s, d, t in batch[1:]:
                if s == stream:
                    chunks.append(d)
                    when = t
                else:
                    self._triage_chunk(stream, b"".join(chunks), when)
                    stream, chunks, when = s, [d], t
            self._triage_chunk(stream, b"".join(chunks), when)
            if end:
                break

    def _quiet(self) -> None:
        if self.session is not None and self._triage_ok:
            try:
                self.session.release_held()
            except Exception as exc:  # noqa: BLE001
                self._triage_ok = False
                self._note(f"live triage stopped on an internal error ({exc!r})", report=True)

    def _settle(self) -> None:
        if self.session is not None and self._triage_ok:
            try:
                self.session.settle()
            except Exception as exc:  # noqa: BLE001
                self._triage_ok = False
                self._note(f"live triage stopped on an internal error ({exc!r})", report=True)

    def _split(self, stream: int, data: bytes) -> Lines:
        session, inp = self.session, self._input
        if session is not None and inp is not None and self._triage_ok:
            try:
                return session.feed(inp, data, stream)
            except Exception as exc:  # noqa: BLE001 - triage trouble must not touch the child
                self._triage_ok = False
                self._note(f"live triage stopped on an internal error ({exc!r}); output and log are unaffected",
                           report=True)
        splitters = inp.splitters if inp is not None else self._plain
        splitter = splitters.get(stream)
        if splitter is None:
            splitter = splitters[stream] = LineSplitter()
        return splitter.feed_lines(data)

    def _triage_chunk(self, stream: int, data: bytes, when: float) -> None:
        lines = self._split(stream, data)
        if not data.endswith(b"\n"):
            self._progress = when  # a partial line: a progress bar moving, a prompt
        if not lines:
            return
        try:
            if has_progress(lines.data, self.stages.table.heartbeat):
                self._progress = when
            self.last.extend(lines.tail(LAST_LINES_FED))
            changed = self.stages.feed_block(clean_lines(lines.data))
            if changed is not None:
                self._call(self.on_stage, changed)
        except Exception as exc:  # noqa: BLE001
            if "stage" not in self._warned:
                self._warned.add("stage")
                self._note(f"stage tracking failed ({exc!r})")
        session = self.session
        if (
            self.kill_on_fatal
            and session is not None
            and session.fatal is not None
            and self._stopper is None
            and self.returncode is None
        ):
            rule = session.fatal.rule.rule
            self._note(f"--kill-on-fatal: stopping the child: [{rule.severity.value}] {rule.title}", report=True)
            self.request_stop(signal.SIGTERM, reason=f"kill-on-fatal: {rule.id}")

    def _partial(self) -> bytes:
        """The newest unfinished line of either stream (a progress bar, a prompt)."""
        splitters = self._input.splitters if self._input is not None else self._plain
        pending = [sp.pending() for sp in list(splitters.values())]
        return max(pending, key=len) if pending else b""

    # -- watch: stall watchdog, descendants -----------------------------------

    def _watch(self) -> None:
        last_scan = time.monotonic()  # the first scan of /proc waits half a second: not while the output starts
        last_activity = self._progress
        while not self._done.wait(TICK):
            now = time.monotonic()
            # Progress is judged by triage (heartbeats do not count); while triage
            # is far behind, any byte counts.
            current = self._progress if self._backlog < (1 << 20) else self._activity
            if current != last_activity:
                last_activity = current
                self.watchdog.activity(current)
            if self.returncode is None:
                stage = self.stages.current
                partial = self._partial()
                peek = self.stages.peek(partial) if partial else None
                quiet = self.watchdog.due(peek or (stage.stage if stage else None))
                if quiet is not None:
                    self._stall(quiet, partial)
                if now - last_scan >= 0.5:
                    last_scan = now
                    self._track_descendants()

    def _stall(self, quiet: float, partial: bytes) -> None:
        state = self.stages.current
        stage, line, since = (state.stage, state.line, time.monotonic() - state.since) if state else (None, None, None)
        peek = self.stages.peek(partial) if partial else None
        if peek is not None and (stage is None or peek.id != stage.id):
            stage, line, since = peek, partial.decode("utf-8", "replace").rsplit("\r", 1)[-1][-300:], None
        stall = Stall(
            quiet=quiet,
            stage=stage,
            stage_since=since,
            stage_line=line,
            last_lines=self.last.snapshot(partial),
            processes=len(self._members()),
        )
        self.stalls.append(stall)
        self.notes.append(f"stall: {stall.describe()}" + (f"; last stage line: {line}" if line else ""))
        self._call(self.on_stall, stall)
        self._queue.put((SETTLE, b"", time.monotonic()))  # no veto is coming soon: settle pending findings

    def _track_descendants(self) -> None:
        """Remember every descendant (pid, start time) so one that leaves the session is still found."""
        if self.proc is None:
            return
        try:
            import psutil

            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except Exception:  # noqa: BLE001 - psutil.NoSuchProcess and friends
            return
        for k in kids:
            if k.pid not in self._tracked:
                st = procs.proc_stat(k.pid)
                if st is not None:
                    self._tracked[k.pid] = _Tracked(st.starttime, st.session)

    def _members(self) -> list[tuple[int, int, bool]]:
        """(pid, pgrp, in the child's session) of every running process of the child."""
        if self._sid is None:
            return []
        found = {st.pid: (st.pid, st.pgrp, True) for st in procs.session_members(self._sid)}
        for st in procs.marked(self._marker_entry, exclude=os.getpid()):
            if st.pid not in found:  # left the session (a double-forked daemon): tracked, for reaping too
                self._tracked.setdefault(st.pid, _Tracked(st.starttime, st.session))
        for pid, t in list(self._tracked.items()):
            if pid in found:
                continue
            st = procs.proc_stat(pid)
            if st is None or st.starttime != t.starttime:
                del self._tracked[pid]
            elif not st.zombie:
                found[pid] = (pid, st.pgrp, False)
        return sorted(found.values())

    # -- stopping -------------------------------------------------------------

    def _signal_all(self, sig: int) -> int:
        members = self._members()
        for pgrp in {pgrp for _, pgrp, ours in members if ours}:
            try:
                os.killpg(pgrp, sig)
            except OSError:
                pass
        for pid, _, ours in members:
            if not ours:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        return len(members)

    def _terminate(self, sig: int, grace: float) -> None:
        """``sig`` to every process; SIGKILL to what is left after ``grace``; reap what we adopted."""
        n = self._signal_all(sig)
        if sig != signal.SIGKILL and n:
            self._note(
                f"sent {procs.signal_name(sig)} to the child's {n} process(es); "
                f"SIGKILL in {grace:g} s (Ctrl-C again: now)"
            )
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and not self._kill_now.is_set():
            if not self._members():
                break
            time.sleep(0.05)
        left = self._members()
        if left:
            if sig != signal.SIGKILL:
                self._note(f"SIGKILL to {len(left)} process(es) still running: {', '.join(str(p) for p, _, _ in left)}",
                           report=True)
            self._signal_all(signal.SIGKILL)
            deadline = time.monotonic() + 5
            while self._members() and time.monotonic() < deadline:
                time.sleep(0.02)
        self._reap_adopted()

    def _reap_adopted(self) -> None:
        """Collect zombies re-parented to us (subreaper) that belonged to the child."""
        me = os.getpid()
        child = self.proc.pid if self.proc is not None else -1
        for _ in range(50):
            zombies = [
                st.pid
                for st in map(procs.proc_stat, procs.all_pids())
                if st is not None and st.ppid == me and st.zombie and st.pid != child
                and (st.session == self._sid or st.pid in self._tracked)
            ]
            if not zombies:
                return
            for pid in zombies:
                procs.reap(pid)
            time.sleep(0.01)

    def _wait_child(self) -> None:
        assert self.proc is not None
        self.returncode = self.proc.wait()
        self.ended_at = time.monotonic()
        left = self._members()
        if left and self._stopper is None:
            pids = ", ".join(str(p) for p, _, _ in left[:12])
            self._note(
                f"the child {procs.describe_returncode(self.returncode)} but left {len(left)} process(es) "
                f"running ({pids}); stopping them in {self.grace:g} s",
                report=True,
            )
            deadline = time.monotonic() + self.grace
            while time.monotonic() < deadline and self._members() and self._stopper is None:
                time.sleep(0.05)
            if self._members() and self._stopper is None:
                self.request_stop(signal.SIGTERM, reason="leftover processes")
        if self._stopper is not None:
            self._stopper.join()
        self._reap_adopted()
        # Output still buffered in the pipes drains now; a process outside the
        # child's session that holds a pipe open must not keep us here forever.
        if not self._pump_done.wait(2.0):
            self._abandon = True
            if not self._pump_done.wait(1.0):
                self._queue.put(None)  # the pump is stuck writing (a paused terminal?): let triage end
            self._note("stopped reading: a process outside the child's session still holds its output open",
                       report=True)
        for t in self._threads:
            if t.name.endswith("triage"):
                t.join()
        if self._skipped:
            self.notes.append(f"live triage fell behind and skipped {self._skipped} bytes (the log has them all)")
        if self.session is not None and self._triage_ok:
            try:
                self.session.finish()
            except Exception as exc:  # noqa: BLE001
                self._triage_ok = False
                self.notes.append(f"live triage stopped on an internal error ({exc!r})")
        self.notes.append(f"the child {procs.describe_returncode(self.returncode)}"
                          + (f" (stopped: {self.stop_reason})" if self.stop_reason else ""))
        if self._guard is not None:
            self._guard.disarm()  # everything is stopped: nothing left for the guard
        self._done.set()
        self._call(self.on_exit, self.exit_status)


def _spool() -> int | None:
    """An unnamed temporary file for a run without a log: the pump writes it, triage reads it back."""
    import tempfile

    try:
        with tempfile.TemporaryFile(buffering=0) as f:
            return os.dup(f.fileno())
    except OSError:
        return None  # then the pump hands every chunk over in its record
