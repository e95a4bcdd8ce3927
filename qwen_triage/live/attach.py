"""`qwen-triage attach PID`: triage a server that is already running.

Where the process writes is read from `/proc/PID/fd/1` and `/2`:

- a regular file is followed through `/proc/PID/fd/N` itself, so a rename by
  logrotate or a deleted file is still the file the process writes to;
- a socket of a process in a systemd unit is its journal stream: the journal is
  followed over the unit (from `/proc/PID/cgroup`), or over `_PID=` when
  there is no unit, from the time the process started;
- a terminal, a pipe or /dev/null cannot be read by anyone else: the message
  says so and gives the `qwen-triage run` line that would have captured it.

The process and its children are watched; each exit is reported with its status
where it can still be read (a zombie's status in /proc, or systemd's record of
the unit's main process), and attach ends when the process itself exits.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from qwen_triage.inputs.helptext import JOURNAL_TOOL
from qwen_triage.inputs.process import OutputTarget, cmdline_of, inspect_fd, unit_of
from qwen_triage.inputs.registry import live
from qwen_triage.live import procs

if TYPE_CHECKING:
    from qwen_triage.engine.compiled import CompiledPack
    from qwen_triage.live.follow import FollowLoop


def run_line(cmdline: list[str]) -> str:
    return "qwen-triage run -- " + (shlex.join(cmdline) if cmdline else "COMMAND [ARGS…]")


@dataclass
class AttachPlan:
    files: list[OutputTarget] = field(default_factory=list)  # distinct regular files to follow
    journal: bool = False  # follow the journal (unit or _PID)
    unreadable: list[OutputTarget] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    @property
    def readable(self) -> bool:
        return bool(self.files) or self.journal


_WHY = {
    "terminal": "a terminal: what is written there cannot be read back by another process",
    "pipe": "a pipe: only the process at its other end can read it",
    "null": "/dev/null: the output is thrown away",
    "socket": "a socket that is not a journal stream as far as can be told",
    "other": "not a file qwen-triage can follow",
    "closed": "closed",
}


def plan_attach(targets: list[OutputTarget], unit: str | None, has_journal: bool) -> AttachPlan:
    """Decide what to follow for stdout/stderr (pure: tested without /proc or systemd)."""
    plan = AttachPlan()
    seen: set[tuple[int, int] | None] = set()
    for t in targets:
        if t.kind == "file":
            if t.ident in seen:
                continue  # 2>&1: the same file once
            seen.add(t.ident)
            plan.files.append(t)
        elif t.kind == "socket" and has_journal:
            # services' stdout/stderr are journald stream sockets by default
            plan.journal = True
        elif t.kind == "unreadable":
            plan.unreadable.append(t)
            plan.messages.append(f"fd {t.fd}: cannot inspect it ({t.reason}); run as the process's user or root")
        else:
            plan.unreadable.append(t)
            if t.kind == "socket":
                plan.messages.append(f"fd {t.fd} is a socket, and {JOURNAL_TOOL} is not available to read a journal")
            else:
                plan.messages.append(f"fd {t.fd} ({'stdout' if t.fd == 1 else 'stderr'}) is {_WHY.get(t.kind, t.kind)}")
    if plan.journal and unit is None:
        plan.messages.append("its output goes to a socket; assuming a journald stream and following _PID")
    return plan


@dataclass
class _Known:
    starttime: int
    name: str
    reported: bool = False


class ProcessWatch:
    """The attached process and its descendants; reports each one's end once."""

    def __init__(self, pid: int):
        self.pid = pid
        st = procs.proc_stat(pid)
        if st is None:
            raise ProcessLookupError(pid)
        self.known: dict[int, _Known] = {pid: _Known(st.starttime, _name(pid, st.comm))}
        self.main_gone = st.zombie
        self.main_status: str | None = None
        self.ended: dict[int, int] = {}  # pid -> start time of children already reported (zombies linger)

    def _refresh(self) -> None:
        try:
            import psutil

            kids = psutil.Process(self.pid).children(recursive=True)
        except Exception:  # noqa: BLE001 - gone, or no permission
            return
        for k in kids:
            if k.pid not in self.known:
                st = procs.proc_stat(k.pid)
                # a zombie too: it ended since the last look, and its status is still there
                if st is not None and self.ended.get(k.pid) != st.starttime:
                    self.known[k.pid] = _Known(st.starttime, _name(k.pid, st.comm))

    def poll(self) -> list[tuple[int, str, str | None]]:
        """(pid, name, how it ended or None when its status could not be read) for each newly ended process."""
        self._refresh()
        out = []
        for pid, k in list(self.known.items()):
            if k.reported:
                continue
            st = procs.proc_stat(pid)
            if st is not None and st.starttime == k.starttime and not st.zombie:
                continue
            how = None
            if st is not None and st.starttime == k.starttime and st.exit_code is not None:
                how = procs.describe_wait_status(st.exit_code)[1]
            k.reported = True
            if pid == self.pid:
                self.main_gone = True
                self.main_status = how
            out.append((pid, k.name, how))
        # forget ended children (bounded memory over a long attach); remember them while they linger
        for pid in [p for p, k in self.known.items() if k.reported and p != self.pid]:
            self.ended[pid] = self.known.pop(pid).starttime
        for pid, start in list(self.ended.items()):
            st = procs.proc_stat(pid)
            if st is None or st.starttime != start:
                del self.ended[pid]
        return out


