"""The triage feed: the child's chunks, once passed through, to the engine, the stages and the stall watchdog.

The receive side hands over the child's output reader (:meth:`TriageFeed.attach`: the pass-through's
log, read back) and says when a burst of output is :meth:`~TriageFeed.ready`. The triage thread
(:meth:`TriageFeed.run`) reads the log at its own pace in batches of :data:`TRIAGE_BATCH` bytes —
short engine passes, so the other threads get the interpreter's lock soon — and feeds the
:class:`~qwen_triage.live.session.LiveSession` (diagnoses), the stage tracker and the last lines.
The log is the backlog: however far behind triage falls (a burst of a gigabyte), it holds no output
in memory and skips none, and it has read all of it when the child's exit is reported, before the
summary. The watch thread calls :meth:`TriageFeed.tick` for the stall watchdog. An error in triage
stops triage only: the output and the log are not its business.
"""

from __future__ import annotations

import math
import os
import queue
import sys
import threading
import time
from typing import TYPE_CHECKING, Callable

from qwen_triage.engine.sources import clean_lines
from qwen_triage.live.hooks import Hooks
from qwen_triage.live.lines import Lines, LineSplitter
from qwen_triage.live.stall import (
    LastLines,
    StageState,
    StageTracker,
    Stall,
    StallWatchdog,
    bundled_table,
    has_progress,
    table_of,
)

if TYPE_CHECKING:
    from qwen_triage.engine.compiled import CompiledPack
    from qwen_triage.inputs.process import ChildOutput
    from qwen_triage.live.session import LiveEvent, LiveInput, LiveSession
    from qwen_triage.report.model import Hang

# What the triage thread is told: READY (output to read), SETTLE (release pending findings), QUIET (the output
# paused), PAUSED (it paused briefly: only records written in one go are complete); and the streams of the
# output's chunks
READY, STDOUT, STDERR, QUIET, SETTLE, PAUSED = 0, 1, 2, 3, 4, 5
TRIAGE_BATCH = 1 << 16  # bytes merged for one engine pass: short C calls, so other threads get the GIL soon
LAST_LINES_FED = 64  # the tail of each chunk the stall report's last lines can show
FAR_BEHIND = 1 << 20  # bytes waiting for triage past which any byte counts as progress
# Once triage is this far behind (the child floods its output), the triage thread gives way for the rest of the run:
# its niceness goes up by TRIAGE_NICE, so on a busy machine the child and the pass-through process get the CPU
# first (a child into `run` is not slower than into `tee`: bench/bench_run.py) and triage reads the log behind.
# Until then it runs at the wrapper's priority: a diagnosis is due within milliseconds (bench/bench_latency.py).
FLOODED = 1 << 20
TRIAGE_NICE = 19

_Item = tuple[int, bytes, float]  # (stream, data, time.monotonic()): a chunk of output


