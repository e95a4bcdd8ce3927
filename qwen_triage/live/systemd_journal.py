"""`qwen-triage journal [UNIT]`: a systemd unit's journal (and the kernel's), triaged.

One `journalctl -o json` process reads everything, with journal matches OR-ed
together — the unit's own output, systemd's messages about the unit (its
"Main process exited, code=killed, status=9/KILL" lines), its core dumps and,
with ``--kernel``, the kernel log (:data:`qwen_triage.live.kernel_log.JOURNAL_MATCH`; reading the kernel
log alone for a window is :mod:`qwen_triage.live.kernel_log`'s) — so the journal itself merges them into one
timeline, in time order, for any window and with ``--follow`` alike. The JSON is
decoded by the engine's journal reader (`qwen_triage.engine.sources`), which keeps each
line's program, pid and priority for the rules' `where:` constraints.

Everything that builds a command line or reads systemctl's answers is a plain
function, testable without systemd.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING, Callable

from qwen_triage.live import kernel_log

if TYPE_CHECKING:
    from qwen_triage.engine.matcher import CompiledPack

UNIT_SUFFIXES = (".service", ".socket", ".scope", ".slice", ".mount", ".target", ".timer", ".path", ".swap", ".device")
JOURNALCTL_BASE = ["journalctl", "--output=json", "--all", "--no-pager"]


class JournalError(Exception):
    pass


def unit_name(unit: str) -> str:
    """`ollama` -> `ollama.service`; names with a unit suffix are kept."""
    unit = unit.strip()
    if not unit:
        raise JournalError("empty unit name")
    if any(c in unit for c in "*?[") or any(c.isspace() for c in unit):
        raise JournalError(f"{unit!r}: give one unit by its full name (no patterns)")
    return unit if unit.endswith(UNIT_SUFFIXES) else unit + ".service"


def unit_matches(unit: str, user: bool = False, kernel: bool = False) -> list[str]:
    """journalctl match arguments: the unit's lines OR systemd's about it OR its core dumps [OR the kernel's]."""
    u = unit_name(unit)
    if user:
        matches = [f"_SYSTEMD_USER_UNIT={u}", "+", f"USER_UNIT={u}", "+", f"COREDUMP_USER_UNIT={u}"]
    else:
        matches = [f"_SYSTEMD_UNIT={u}", "+", f"UNIT={u}", "_PID=1", "+", f"COREDUMP_UNIT={u}"]
    if kernel:
        matches += ["+", kernel_log.JOURNAL_MATCH]
    return matches


def journal_command(
    unit: str,
    since: str | None = None,
    kernel: bool = False,
    follow: bool = False,
    user: bool = False,
) -> list[str]:
    """The one journalctl command that reads the unit (and kernel) for the window.

    ``since`` is anything `journalctl --since` takes (`2025-01-07 10:00`, `-1h`,
    `@1736244000`); None reads the current boot.
    """
    cmd = list(JOURNALCTL_BASE)
    cmd.append(f"--since={since}" if since else "--boot")
    if follow:
        cmd += ["--follow", "--lines=all"]
    return cmd + unit_matches(unit, user=user, kernel=kernel)


def pid_command(pid: int, unit: str | None = None, user: bool = False, since: str | None = None,
                follow: bool = True) -> list[str]:
    """Follow what one process (or its unit) writes to the journal; `attach` uses it."""
    cmd = list(JOURNALCTL_BASE)
    if since:
        cmd.append(f"--since={since}")
    if follow:
        cmd += ["--follow", "--lines=all" if since else "--lines=0"]
    return cmd + (unit_matches(unit, user=user) if unit else [f"_PID={pid}"])


def parse_systemctl_timestamp(value: str) -> str | None:
    """A `systemctl show -p …Timestamp --value` answer as a `--since` value; None when never."""
    value = value.strip()
    if not value or value in ("n/a", "0") or value.startswith("@0"):
        return None
    if value.startswith("@"):
        return value.split(".", 1)[0]
    # "Tue 2025-01-07 10:00:00 UTC": journalctl parses this form (systemd writes it to be read back)
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


def journalctl_available() -> bool:
    return shutil.which("journalctl") is not None


def missing_journalctl_message(unit: str) -> str:
    u = unit_name(unit) if unit else "ollama.service"
    short = u.removesuffix(".service")
    return "\n".join(
        [
            "journalctl is not available on this machine, so there is no systemd journal to read.",
            "Give qwen-triage the server's output another way, for example:",
            f"  docker logs -f {short} 2>&1 | qwen-triage scan --follow -",
            f"  qwen-triage scan --follow /var/log/{short}.log",
            f"  qwen-triage run -- {short} serve          # start it under qwen-triage",
            "or, on the machine that has the journal:",
            f"  journalctl -u {u} -o json --since today > {short}.json && qwen-triage scan {short}.json",
            f"  journalctl -f -u {u} -o json | qwen-triage scan --follow -",
        ]
    )


def describe_window(since: str | None, since_given: bool) -> str:
    if since is None:
        return "this boot"
    return f"since {since}" if since_given else f"since the unit last started ({since})"


def journal_main(
    unit: str,
    since: str | None,
    kernel: bool,
    follow: bool,
    compiled: "CompiledPack",
    fmt: str,
    user: bool = False,
) -> int:
    """The `journal` command. Exit status like `scan`: 0 clean, 1 diagnoses, 2 could not read."""
    from qwen_triage.exits import EXIT_CLEAN, EXIT_ERROR, EXIT_FOUND
    from qwen_triage.report.emit import emit_report
    from qwen_triage.live.follow import FollowLoop, stop_signals
    from qwen_triage.live.live_report import LiveReporter, Sink
    from qwen_triage.live.procs import stop_helper
    from qwen_triage.live.session import LiveSession

    try:
        u = unit_name(unit)
    except JournalError as exc:
        print(f"qwen-triage: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if not journalctl_available():
        print("qwen-triage: " + missing_journalctl_message(u), file=sys.stderr)
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
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
    except OSError as exc:
        print(f"qwen-triage: cannot run journalctl: {exc.strerror}", file=sys.stderr)
        return EXIT_ERROR
    assert proc.stdout is not None
    print(f"qwen-triage: reading {u}{' and the kernel log' if kernel else ''}, {window}: {shlex.join(cmd)}",
          file=sys.stderr)
    loop = FollowLoop(session, note=reporter.note)
    inp = loop.add_stream(proc.stdout.fileno(), label, kind="journal-json")
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
        print(f"qwen-triage: journalctl failed (status {proc.returncode}): {stderr or 'no message'}", file=sys.stderr)
        return EXIT_ERROR
    if inp.source.lines_read == 0:
        report.nothing_read = True  # not "no diagnosis": there was nothing to read
        hint = "" if os.geteuid() == 0 else " (not root: add yourself to the systemd-journal group, or use sudo)"
        report.notes.append(f"the journal has no entries for {u} {window}{hint}")
        if stderr:
            report.notes.append(f"journalctl said: {stderr[:500]}")
    report.notes.append(f"read with: {shlex.join(cmd)}")
    emit_report(report, fmt)
    return EXIT_FOUND if report.diagnoses else EXIT_CLEAN