def _name(pid: int, comm: str) -> str:
    cmd = cmdline_of(pid)
    if cmd:
        text = " ".join(cmd)
        return text if len(text) <= 80 else text[:77] + "…"
    return comm


@dataclass(frozen=True)
class AttachOptions:
    """``qwen-triage attach``'s options, as the command line gives them."""

    pid: int
    new_only: bool = False
    """skip what the process wrote before now"""
    fmt: str = "text"
    rule_dirs: tuple[str, ...] = ()
    engine: str = "auto"


def run(options: AttachOptions) -> int:
    """The `attach` command: follow what the process writes, triage it live, the report when it ends or on Ctrl-C.
    Exit status like `scan`; 2 when nothing can be read."""
    from qwen_triage.engine.scanner import load_compiled

    compiled = load_compiled(options.rule_dirs, options.engine)
    return _attach(options.pid, compiled, options.fmt, options.new_only)


def _attach(pid: int, compiled: CompiledPack, fmt: str, new_only: bool) -> int:
    from qwen_triage.exits import EXIT_CLEAN, EXIT_ERROR, EXIT_FOUND
    from qwen_triage.inputs.journal import journal_tool_available
    from qwen_triage.live.follow import FollowLoop, stop_signals
    from qwen_triage.live.live_report import LiveReporter, Sink
    from qwen_triage.live.session import LiveSession
    from qwen_triage.report.emit import emit_report

    if procs.proc_stat(pid) is None:
        _say(f"no process {pid}")
        return EXIT_ERROR
    try:
        watch = ProcessWatch(pid)
    except ProcessLookupError:
        _say(f"no process {pid}")
        return EXIT_ERROR
    unit, user = unit_of(pid)
    plan = plan_attach([inspect_fd(pid, 1), inspect_fd(pid, 2)], unit, journal_tool_available())
    if not plan.readable:
        _say_unreadable(pid, watch.known[pid].name, plan, unit)
        return EXIT_ERROR

    reporter = LiveReporter(Sink(2))
    session = LiveSession(compiled, on_event=reporter.event, on_hang=reporter.hang)
    loop = FollowLoop(session, note=reporter.note)
    try:
        jproc = _follow(loop, plan, pid, unit, user, new_only, reporter.note)
    except OSError as exc:
        _say(f"cannot run {JOURNAL_TOOL}: {exc.strerror}")
        return EXIT_ERROR
    reporter.note(f"attached to {pid} ({watch.known[pid].name}); Ctrl-C detaches and prints the summary")
    # after the process is gone, give the journal a moment to deliver its last lines
    ending = _Ending(watch, pid, unit, user, reporter.note, session.notes, linger=1.0 if jproc is not None else 0.0)
    with stop_signals() as stop_requested:
        try:
            loop.run(should_stop=lambda: stop_requested() or ending.over(), on_tick=ending.tick)
            if stop_requested():
                session.notes.append(f"detached from {pid} while it was still running")
            else:
                loop.drain()
        except KeyboardInterrupt:
            session.notes.append(f"detached from {pid} while it was still running")
        finally:
            if jproc is not None:
                procs.stop_helper(jproc)
        report = session.finish()
    loop.close()
    reporter.note("summary follows", always=True)
    emit_report(report, fmt)
    return EXIT_FOUND if report.diagnoses else EXIT_CLEAN


