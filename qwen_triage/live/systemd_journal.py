"""`qwen-triage journal [UNIT]`: a systemd unit's journal (and the kernel's), triaged.

One process of the journal's tool reads everything, its command line built by
:func:`qwen_triage.inputs.journal.journal_command` (the one builder: the unit's own output, systemd's messages
about the unit — its "Main process exited, code=killed, status=9/KILL" lines —, its core dumps and, with
``--kernel``, the kernel log OR-ed in), so the journal itself merges them into one timeline, in time order, for
any window and with ``--follow`` alike. The JSON is decoded by the engine's journal reader
(`qwen_triage.engine.sources`), which keeps each line's program, pid and priority for the rules' `where:`
constraints. This module adds what systemd itself says about the unit (when it started, how its main process
ended) and the command's report.

Everything that builds a command line or reads systemctl's answers is a plain
function, testable without systemd.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from qwen_triage.inputs.helptext import JOURNAL_TOOL
from qwen_triage.inputs.journal import (
    JournalError,
    journal_command,
    journal_dirs,
    journal_present,
    journal_tool_available,
    unit_name,
)
from qwen_triage.inputs.registry import live

if TYPE_CHECKING:
    from qwen_triage.engine.compiled import CompiledPack

def parse_systemctl_timestamp(value: str) -> str | None:
    """A `systemctl show -p …Timestamp --value` answer as a `--since` value; None when never."""
    value = value.strip()
    if not value or value in ("n/a", "0") or value.startswith("@0"):
        return None
    if value.startswith("@"):
        return value.split(".", 1)[0]
    # "Tue 2025-01-07 10:00:00 UTC": the journal's tool parses this form (systemd writes it to be read back)
    return value


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def unit_start_since(unit: str, user: bool = False, run: Runner = subprocess.run) -> str | None:
    """When the unit last started (InactiveExitTimestamp), as a `--since` value; None if unknown."""
    base = ["systemctl", *(["--user"] if user else []), "show", unit_name(unit), "--property=InactiveExitTimestamp",
            "--value"]
    for extra in (["--timestamp=unix"], []):  # --timestamp needs systemd 248
        try:
            cp = run(base + extra, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        if cp.returncode == 0:
            return parse_systemctl_timestamp(cp.stdout)
    return None


def unit_exit(unit: str, pid: int, user: bool = False, run: Runner = subprocess.run) -> str | None:
    """How the unit's main process ended, from systemd, when that process was ``pid``."""
    cmd = ["systemctl", *(["--user"] if user else []), "show", unit_name(unit),
           "--property=ExecMainPID", "--property=ExecMainCode", "--property=ExecMainStatus"]
    try:
        cp = run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if cp.returncode != 0:
        return None
    return describe_exec_main(cp.stdout, pid)


def describe_exec_main(show_output: str, pid: int) -> str | None:
    props = dict(line.split("=", 1) for line in show_output.splitlines() if "=" in line)
    if props.get("ExecMainPID") != str(pid):
        return None
    code, status = props.get("ExecMainCode", ""), props.get("ExecMainStatus", "")
    if not status.isdigit():
        return None
    # ExecMainCode is a CLD_* value: 1 exited, 2 killed, 3 dumped core
    if code == "1":
        return f"exited with status {status}"
    if code in ("2", "3"):
        from qwen_triage.live.procs import signal_name

        core = " (core dumped)" if code == "3" else ""
        return f"was killed by signal {status} ({signal_name(int(status))}){core}"
    return None


def missing_journal_message(unit: str) -> str:
    u = unit_name(unit) if unit else "ollama.service"
    short = u.removesuffix(".service")
    return "\n".join(
        [
            f"{JOURNAL_TOOL} is not available on this machine, so there is no systemd journal to read.",
            "Give qwen-triage the server's output another way, for example:",
            f"  docker logs -f {short} 2>&1 | qwen-triage scan --follow -",
            f"  qwen-triage scan --follow /var/log/{short}.log",
            f"  qwen-triage run -- {short} serve          # start it under qwen-triage",
            "or, on the machine that has the journal:",
            f"  {JOURNAL_TOOL} -u {u} -o json --since today > {short}.json && qwen-triage scan {short}.json",
            f"  {JOURNAL_TOOL} -f -u {u} -o json | qwen-triage scan --follow -",
        ]
    )


def describe_window(since: str | None, since_given: bool) -> str:
    if since is None:
        return "this boot"
    return f"since {since}" if since_given else f"since the unit last started ({since})"


