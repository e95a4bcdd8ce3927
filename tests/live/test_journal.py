"""`qwen-triage journal`: command lines and `-o json` parsing without systemd; a real journal where there is one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from qwen_triage.inputs import journal as journal_input
from qwen_triage.live import systemd_journal as journal
from tests.live.helpers import BANNER, FAKEBIN, LIVE, RULES, Live, env_with, qt_argv

JOURNAL_JSON = LIVE / "journal_ollama_kernel.json"


def test_unit_names() -> None:
    assert journal_input.unit_name("ollama") == "ollama.service"
    assert journal_input.unit_name("vllm@1") == "vllm@1.service"
    assert journal_input.unit_name("docker.socket") == "docker.socket"
    with pytest.raises(journal_input.JournalError):
        journal_input.unit_name("ollama*")


def test_journal_command_merges_unit_and_kernel_in_one_reader() -> None:
    assert journal_input.journal_command("ollama", since="@1736244000", kernel=True) == [
        "journalctl", "--output=json", "--all", "--no-pager", "--since=@1736244000",
        "_SYSTEMD_UNIT=ollama.service", "+", "UNIT=ollama.service", "_PID=1", "+", "COREDUMP_UNIT=ollama.service",
        "MESSAGE_ID=fc2e22bc6ee647b6b90729ab34a250b1", "_UID=0", "+", "_TRANSPORT=kernel",
    ]
    cmd = journal_input.journal_command("vllm", since=None, follow=True)
    assert cmd[4:7] == ["--boot", "--follow", "--lines=all"] and "_TRANSPORT=kernel" not in cmd
    uid = f"_UID={os.getuid()}"
    assert journal_input.journal_command("ollama", "-1h", user=True)[-9:] == [
        "_SYSTEMD_USER_UNIT=ollama.service", uid, "+", "USER_UNIT=ollama.service", uid, "+",
        "COREDUMP_USER_UNIT=ollama.service", "MESSAGE_ID=fc2e22bc6ee647b6b90729ab34a250b1", "_UID=0"]
    assert journal_input.pid_command(4242)[-3:] == ["--follow", "--lines=0", "_PID=4242"]
    assert journal_input.pid_command(4242, unit="ollama.service", since="@17")[4:7] == ["--since=@17", "--follow",
                                                                                   "--lines=all"]


class FakeRun:
    def __init__(self, *answers: tuple[int, str]) -> None:
        self.answers = list(answers)
        self.calls: list[list[str]] = []

    def __call__(self, cmd, **kwargs):  # type: ignore[no-untyped-def]
        self.calls.append(cmd)
        rc, out = self.answers.pop(0)
        return subprocess.CompletedProcess(cmd, rc, out, "")


def test_since_the_unit_last_started() -> None:
    new = FakeRun((0, "@1736244000\n"))
    assert journal.unit_start_since("ollama", run=new) == "@1736244000"
    assert new.calls[0][:3] == ["systemctl", "show", "ollama.service"] and "--timestamp=unix" in new.calls[0]
    old = FakeRun((1, ""), (0, "Tue 2025-01-07 10:00:00 UTC\n"))  # systemd < 248: no --timestamp
    assert journal.unit_start_since("ollama", run=old) == "Tue 2025-01-07 10:00:00 UTC"
    assert journal.unit_start_since("ollama", run=FakeRun((0, "\n"))) is None  # never started: read this boot
    assert journal.unit_start_since("ollama", run=FakeRun((0, "n/a\n"))) is None

    def missing(cmd, **kwargs):  # type: ignore[no-untyped-def]
        raise FileNotFoundError("systemctl")

    assert journal.unit_start_since("ollama", run=missing) is None


def test_exit_of_a_unit_main_process() -> None:
    show = "ExecMainPID=2211\nExecMainCode=2\nExecMainStatus=9\n"
    assert journal.describe_exec_main(show, 2211) == "was killed by signal 9 (SIGKILL)"
    assert journal.describe_exec_main(show, 999) is None
    assert journal.describe_exec_main("ExecMainPID=5\nExecMainCode=1\nExecMainStatus=1\n", 5) == "exited with status 1"


def test_journal_json_through_the_live_session(only_live_rules) -> None:
    """Entries in odd chunk sizes: fields kept (kernel transport), byte-array and multi-line messages decoded."""
    from qwen_triage.engine.scanner import scan_paths
    from qwen_triage.live.session import LiveSession

    data = JOURNAL_JSON.read_bytes()
    events = []
    session = LiveSession(only_live_rules, on_event=events.append)
    inp = session.add_input("journal")
    step = 1
    pos = 0
    while pos < len(data):
        session.feed(inp, data[pos : pos + step])
        pos += step
        step = step * 3 % 997 + 1
    report = session.finish()
    assert inp.kind == "journal-json"
    rows = data.decode().splitlines()
    xid_line = next(i for i, r in enumerate(rows, 1) if "Xid (PCI:0000:3b:00)" in r)
    by_class = {d.class_: d for d in report.diagnoses}
    xid = by_class["hardware.xid_fatal"]
    assert xid.facts == {"pci": "0000:3b:00", "xid": 79}  # the user-space "Xid" line (13) is not the kernel's
    assert xid.evidence[0].line == xid_line
    assert {s.class_ for s in xid.symptoms} == {"process.segfault"}
    assert "memory.gpu_oom" in by_class  # first line of a two-line MESSAGE
    assert [o.rule for o in report.observations] == ["livetest.runner-started"]
    assert [(e.kind, e.class_) for e in events] == [
        ("observation", "server.startup_timeout"),
        ("diagnosis", "hardware.xid_fatal"),
        ("diagnosis", "memory.gpu_oom"),
        ("symptom", "process.segfault"),
    ]
    whole = scan_paths([str(JOURNAL_JSON)], only_live_rules)  # the same as `scan` of the file
    assert [d.class_ for d in whole.diagnoses] == [d.class_ for d in report.diagnoses]
    assert report.inputs[0].lines == len(rows)


def _fake_env(tmp_path, **extra: str) -> dict[str, str]:
    return env_with(**{
        "PATH": f"{FAKEBIN}:{env_with()['PATH']}",
        "FAKE_JOURNALCTL_ARGS": str(tmp_path / "journalctl.args"),
        "FAKE_SYSTEMCTL_ARGS": str(tmp_path / "systemctl.args"),
        "FAKE_JOURNALCTL_DATA": str(JOURNAL_JSON),
        **extra,
    })


def test_journal_command_end_to_end_with_a_stand_in_journalctl(tmp_path) -> None:
    proc = subprocess.run(qt_argv("journal", "ollama", "--kernel", "--rules", str(RULES), "--format", "json"),
                          capture_output=True, env=_fake_env(tmp_path), timeout=60)
    assert proc.returncode == 1, proc.stderr.decode()
    args = json.loads((tmp_path / "journalctl.args").read_text().splitlines()[0])
    assert args == journal_input.journal_command("ollama", "@1736244000", kernel=True)[1:]
    report = json.loads(proc.stdout)
    assert "hardware.xid_fatal" in [d["class"] for d in report["diagnoses"]]
    assert report["inputs"][0]["kind"] == "journal-json"
    assert any(n.startswith("read with: journalctl --output=json") for n in report["notes"])
    assert b"since the unit last started (@1736244000)" in proc.stderr


CORE_ID = "fc2e22bc6ee647b6b90729ab34a250b1"  # systemd-coredump's message id


def _entry(i: int, message: str, **fields: str) -> dict[str, str]:
    return {"__CURSOR": f"s=x;i={i}", "__REALTIME_TIMESTAMP": str(1736244000_000000 + i), "MESSAGE": message,
            "PRIORITY": "3", **fields}


@pytest.mark.parametrize("user", [False, True], ids=["system", "user"])
def test_a_local_user_cannot_add_entries_to_a_unit_s_view(tmp_path, user: bool) -> None:
    # issue 29: `logger --journald` sets any field it likes, COREDUMP_UNIT= and USER_UNIT= too; only what journald
    # itself adds (_UID, _PID, _SYSTEMD_UNIT) says who wrote an entry
    core, unit_field = ("COREDUMP_USER_UNIT", "USER_UNIT") if user else ("COREDUMP_UNIT", "UNIT")
    own = {"_SYSTEMD_USER_UNIT": "ollama.service", "_UID": str(os.getuid())} if user else \
        {"_SYSTEMD_UNIT": "ollama.service", "_UID": "998"}
    entries = [
        _entry(1, "ollama's own line", **own),
        _entry(2, "Process 812 (ollama) of user 998 dumped core.", MESSAGE_ID=CORE_ID, _UID="0",
               **{core: "ollama.service"}),
        _entry(3, "forged: no message id", _UID="0", **{core: "ollama.service"}),
        _entry(4, "forged: the message id, not root", MESSAGE_ID=CORE_ID, _UID="4242", **{core: "ollama.service"}),
        _entry(5, "forged: systemd's field, not from PID 1 (nor from this user)", _PID="4242", _UID="4242",
               **{unit_field: "ollama.service"}),
        _entry(6, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.", _TRANSPORT="kernel"),
    ]
    data = tmp_path / "journal.json"
    data.write_text("".join(json.dumps(e) + "\n" for e in entries))
    argv = ["journal", "ollama", "--since", "@1736244000", "--format", "json", "--rules", str(RULES)]
    proc = subprocess.run(qt_argv(*argv, "--user" if user else "--kernel"), capture_output=True, timeout=60,
                          env=_fake_env(tmp_path, FAKE_JOURNALCTL_DATA=str(data), FAKE_JOURNALCTL_MATCH="1"))
    assert proc.returncode in (0, 1), proc.stderr.decode()
    args = json.loads((tmp_path / "journalctl.args").read_text().splitlines()[0])
    assert f"MESSAGE_ID={CORE_ID}" in args and "_UID=0" in args
    out = subprocess.run([str(FAKEBIN / "journalctl"), *args], capture_output=True, text=True, timeout=30,
                         env=_fake_env(tmp_path, FAKE_JOURNALCTL_DATA=str(data), FAKE_JOURNALCTL_MATCH="1"))
    read = [json.loads(line)["MESSAGE"] for line in out.stdout.splitlines()]
    assert read == [e["MESSAGE"] for e in entries[:2]] + ([] if user else [entries[5]["MESSAGE"]])
    assert json.loads(proc.stdout)["inputs"][0]["lines"] == len(read)


def test_journal_follow_prints_live_and_summarises_on_ctrl_c(tmp_path) -> None:
    live = Live(qt_argv("journal", "--follow", "--since", "-10min", "--rules", str(RULES), "--format", "json"),
                env=_fake_env(tmp_path, FAKE_JOURNALCTL_DELAY="0.05"))
    try:
        live.err.wait_for(BANNER)
        live.err.wait_for("diagnosis 2")
        live.ctrl_c()
        rc = live.wait()
    finally:
        live.kill()
    assert rc == 1
    args = json.loads((tmp_path / "journalctl.args").read_text().splitlines()[0])
    assert "--since=-10min" in args and "--follow" in args
    assert json.loads(live.out.data)["diagnoses"]


def test_without_journalctl_the_message_shows_the_pipe_to_use(tmp_path) -> None:
    proc = subprocess.run(qt_argv("journal", "vllm"), capture_output=True, env=env_with(PATH=str(tmp_path)),
                          timeout=60)
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert "journalctl is not available" in err
    assert "docker logs -f vllm 2>&1 | qwen-triage scan --follow -" in err
    assert "journalctl -f -u vllm.service -o json | qwen-triage scan --follow -" in err


def _journal_readable() -> bool:
    if shutil.which("journalctl") is None:
        return False
    try:
        out = subprocess.run(["journalctl", "-n", "1", "-o", "json", "--no-pager"], capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and out.stdout.strip().startswith(b"{")


@pytest.mark.journal
@pytest.mark.skipif(not _journal_readable(), reason="journalctl cannot read a journal here")
def test_a_real_journal() -> None:
    unit = "systemd-journald"
    proc = subprocess.run(qt_argv("journal", unit, "--since", "-1d", "--kernel", "--format", "json"),
                          capture_output=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr.decode()
    report = json.loads(proc.stdout)
    assert report["inputs"][0]["kind"] == "journal-json"
    assert report["inputs"][0]["lines"] > 0  # journald logs its own start; the kernel window is never empty


@pytest.mark.parametrize("kernel", [False, True])
def test_no_journal_files_is_said_not_no_entries(tmp_path, monkeypatch: pytest.MonkeyPatch, kernel: bool) -> None:
    """Issue 29 §3: on a machine without journal files (a container, Storage=none) `journal UNIT` says so, and
    what journalctl said is passed on; "no entries" is only said where there is a journal to have them."""
    from qwen_triage.live.systemd_journal import nothing_read_notes

    monkeypatch.delenv("QWEN_TRIAGE_JOURNALCTL", raising=False)
    monkeypatch.setenv("QWEN_TRIAGE_JOURNAL_DIRS", f"{tmp_path / 'run'}{os.pathsep}{tmp_path / 'var'}")
    (tmp_path / "var").mkdir()  # there, but empty: what Debian leaves without persistent storage
    notes = nothing_read_notes("ollama.service", "this boot", kernel, "No journal files were found.")
    assert notes[0] == "journalctl said: No journal files were found."
    assert "no journal files were found" in notes[1] and "no entries" not in " ".join(notes)
    assert ("dmesg" in notes[1]) is kernel
    quiet = nothing_read_notes("ollama.service", "this boot", kernel, "")  # journalctl -u says nothing of it
    assert len(quiet) == 1 and "no journal files were found" in quiet[0]
    (tmp_path / "var" / "machine-id").mkdir()
    present = nothing_read_notes("ollama.service", "this boot", kernel, "")
    assert present[0].startswith("the journal has no entries for ollama.service")