def _say(msg: str) -> None:
    print(f"qwen-triage: {msg}", file=sys.stderr)


def _say_unreadable(pid: int, name: str, plan: AttachPlan, unit: str | None) -> None:
    """Why nothing of the process can be read, and how to start it so that it can be, next time."""
    for m in plan.messages:
        _say(m)
    _say(f"nothing of process {pid} ({name}) can be read from here.")
    _say("start it under qwen-triage next time, which shows and saves its output and triages it live:")
    print(f"  {run_line(cmdline_of(pid))}", file=sys.stderr)
    if unit:
        print(f"  (or, as the systemd unit it runs in: qwen-triage journal {unit})", file=sys.stderr)


def _follow(loop: FollowLoop, plan: AttachPlan, pid: int, unit: str | None, user: bool, new_only: bool,
            note: Callable[[str], None]) -> subprocess.Popen[bytes] | None:
    """Add what ``plan`` says can be read to ``loop``: the files the process writes, its journal stream (whose
    reader process is returned, to be stopped at the end). OSError when the journal's tool cannot run."""
    from qwen_triage.inputs.journal import pid_command

    for m in plan.messages:
        note(m)
    for t in plan.files:
        loop.add(live("file", t.path, name=t.name, from_end=new_only, by_name=False, note=note))
        note(f"following {t.name} (fd {t.fd} of process {pid})")
    if not plan.journal:
        return None
    started = _start_time(pid)
    since = None if new_only or started is None else f"@{int(started)}"
    cmd = pid_command(pid, unit=unit, user=user, since=since)
    src = live("journal", cmd, f"journal:{unit or f'_PID={pid}'}")
    loop.add(src)
    note(f"following the journal: {shlex.join(cmd)}")
    return src.proc


class _Ending:
    """Says when the attached process and its children end (the unit's exit status where systemd has it), and
    when to stop: ``linger`` seconds after the attached process is gone."""

    def __init__(self, watch: ProcessWatch, pid: int, unit: str | None, user: bool, note: Callable[[str], None],
                 notes: list[str], linger: float):
        self.watch, self.pid, self.unit, self.user = watch, pid, unit, user
        self.note, self.notes, self.linger = note, notes, linger
        self.ended_at: float | None = None

    def tick(self) -> None:
        from qwen_triage.live.systemd_journal import unit_exit

        for p, name, how in self.watch.poll():
            if p == self.pid and how is None and self.unit:
                how = unit_exit(self.unit, self.pid, user=self.user)
            what = how or "ended (its exit status was collected by its parent before it could be read)"
            who = "the attached process" if p == self.pid else "child process"
            text = f"{who} {p} ({name}) {what}"
            self.note(text)
            self.notes.append(text)
        if self.watch.main_gone and self.ended_at is None:
            self.ended_at = time.monotonic()

    def over(self) -> bool:
        return self.ended_at is not None and time.monotonic() - self.ended_at > self.linger


def _start_time(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:  # noqa: BLE001
        return None
