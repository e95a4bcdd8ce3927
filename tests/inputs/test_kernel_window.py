"""The kernel log of a window, which the runner and `bugreport` share: command lines, the window, the dmesg fallback."""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone

from qwen_triage.inputs.journal import KERNEL_MATCH, journal_command
from qwen_triage.inputs.kernel import Window, dmesg_in_window, journal_window_command, read_window

T = datetime(2025, 1, 1, 10, 0, 0, tzinfo=timezone.utc).timestamp()
DMESG = (b"2025-01-01T09:00:00,000000+00:00 NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
         b"2025-01-01T09:59:59,000000+00:00 NVRM: within the slack\n"
         b"not a stamped line\n"
         b"2025-01-01T10:00:05,000000+00:00 NVRM: Xid (PCI:0000:89:00): 79, GPU has fallen off the bus.\n")


def test_window_is_widened_by_the_slack():
    w = Window(T, T + 30)
    assert (w.lo, w.hi) == (int(T) - 2, int(T) + 32)
    assert w.holds(T - 2) and not w.holds(T - 3) and w.holds(T + 32)
    assert Window(T, T, slack=0).hi == int(T)


def test_journal_window_command_reads_the_kernel_as_json_for_the_window():
    assert journal_window_command(Window(T, T + 30)) == [
        "journalctl", "--output=json", "--all", "--no-pager", "--quiet", f"--since=@{int(T) - 2}",
        f"--until=@{int(T) + 32}", "--dmesg"]


def test_unit_journal_merges_the_kernel_with_the_same_match():
    cmd = journal_command("ollama", None, kernel=True)
    assert cmd[-2:] == ["+", KERNEL_MATCH]


def test_dmesg_is_cut_to_the_window():
    got = dmesg_in_window(DMESG, Window(T, T + 30))
    assert b"0000:89:00" in got and b"within the slack" in got
    assert b"0000:3b:00" not in got and b"not a stamped" not in got
    assert dmesg_in_window(DMESG, Window(T + 3600, T + 3601)) == b""


def test_journal_first_then_dmesg():
    calls = []

    def run(cmd, **kw):
        calls.append(cmd[0])
        if cmd[0] == "journalctl":
            return subprocess.CompletedProcess(cmd, 0, b'{"MESSAGE": "NVRM: Xid 79"}\n', b"")
        raise AssertionError("dmesg is not read when the journal answered")

    got = read_window(Window(T, T + 30), run)
    assert calls == ["journalctl"] and got.how == "journalctl -k" and b"Xid 79" in got.text

    def empty_journal(cmd, **kw):
        out = b"" if cmd[0] == "journalctl" else DMESG
        return subprocess.CompletedProcess(cmd, 0, out, b"")

    got = read_window(Window(T, T + 30), empty_journal)
    assert got.how == "dmesg" and b"0000:89:00" in got.text


def test_unreadable_says_why():
    def nothing(cmd, **kw):
        raise FileNotFoundError(cmd[0])

    got = read_window(Window(0, 1), nothing)
    assert got.text is None and "no journalctl, no dmesg" in got.how