def nothing_read_notes(unit: str, window: str, kernel: bool, stderr: str) -> list[str]:
    """Why a journal read gave nothing, in the tool's own words first: "no entries" is only true where there is
    a journal (a container or ``Storage=none`` keeps none, and journalctl often says nothing of it)."""
    said = [f"{JOURNAL_TOOL} said: {stderr[:500]}"] if stderr else []
    if not journal_present():
        where = " or ".join(journal_dirs())
        kernel_too = (" The kernel's messages are not in a journal either: read them with `dmesg`, or "
                      "`qwen-triage check --kernel --format text`.") if kernel else ""
        return said + [f"no journal files were found ({where} hold none): journald keeps no log on this machine, "
                       f"so {unit}'s output is in no journal.{kernel_too}"]
    hint = "" if os.geteuid() == 0 else " (not root: add yourself to the systemd-journal group, or use sudo)"
    return [f"the journal has no entries for {unit}{' or the kernel' if kernel else ''} {window}{hint}", *said]


@dataclass(frozen=True)
class JournalOptions:
    """``qwen-triage journal``'s options, as the command line gives them."""

    unit: str = "ollama"
    since: str | None = None
    """start of the window (None: when the unit last started)"""
    kernel: bool = False
    """add the kernel log of the same window, merged into one timeline"""
    follow: bool = False
    user: bool = False
    fmt: str = "text"
    rule_dirs: tuple[str, ...] = ()
    engine: str = "auto"


def run(options: JournalOptions) -> int:
    """The `journal` command. Exit status like `scan`: 0 clean, 1 diagnoses, 2 could not read."""
    from qwen_triage.engine.scanner import load_compiled

    o = options
    return _journal(o.unit, o.since, o.kernel, o.follow, load_compiled(o.rule_dirs, o.engine), o.fmt, o.user)


def _journal(unit: str, since: str | None, kernel: bool, follow: bool, compiled: CompiledPack, fmt: str,
             user: bool) -> int:
    from qwen_triage.exits import EXIT_CLEAN, EXIT_ERROR, EXIT_FOUND
    from qwen_triage.live.follow import FollowLoop, stop_signals
    from qwen_triage.live.live_report import LiveReporter, Sink
    from qwen_triage.live.procs import stop_helper
    from qwen_triage.live.session import LiveSession
    from qwen_triage.report.emit import emit_report

    try:
        u = unit_name(unit)
    except JournalError as exc:
        print(f"qwen-triage: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if not journal_tool_available():
        print("qwen-triage: " + missing_journal_message(u), file=sys.stderr)
        return EXIT_ERROR
    since_given = since is not None
    if since is None:
        since = unit_start_since(u, user=user)
    cmd = journal_command(u, since, kernel=kernel, follow=follow, user=user)
    window = describe_window(since, since_given)
    reporter = LiveReporter(Sink(2), quiet=not follow)
    session = LiveSession(compiled, on_event=reporter.event)
    label = f"journal:{u}" + ("+kernel" if kernel else "")
    err = tempfile.TemporaryFile()
    try:
        src = live("journal", cmd, label, stderr=err)
    except OSError as exc:
        print(f"qwen-triage: cannot run {JOURNAL_TOOL}: {exc.strerror}", file=sys.stderr)
        return EXIT_ERROR
    proc = src.proc
    assert proc is not None
    print(f"qwen-triage: reading {u}{' and the kernel log' if kernel else ''}, {window}: {shlex.join(cmd)}",
          file=sys.stderr)
    loop = FollowLoop(session, note=reporter.note)
    inp = loop.add(src)
    with stop_signals() as stop_requested:
        try:
            loop.run(should_stop=stop_requested)
        except KeyboardInterrupt:
            pass
        finally:
            stop_helper(proc)
        report = session.finish()
    loop.close()
    err.seek(0)
    stderr = err.read().decode("utf-8", "replace").strip()
    err.close()
    if proc.returncode not in (0, None, -15) and not follow and inp.source.lines_read == 0:
        print(f"qwen-triage: {JOURNAL_TOOL} failed (status {proc.returncode}): {stderr or 'no message'}",
              file=sys.stderr)
        return EXIT_ERROR
    if inp.source.lines_read == 0:
        report.nothing_read = True  # not "no diagnosis": there was nothing to read
        report.notes += nothing_read_notes(u, window, kernel, stderr)
    report.notes.append(f"read with: {shlex.join(cmd)}")
    emit_report(report, fmt)
    return EXIT_FOUND if report.diagnoses else EXIT_CLEAN
