"""Run a child under live triage: tee, stall watchdog, process-group shutdown.

The child starts in a session of its own (so it is also its own process group)
with its stdout and stderr on two pipes. One *pump* thread reads both pipes and,
for each chunk, in this order: writes it unchanged to our stdout/stderr, appends
it to the log file (plain ``os.write``, no buffering in this process), and hands
it to the *triage* thread through a bounded queue. Triage (matching, stage
tracking, rendering) therefore never slows or blocks the pass-through, and an
error in it only stops triage: output keeps flowing and the log keeps growing.

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

Orphans: the child's environment carries a run marker (``QWEN_TRIAGE_RUN_ID``)
that every descendant inherits, so a daemon that double-forked into a session of
its own is found and stopped with the rest; with ``subreaper`` it is re-parented
to this process and reaped here. With ``die_with_parent`` (the command line sets
it) the wrapper's own death is covered too: the child gets ``PR_SET_PDEATHSIG``
(SIGKILL) and a guard process (:mod:`qwen_triage.live.watchdog`) stops the whole
tree when the wrapper is gone without having stopped it, ``kill -9`` included.
"""

from __future__ import annotations

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
READ_SIZE = 1 << 20  # a chatty child's backlog in one read: fewer trips through the interpreter
TRIAGE_BATCH = 1 << 16  # bytes merged for one engine pass: short C calls, so the pump gets the GIL soon
LAST_LINES_FED = 64  # the tail of each chunk the stall report's last lines can show
PIPE_SIZE = 1 << 20  # ask the kernel for 1 MiB pipes: fewer stalls of a chatty child
MAX_BACKLOG = 64 << 20  # bytes waiting for triage before triage starts skipping
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
    """Create (or truncate) the log. ``exclusive``: never overwrite, add -2, -3… to the name instead."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not exclusive:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            make_private(fd)  # an existing log keeps its mode on O_TRUNC: it holds the server's output, secrets too
            return fd, path
        for n in range(1, 1000):
            candidate = path if n == 1 else path.with_name(f"{path.stem}-{n}{path.suffix}")
            try:
                return os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), candidate
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
        self._log_fd: int | None = None
        self._log_error: OSError | None = None
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
        if self.compiled is not None:
            from qwen_triage.live.session import LiveSession

            self.session = LiveSession(self.compiled, on_event=self._event)
            name = self.source_name or (str(self.log_path) if self.log_path is not None else "<child>")
            self._input = self.session.add_input(name, kind="text")
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=self.stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
                bufsize=0,
                preexec_fn=preexec,
            )
        except OSError:
            if self._guard is not None:
                self._guard.disarm()
            if self._log_fd is not None:
                os.close(self._log_fd)
                self._log_fd = None
            raise
        self.started_at = time.monotonic()
        self._activity = self.started_at
        self.watchdog.activity(self.started_at)
        self._sid = self.proc.pid  # setsid: the child leads its session and its group
        if self._guard is not None:
            self._guard.child(self.proc.pid)
        for f in (self.proc.stdout, self.proc.stderr):
            _grow_pipe(f.fileno())  # type: ignore[union-attr]
        for target, name in (
            (self._pump, "pump"),
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

    def _pump(self) -> None:
        import selectors

        assert self.proc is not None and self.proc.stdout is not None and self.proc.stderr is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout.fileno(), selectors.EVENT_READ, STDOUT)
        sel.register(self.proc.stderr.fileno(), selectors.EVENT_READ, STDERR)
        last_output, quiet_sent = time.monotonic(), True
        try:
            while sel.get_map() and not self._abandon:
                events = sel.select(timeout=0.2)
                for key, _ in events:
                    try:
                        data = os.read(key.fd, READ_SIZE)
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(key.fd)
                        continue
                    self._deliver(key.data, data)
                    last_output, quiet_sent = time.monotonic(), False
                if not events and not quiet_sent and time.monotonic() - last_output >= QUIET_AFTER:
                    self._queue.put((QUIET, b"", time.monotonic()))
                    quiet_sent = True
        finally:
            sel.close()
            for f in (self.proc.stdout, self.proc.stderr):
                try:
                    f.close()
                except OSError:
                    pass
            if self._log_fd is not None:
                try:
                    os.close(self._log_fd)
                except OSError:
                    pass
                self._log_fd = None
            self._queue.put(None)
            self._pump_done.set()

    def _deliver(self, stream: int, data: bytes) -> None:
        self._activity = now = time.monotonic()
        sink = self.sinks[stream]
        if sink is not None and not sink.write(data) and f"sink{stream}" not in self._warned:
            self._warned.add(f"sink{stream}")
            name = "stdout" if stream == STDOUT else "stderr"
            self._note(f"cannot write to {name} any more ({sink.error}); the log keeps everything", report=True)
        if self._log_fd is not None:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._log_fd, view) :]
            except OSError as exc:
                self._log_error = exc
                self._note(f"writing the log {self.log_path} failed ({exc.strerror}); output still passes through",
                           report=True)
                try:
                    os.close(self._log_fd)
                except OSError:
                    pass
                self._log_fd = None
        if self.on_output is not None:
            self._call(self.on_output, stream, data)
        with self._backlog_lock:
            if self._backlog + len(data) > MAX_BACKLOG:
                self._skipped += len(data)
                return
            self._backlog += len(data)
        self._queue.put((stream, data, now))

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
        last_scan = 0.0
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


def _grow_pipe(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)  # type: ignore[attr-defined]
    except (OSError, AttributeError, ImportError):
        pass
