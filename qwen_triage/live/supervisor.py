"""Run a child under live triage: tee, stall watchdog, process-group shutdown.

The child starts in a session of its own (so it is also its own process group)
with its stdout and stderr on two pipes. A *pump* process
(:mod:`qwen_triage.live.pump`) reads both and, for each chunk, writes it
unchanged to our stdout/stderr and to the log, then hands it over on a records
pipe. Here a *receive* thread reads the chunks back from the log and takes them
to the *triage* thread through a bounded queue — once a burst of output pauses
(the pump says so; at most ``passthrough.BURST_MAX`` later), so that while the output
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
(SIGKILL) and a guard process (:mod:`qwen_triage.live.orphan_guard`) stops the whole
tree when the wrapper is gone without having stopped it, ``kill -9`` included.

Where each job lives: the pipes, the pump and the receive thread in
:mod:`~qwen_triage.live.passthrough` (the bytes read back through
:class:`qwen_triage.inputs.process.ChildOutput`); the triage thread and the stall
watchdog's ticks in :mod:`~qwen_triage.live.feed`; finding, signalling and reaping
the child's processes in :mod:`~qwen_triage.live.shutdown`; the log file in
:mod:`~qwen_triage.live.run_log`. :class:`Supervisor` starts them and ends the run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from qwen_triage.engine.check_finding import CheckFinding
from qwen_triage.live import procs
from qwen_triage.live.feed import STDERR, STDOUT, TriageFeed
from qwen_triage.live.hooks import Hooks
from qwen_triage.live.passthrough import PassThrough
from qwen_triage.live.run_log import open_log, spool
from qwen_triage.live.shutdown import ProcessTree
from qwen_triage.live.stall import StageState, Stall

if TYPE_CHECKING:
    from qwen_triage.engine.compiled import CompiledPack
    from qwen_triage.live.live_report import Sink
    from qwen_triage.live.orphan_guard import OrphanGuard
    from qwen_triage.live.session import LiveEvent, LiveSession
    from qwen_triage.report.model import Hang, Report, Unrecognised

TICK = 0.1  # the watch thread's period: stall checks
SCAN_EVERY = 0.5  # seconds between two looks for descendants in /proc (the first waits too: not while output starts)


class Supervisor:
    """One child process under live triage.

    ``argv`` runs with ``env`` (default: ours, plus PYTHONUNBUFFERED=1 unless
    ``unbuffered`` is False; always the run marker ``QWEN_TRIAGE_RUN_ID``) in a
    new session. Its output is forwarded to the ``stdout``/``stderr`` sinks (None: not forwarded), appended to ``log`` (a path;
    None: no file) and, with ``compiled``, triaged live: ``on_event`` gets each
    new diagnosis as it forms, ``on_stall`` each silence longer than ``stall``
    seconds, ``on_stage`` each stage change, ``on_hang`` a multi-rank job's culprit (engine.hang) once the
    ranks' lines name one, ``on_note`` remarks worth showing
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

    The work is done by three parts it composes: :class:`~qwen_triage.live.passthrough.PassThrough`
    (pipes, pump, receive thread), :class:`~qwen_triage.live.feed.TriageFeed` (triage thread,
    stall watchdog) and :class:`~qwen_triage.live.shutdown.ProcessTree` (finding and stopping
    the child's processes); this class starts them and ends the run.
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
        on_hang: Callable[["Hang"], None] | None = None,
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
        self.on_exit = on_exit
        self.subreaper = subreaper
        self.die_with_parent = die_with_parent
        self.source_name = source_name
        marker, marker_entry = procs.run_marker()
        self.env[procs.RUN_MARKER] = marker
        self._guard: "OrphanGuard | None" = None

        self.proc: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.hooks = Hooks(on_note)
        self.notes = self.hooks.notes  # also go into the report
        self.tree = ProcessTree(marker_entry, grace, self.hooks)
        self.feed = TriageFeed(
            compiled, stall, self.hooks, on_event=on_event, on_stall=on_stall, on_stage=on_stage,
            on_output=on_output, on_fatal=self._fatal if kill_on_fatal else None, on_hang=on_hang,
            processes=lambda: len(self.tree.members()),
        )
        self.events: list[LiveEvent] = self.feed.events
        self.stalls: list[Stall] = self.feed.stalls
        self.passthrough: PassThrough | None = None
        self._done = threading.Event()
        self._threads: list[threading.Thread] = []

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
        return self.feed.stages.current

    @property
    def session(self) -> "LiveSession | None":
        return self.feed.session

    @property
    def stop_reason(self) -> str | None:
        return self.tree.stop_reason

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
            from qwen_triage.live.orphan_guard import OrphanGuard

            self._guard = OrphanGuard(self.env[procs.RUN_MARKER]).start()
            preexec = procs.parent_death_preexec()
        if self.log_path is not None:
            log_fd: int | None
            log_fd, self.log_path = open_log(self.log_path, self.log_exclusive)
        else:
            log_fd = spool()
        name = self.source_name or (str(self.log_path) if self.log_path is not None else "<child>")
        self.feed.open(name)
        self.passthrough = PassThrough(self.sinks, log_fd, self.log_path, name, self.feed, self.hooks)
        ends = self.passthrough.open()
        try:
            self.passthrough.start()
            self.proc = subprocess.Popen(
                self.argv,
                stdin=self.stdin,
                stdout=ends[STDOUT],
                stderr=ends[STDERR],
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
                bufsize=0,
                preexec_fn=preexec,
            )
        except BaseException:
            if self._guard is not None:
                self._guard.disarm()
            for fd in ends.values():
                os.close(fd)  # the pump sees both pipes end and leaves
            self.passthrough.end()
            raise
        finally:
            if self.proc is not None:
                for fd in ends.values():
                    os.close(fd)
        self.started_at = time.monotonic()
        self.tree.child = self.proc.pid  # setsid: the child leads its session and its group
        if self._guard is not None:
            self._guard.child(self.proc.pid)
        for target, name in (
            (self.passthrough.run, "receive"),
            (self.feed.run, "triage"),
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
        return self.tree.signal_all(sig)

    def request_stop(self, sig: int = signal.SIGTERM, reason: str | None = None, grace: float | None = None) -> None:
        """Begin stopping (returns at once): ``sig`` to every process, SIGKILL after the grace period.

        A second request while one runs kills at once.
        """
        self.tree.request_stop(sig, reason, grace)

    def kill_now(self) -> None:
        self.tree.kill_now()

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
        # a silence the watchdog saw is a finding of the run, not a note: it heads what no rule explains
        report.unrecognised[:0] = [stall_item(st, str(self.log_path or "output")) for st in self.stalls]
        return report

    def last_lines(self) -> list[str]:
        return self.feed.last.snapshot(self.feed.partial())

    def processes(self) -> list[int]:
        """Pids of the child's processes still running (its session and tracked descendants)."""
        return [pid for pid, _, _ in self.tree.members()]

    def __enter__(self) -> "Supervisor":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        if not self.done:
            self.stop()

    @property
    def _link(self):
        """The pump's link (None when no pump runs); the pump's tests look at it."""
        return self.passthrough.link if self.passthrough is not None else None

    @property
    def _pipes(self) -> dict[int, int]:
        """Read ends of the child's pipes still open here; the pump's tests look at them."""
        return self.passthrough.pipes if self.passthrough is not None else {}

    # -- the threads this class runs ------------------------------------------

    def _fatal(self, session: "LiveSession") -> None:
        """--kill-on-fatal: the diagnosis is certain and fatal; stop the child unless it is stopping or gone."""
        if self.tree.stopper is not None or self.returncode is not None or session.fatal is None:
            return
        fatal = session.fatal
        if isinstance(fatal, CheckFinding):  # a line classed by where it was printed (the catalogue)
            severity, title, rule_id = fatal.severity, fatal.title, fatal.rule
        else:
            severity, title, rule_id = fatal.rule.rule.severity, fatal.rule.rule.title, fatal.rule.rule.id
        self.hooks.note(f"--kill-on-fatal: stopping the child: [{severity.value}] {title}", report=True)
        self.request_stop(signal.SIGTERM, reason=f"kill-on-fatal: {rule_id}")

    def _watch(self) -> None:
        """The stall watchdog's ticks, and a look for new descendants every :data:`SCAN_EVERY`."""
        last_scan = time.monotonic()
        while not self._done.wait(TICK):
            now = time.monotonic()
            self.feed.seen()
            if self.returncode is None:
                self.feed.tick()
                if now - last_scan >= SCAN_EVERY:
                    last_scan = now
                    self.tree.track_descendants()

    def _wait_child(self) -> None:
        assert self.proc is not None and self.passthrough is not None
        self.returncode = self.proc.wait()
        self.ended_at = time.monotonic()
        self.tree.after_exit(self.returncode)
        # Output still buffered in the pipes drains now; a process outside the
        # child's session that holds a pipe open must not keep us here forever.
        self.passthrough.drain()
        for t in self._threads:
            if t.name.endswith("triage"):
                t.join()
        self.feed.finish_backlog()  # what a triage thread that gave way to the child left, at our priority
        self.feed.finish()
        self.notes.append(f"the child {procs.describe_returncode(self.returncode)}"
                          + (f" (stopped: {self.stop_reason})" if self.stop_reason else ""))
        if self._guard is not None:
            self._guard.disarm()  # everything is stopped: nothing left for the guard
        self._done.set()
        self.hooks.call(self.on_exit, self.exit_status)


def stall_item(stall: Stall, path: str) -> "Unrecognised":
    """A stall of the live child as the report's finding (kind ``stall``, like a log that ends repeating a
    heartbeat in `scan`): where it stopped, the line it stopped on, what usually hangs there."""
    from qwen_triage.redact import redact_text
    from qwen_triage.report.model import Evidence, Unrecognised

    text = stall.stage_line or (stall.last_lines[-1] if stall.last_lines else "")
    return Unrecognised(template=redact_text(stall.describe()), kind="stall", count=1,
                        evidence=Evidence(path=path, line=stall.line, text=redact_text(text)[:1000]),
                        hint=(stall.stage.hint or None) if stall.stage else None)
