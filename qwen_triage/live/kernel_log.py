"""The kernel log of this machine for a time window: the one reader the runner, ``journal`` and checks share.

Xid errors, NVRM messages, PCIe AER reports and the OOM killer land in the kernel log, not in the server's
output, so a failed launch is only explained with the kernel's lines of the same minutes beside its log.
The journal is read first (``journalctl -k -o json``: exact times, and the engine's journal reader keeps
each line's fields); where it is missing or empty (containers, no systemd) ``dmesg --time-format=iso`` is
read and cut to the window by its timestamps. ``journal UNIT --kernel`` merges the kernel into a unit's own
journal query instead, with :data:`JOURNAL_MATCH`.

Command lines are plain functions and the runner of subprocesses is a parameter, so everything here is
testable without a kernel log.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

# journalctl match for kernel messages (what -k selects), OR-ed into a unit's matches with "+".
JOURNAL_MATCH = "_TRANSPORT=kernel"
SLACK_S = 2.0  # seconds added on both sides: clocks and the kernel's timestamps are coarse
TIMEOUT_S = 15

Runner = Callable[..., subprocess.CompletedProcess]


@dataclass(frozen=True)
class Window:
    """Wall-clock seconds (Unix time), widened by ``slack`` on both sides."""

    since: float
    until: float
    slack: float = SLACK_S

    @property
    def lo(self) -> int:
        return int(self.since - self.slack)

    @property
    def hi(self) -> int:
        return int(self.until + self.slack)

    def holds(self, t: float) -> bool:
        return self.lo <= t <= self.hi


@dataclass(frozen=True)
class KernelLog:
    """What was read: ``text`` (journal JSON or dmesg lines; None when unreadable) and ``how``, in words."""

    text: bytes | None
    how: str


def journalctl_command(window: Window) -> list[str]:
    """``journalctl -k`` as JSON for the window."""
    return ["journalctl", "-k", "-o", "json", "--no-pager", "-q", f"--since=@{window.lo}", f"--until=@{window.hi}"]


def dmesg_command() -> list[str]:
    """``dmesg`` with ISO timestamps (cut to the window by :func:`dmesg_in_window`)."""
    return ["dmesg", "--time-format=iso"]


def dmesg_in_window(output: bytes, window: Window) -> bytes:
    """The lines of ``dmesg --time-format=iso`` output stamped inside the window."""
    keep = []
    for line in output.splitlines():
        stamp = line.split(b" ", 1)[0].decode("ascii", "replace")
        try:
            t = datetime.fromisoformat(stamp.replace(",", ".")).timestamp()
        except (ValueError, OverflowError, OSError):  # a stamp datetime cannot place
            continue
        if window.holds(t):
            keep.append(line)
    return b"\n".join(keep) + (b"\n" if keep else b"")


def read_window(window: Window, run: Runner = subprocess.run) -> KernelLog:
    """The kernel log of the window: the journal's, else dmesg's; ``text`` None and why, when neither is readable."""
    try:
        cp = run(journalctl_command(window), capture_output=True, timeout=TIMEOUT_S)
        if cp.returncode == 0 and cp.stdout.strip():
            return KernelLog(cp.stdout, "journalctl -k")
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        cp = run(dmesg_command(), capture_output=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return KernelLog(None, "kernel log not readable here (no journalctl, no dmesg)")
    if cp.returncode != 0:
        err = cp.stderr.decode("utf-8", "replace").strip().splitlines()
        return KernelLog(None, f"kernel log not readable here ({err[0] if err else 'dmesg failed'})")
    return KernelLog(dmesg_in_window(cp.stdout, window), "dmesg")