class TriageFeed:
    """What the child printed, triaged live: diagnoses, stages, stalls.

    ``compiled`` None: no diagnoses, but stages and stalls still (the bundled
    stage table). ``on_fatal`` is called after each chunk once the session's
    diagnosis is certain and fatal (the supervisor decides whether to stop).
    """

    def __init__(
        self,
        compiled: "CompiledPack | None",
        stall: float | None,
        hooks: Hooks,
        *,
        on_event: Callable[["LiveEvent"], None] | None = None,
        on_stall: Callable[[Stall], None] | None = None,
        on_stage: Callable[[StageState], None] | None = None,
        on_output: Callable[[int, bytes], None] | None = None,
        on_fatal: Callable[["LiveSession"], None] | None = None,
        on_hang: Callable[["Hang"], None] | None = None,
        processes: Callable[[], int] = lambda: 0,
    ):
        self.compiled = compiled
        self.hooks = hooks
        self.on_event, self.on_stall, self.on_stage = on_event, on_stall, on_stage
        self.on_output, self.on_fatal, self.on_hang = on_output, on_fatal, on_hang
        self.processes = processes
        self.events: list[LiveEvent] = []
        self.stalls: list[Stall] = []
        self.watchdog = StallWatchdog(stall)
        table = table_of(compiled.pack) if compiled is not None else bundled_table()
        self.stages = StageTracker(table=table)
        self.last = LastLines(heartbeat=table.heartbeat)
        self.session: LiveSession | None = None
        self._input: LiveInput | None = None
        self._plain: dict[int, LineSplitter] = {}
        self._queue: queue.SimpleQueue[int | None] = queue.SimpleQueue()  # READY, QUIET, SETTLE; None: the end
        self._reader: ChildOutput | None = None
        self.skipped = 0  # bytes the pump could not log nor hand over (it was too far ahead)
        self.ok = compiled is not None
        self.activity = time.monotonic()  # last byte from the child
        self._progress = self.activity  # last output that was not a heartbeat line
        self._last_seen = self._progress  # the activity the stall watchdog knows of
        self._reading = False  # no stall before triage can read: our own start-up is no silence of the child
        self._told_before: set[int] = set()  # what the triage thread was told and had not applied when it handed off
        self._warmed = False
        # the triage thread that gave way (niced): it hands the backlog on at the end of the output
        self._niced_tid: int | None = None
        self.handed_off = False  # ... and did: finish_backlog triages the rest

    def open(self, name: str) -> None:
        """The live session, with the child's output as its one input ``name``."""
        if self.compiled is None:
            return
        from qwen_triage.live.session import LiveSession

        self.session = LiveSession(self.compiled, on_event=self._event,
                                   on_hang=None if self.on_hang is None else self._hang)
        self._input = self.session.add_input(name, kind="text")

    def started(self, when: float) -> None:
        """Triage can read the child's output from now on: the stall watchdog's clock starts."""
        self.activity = when
        self.watchdog.activity(when)
        self._reading = True

    # -- the receive side's end ---------------------------------------------------

    def attach(self, reader: "ChildOutput") -> None:
        """The child's output as the pass-through logged it: the triage thread reads it (and closes it at the end)."""
        self._reader = reader

    def ready(self, when: float) -> None:
        """Output the child wrote up to ``when`` is in the reader: triage's turn."""
        self.activity = when
        self._queue.put(READY)

    def skip(self, n: int) -> None:
        """The pump skipped ``n`` bytes for triage (it lagged behind); the log has them."""
        self.skipped += n

    def quiet(self, brief: bool = False) -> None:
        """The output paused: a multi-line record still open is complete (``brief``: a short pause, which completes
        only a record written in one go, a kernel message)."""
        self._queue.put(PAUSED if brief else QUIET)

    def end(self) -> None:
        """No more output: the triage thread ends once it has read and triaged all of it."""
        self._queue.put(None)

    # -- triage: lines -> engine, stages ------------------------------------------

    def run(self) -> None:
        """The triage thread: the output, read from the log in batches, until :meth:`end` and the last byte. A pause
        or a settle applies once what came before it is triaged.

        The session and the stage table's prefilter are warmed up (:meth:`_warm`) at the first word from the
        receive side — the end of the child's first burst of output — not when the thread starts: the child is
        starting then, and on a small machine a warm-up beside it (imports, compiles) slows its first output
        down. A server's first burst (its banner) is followed by a pause (it loads), in which the warm-up is done
        before an error line comes.

        A thread that gave way to the child (niced, once flooded) stops at the end of the output and leaves the
        backlog to :meth:`finish_backlog`: with the child gone there is nobody to give way to, and a niced thread
        on a busy machine would keep the summary waiting for its turn (it cannot take its priority back)."""
        if not self._loop(ended=False, yielded=False):
            self._close()

    def finish_backlog(self) -> None:
        """What a niced triage thread left at the end of the output (:meth:`run`), triaged on the calling thread
        at its priority (the supervisor's wait thread, at the wrapper's); nothing when nothing was left."""
        if self.handed_off:
            self.handed_off = False
            try:
                self._loop(ended=True, yielded=True)
            finally:
                self._close()

    def _close(self) -> None:
        if self._reader is not None:
            self._reader.close()

    def _loop(self, ended: bool, yielded: bool) -> bool:
        """Triage until the end of the output; True when it stopped there to hand the backlog on (run's docstring)."""
        told, warm = self._told_before, self._warmed
        try:
            while True:
                ended = self._told(told, block=not ended and not self._waiting()) or ended
                if not warm:
                    warm = self._warmed = True
                    self._warm()
                if not yielded and self._reader is not None and self._reader.behind >= FLOODED:
                    yielded = True
                    if _nice_this_thread(TRIAGE_NICE):
                        self._niced_tid = threading.get_native_id()
                if ended and self._niced_tid is not None and threading.get_native_id() == self._niced_tid:
                    self.handed_off = True  # the output ended: the rest at the caller's priority (finish_backlog)
                    return True
                batch = self._pull()
                if batch:
                    self._triage_batch(batch)
                if self._waiting():
                    continue
                if SETTLE in told:
                    self._guarded("settle")
                if QUIET in told:
                    self._guarded("release_held")
                elif PAUSED in told:
                    self._guarded("release_prompt")
                told.clear()
                if ended:
                    return False
        except BaseException:
            self.handed_off = False
            self._close()
            raise

    def _warm(self) -> None:
        """What the first error line's diagnosis would otherwise wait for: the session's code paths
        (LiveSession.warm) and the stage table's prefilter."""
        self._guarded("warm")
        try:
            self.stages.table.prefilter  # noqa: B018 - built now, not at the first chunk
        except Exception as exc:  # noqa: BLE001
            self.hooks.warn_once("stage", f"stage tracking failed ({exc!r})")

    def _waiting(self) -> bool:
        return self._reader is not None and self._reader.waiting

    def _told(self, told: set[int], block: bool) -> bool:
        """What the other threads said since the last look (waiting for a word when ``block``); True at the end."""
        try:
            item = self._queue.get() if block else self._queue.get_nowait()
            while True:
                if item is None:
                    return True
                told.add(item)
                item = self._queue.get_nowait()
        except queue.Empty:
            return False

    def _pull(self) -> list[_Item]:
        """Up to :data:`TRIAGE_BATCH` bytes of the output, read back from the log."""
        if self._reader is None:
            return []
        batch = [(c.stream, c.data, c.when) for c in self._reader.read(None, TRIAGE_BATCH, math.inf)]
        if self.on_output is not None:
            for stream, data, _when in batch:
                self.hooks.call(self.on_output, stream, data)
        return batch

    def _triage_batch(self, batch: list[_Item]) -> None:
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

    def _guarded(self, step: str) -> None:
        """The session's ``step`` (settle, release_prompt, release_held, finish) unless triage already stopped; its error stops it."""
        if self.session is not None and self.ok:
            try:
                getattr(self.session, step)()
            except Exception as exc:  # noqa: BLE001
                self._failed(exc)

    def _failed(self, exc: Exception, more: str = "") -> None:
        self.ok = False
        self.hooks.note(f"live triage stopped on an internal error ({exc!r}){more}", report=True)

    def _split(self, stream: int, data: bytes) -> Lines:
        session, inp = self.session, self._input
        if session is not None and inp is not None and self.ok:
            try:
                return session.feed(inp, data, stream)
            except Exception as exc:  # noqa: BLE001 - triage trouble must not touch the child
                self._failed(exc, "; output and log are unaffected")
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
            for changed in self.stages.changes(clean_lines(lines.data)):
                self.hooks.call(self.on_stage, changed)
        except Exception as exc:  # noqa: BLE001
            self.hooks.warn_once("stage", f"stage tracking failed ({exc!r})")
        session = self.session
        if self.on_fatal is not None and session is not None and session.fatal is not None:
            self.on_fatal(session)

    def partial(self) -> bytes:
        """The newest unfinished line of either stream (a progress bar, a prompt)."""
        splitters = self._input.splitters if self._input is not None else self._plain
        pending = [sp.pending() for sp in list(splitters.values())]
        return max(pending, key=len) if pending else b""

    def finish(self) -> None:
        """The child and the receive side are done, and so is the triage thread: the session's last findings."""
        skipped = self.skipped + (self._reader.dropped if self._reader is not None else 0)
        if skipped:
            self.hooks.notes.append(f"live triage skipped {skipped} bytes the log could not take (too many to hold)")
        if self.session is not None and self.ok:
            try:
                self.session.finish()
            except Exception as exc:  # noqa: BLE001
                self.ok = False
                self.hooks.notes.append(f"live triage stopped on an internal error ({exc!r})")

    # -- the stall watchdog ---------------------------------------------------------

    def seen(self) -> None:
        """Progress is judged by triage (heartbeats do not count); while triage is far behind, any byte counts."""
        behind = self._reader.behind if self._reader is not None else 0
        current = self._progress if behind < FAR_BEHIND else self.activity
        if current != self._last_seen:
            self._last_seen = current
            self.watchdog.activity(current)

    def tick(self) -> None:
        """One look of the stall watchdog while the child runs: a stall is reported once it is due."""
        if not self._reading:
            return
        stage = self.stages.current
        partial = self.partial()
        peek = self.stages.peek(partial) if partial else None
        quiet = self.watchdog.due(peek or (stage.stage if stage else None))
        if quiet is not None:
            self._stall(quiet, partial)

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
            processes=self.processes(),
            line=self._input.source.lines_read if self._input is not None else 0,
        )
        self.stalls.append(stall)
        self.hooks.notes.append(f"stall: {stall.describe()}" + (f"; last stage line: {line}" if line else ""))
        self.hooks.call(self.on_stall, stall)
        self._queue.put(SETTLE)  # no veto is coming soon: settle pending findings

    def _hang(self, hang: "Hang") -> None:
        self.hooks.call(self.on_hang, hang)

    def _event(self, ev: "LiveEvent") -> None:
        self.events.append(ev)
        self.hooks.call(self.on_event, ev)


def _nice_this_thread(by: int) -> bool:
    """Lower the calling thread's priority by ``by`` (Linux, where a thread is a task of its own: the pass-through
    process and the wrapper's other threads keep theirs); elsewhere nothing. True: it was lowered."""
    if sys.platform != "linux":
        return False
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(os.getpriority(os.PRIO_PROCESS, tid) + by, 19))
    except OSError:
        return False
    return True
