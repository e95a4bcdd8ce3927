"""One command builder for every journal read: the selection rule and the window each reader gets."""

from __future__ import annotations

import subprocess

from qwen_triage.inputs.journal import journal_command, pid_command, read_unit


def test_a_system_unit_read_alone_uses_the_tools_own_unit_rule() -> None:
    cmd = journal_command("ollama.service", cursor="s=abc;i=2", since="@17", quiet=True, binary="/bin/jc")
    assert cmd == ["/bin/jc", "--output=json", "--all", "--no-pager", "--quiet", "--after-cursor=s=abc;i=2",
                   "--unit=ollama.service"]  # the cursor wins over the time


def test_the_kernel_alone_is_selected_by_the_kernel_option() -> None:
    cmd = journal_command(kernel=True, since="@100", until="@200")
    assert cmd[-3:] == ["--since=@100", "--until=@200", "--dmesg"] and "--boot" not in cmd
    assert journal_command(kernel=True)[-2:] == ["--boot", "--dmesg"]


def test_a_unit_or_the_kernel_are_explicit_matches_joined_by_plus() -> None:
    cmd = journal_command("ollama", kernel=True)
    assert "--unit=ollama.service" not in cmd and "--dmesg" not in cmd
    assert cmd[cmd.index("_SYSTEMD_UNIT=ollama.service"):].count("+") == 3


def test_attach_follows_a_process_or_its_unit_from_its_start() -> None:
    assert pid_command(4242, since="@17") == ["journalctl", "--output=json", "--all", "--no-pager", "--since=@17",
                                              "--follow", "--lines=all", "_PID=4242"]
    assert pid_command(4242, unit="ollama")[-1] == "--unit=ollama.service"


def test_bugreport_reads_the_newest_lines_of_this_boot() -> None:
    calls: list[list[str]] = []

    def run(cmd, **kw):  # type: ignore[no-untyped-def]
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, b'{"MESSAGE": "hi"}\n', b"")

    data, how = read_unit("vllm", 500, 5, run=run)
    assert data == b'{"MESSAGE": "hi"}\n' and "newest 500 lines" in how
    assert calls == [["journalctl", "--output=json", "--all", "--no-pager", "--boot", "--lines=500",
                      "--unit=vllm.service"]]


def test_bugreport_says_why_the_journal_could_not_be_read() -> None:
    def run(cmd, **kw):  # type: ignore[no-untyped-def]
        return subprocess.CompletedProcess(cmd, 1, b"", b"No journal files were found.\n")

    data, how = read_unit("vllm", 500, 5, run=run)
    assert data is None and how == "journalctl failed: No journal files were found."
