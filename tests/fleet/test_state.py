"""The --state store and the incremental readers: positions, rotation, truncation, cursors, hold, boot id."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from qwen_triage.fleet.check import CheckConfig, run_check
from qwen_triage.inputs.file import FileReader
from qwen_triage.inputs.journal import JournalReader
from qwen_triage.inputs.source import JOURNAL_JSON
from qwen_triage.inputs.kernel import KmsgReader, parse_kmsg
from qwen_triage.fleet.state import (
    MAX_STATE_BYTES,
    ActiveDiagnosis,
    State,
    StateStore,
    read_boot_id,
)

from .conftest import OOM, QUIET, XID79, BootId, run_check_cli


def read_all(reader, prev, budget=1 << 30, boot_id="b1"):  # type: ignore[no-untyped-def]
    data = b"".join(c.data for c in reader.read(prev, budget, time.monotonic() + 30, boot_id))
    return data, reader.state


# -- the store --------------------------------------------------------------------------------------


def test_store_is_private_json_and_atomic(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "st")
    with store.locked():
        st = store.load()
        st.active["x"] = ActiveDiagnosis(class_="hardware.xid_fatal", rule="r", severity="critical", source="kernel",
                                         first_seen=1.0, last_seen=2.0)
        store.save(st)
    assert stat.S_IMODE((tmp_path / "st").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "st" / "state.json").stat().st_mode) == 0o600
    data = json.loads((tmp_path / "st" / "state.json").read_text())
    assert data["active"]["x"]["class"] == "hardware.xid_fatal"
    assert [p.name for p in (tmp_path / "st").iterdir() if p.name.endswith(".tmp")] == []
    again = StateStore(tmp_path / "st").load()
    assert again.active["x"].last_seen == 2.0


@pytest.mark.parametrize("content", [b"{not json", b'{"version": 1, "sources": 5}', b"\x80\x81pickle?"])
def test_corrupt_state_is_empty_with_a_note(tmp_path: Path, content: bytes) -> None:
    d = tmp_path / "st"
    d.mkdir(mode=0o700)
    (d / "state.json").write_bytes(content)
    store = StateStore(d)
    st = store.load()
    assert st.sources == {} and st.active == {}
    assert store.notes and "starting empty" in store.notes[0]


def test_oversized_state_is_not_read(tmp_path: Path) -> None:
    d = tmp_path / "st"
    d.mkdir(mode=0o700)
    (d / "state.json").write_bytes(b" " * (MAX_STATE_BYTES + 10))
    store = StateStore(d)
    assert store.load().active == {}
    assert "larger than" in store.notes[0]


def test_state_stays_bounded(tmp_path: Path) -> None:
    st = State()
    for i in range(2000):
        st.active[str(i)] = ActiveDiagnosis(class_="memory.gpu_oom", rule="r", severity="error", source=f"s{i}",
                                            summary="x" * 5000, first_seen=i, last_seen=i)
    store = StateStore(tmp_path / "st")
    store.prepare()
    store.save(st)
    assert (tmp_path / "st" / "state.json").stat().st_size < MAX_STATE_BYTES
    assert len(store.load().active) == 512


def test_lock_excludes_a_second_check(tmp_path: Path) -> None:
    from qwen_triage.fleet.state import StateError

    a = StateStore(tmp_path / "st")
    with a.locked():
        with pytest.raises(StateError, match="locked"):
            with StateStore(tmp_path / "st").locked(timeout=0.2):
                pass


def test_boot_id_is_injectable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "b").write_text("abc-123\n")
    monkeypatch.setenv("QWEN_TRIAGE_BOOT_ID_FILE", str(tmp_path / "b"))
    assert read_boot_id() == "abc-123"
    monkeypatch.delenv("QWEN_TRIAGE_BOOT_ID_FILE")
    if Path("/proc/sys/kernel/random/boot_id").exists():
        assert len(read_boot_id()) == 36


def test_which_classes_wait_for_a_reboot() -> None:
    from .conftest import bundled_policy

    held_until_boot = bundled_policy().until_boot  # rules/classes.yaml: `held_until_boot: true`
    assert held_until_boot("hardware.xid_fatal") and held_until_boot("node.kernel_panic")
    assert held_until_boot("runtime.nvml_mismatch") and held_until_boot("runtime.fabric_manager_down")
    assert not held_until_boot("memory.gpu_oom") and not held_until_boot("runtime.no_gpu_visible")


# -- files ------------------------------------------------------------------------------------------


def test_file_reads_only_new_whole_lines(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"one\ntwo\nthr")
    data, st = read_all(FileReader(str(log)), None)
    assert data == b"one\ntwo\n" and st.file.offset == 8 and st.file.line == 2
    with open(log, "ab") as fh:
        fh.write(b"ee\nfour\n")
    r = FileReader(str(log))
    data, st = read_all(r, st)
    assert data == b"three\nfour\n" and st.file.line == 4 and st.lines_total == 4
    data, st = read_all(FileReader(str(log)), st)
    assert data == b""


def test_file_chunks_carry_line_numbers_across_runs(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"a\nb\n")
    _, st = read_all(FileReader(str(log)), None)
    with open(log, "ab") as fh:
        fh.write(b"c\n")
    chunks = list(FileReader(str(log)).read(st, 1 << 20, time.monotonic() + 5, "b"))
    assert chunks[0].first_line == 3


def test_copytruncate_is_read_again_from_the_start(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"x" * 100 + b"\n")
    _, st = read_all(FileReader(str(log)), None)
    with open(log, "r+b") as fh:  # copytruncate: same inode, emptied, then written again
        fh.truncate(0)
        fh.write(b"new\n")
    r = FileReader(str(log))
    data, st = read_all(r, st)
    assert data == b"new\n"
    assert any("truncated" in n for n in r.notes)


def test_rewritten_in_place_longer_is_detected_by_its_head(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"first version\n")
    _, st = read_all(FileReader(str(log)), None)
    with open(log, "r+b") as fh:  # same inode, different start, now longer than the old offset
        fh.write(b"SECOND version, longer than before\n")
    r = FileReader(str(log))
    data, _ = read_all(r, st)
    assert data == b"SECOND version, longer than before\n"
    assert any("rewritten" in n for n in r.notes)


def test_rotation_reads_the_old_files_tail_first(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"old 1\n")
    _, st = read_all(FileReader(str(log)), None)
    with open(log, "ab") as fh:
        fh.write(b"old 2 written after the last check\n")
    os.rename(log, tmp_path / "a.log.1")  # logrotate's create mode
    log.write_bytes(b"new 1\n")
    r = FileReader(str(log))
    data, st = read_all(r, st)
    assert data == b"old 2 written after the last check\nnew 1\n"
    assert st.file.ino == log.stat().st_ino and st.file.line == 3
    assert any("rotated" in n for n in r.notes)


def test_rotation_under_a_dated_name_is_found_too(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"old 1\n")
    _, st = read_all(FileReader(str(log)), None)
    with open(log, "ab") as fh:
        fh.write(b"old 2\n")
    os.rename(log, tmp_path / "a.log-20261201")
    log.write_bytes(b"new 1\n")
    data, _ = read_all(FileReader(str(log)), st)
    assert data == b"old 2\nnew 1\n"


def test_rotation_to_an_unknown_name_says_what_was_lost(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"old 1\n")
    _, st = read_all(FileReader(str(log)), None)
    (tmp_path / "archive").mkdir()
    os.rename(log, tmp_path / "archive" / "x")
    log.write_bytes(b"new 1\n")
    r = FileReader(str(log))
    data, _ = read_all(r, st)
    assert data == b"new 1\n"
    assert any("not found" in n for n in r.notes)


def test_budget_leaves_the_rest_for_the_next_run_even_across_a_rotation(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"start\n")
    _, st = read_all(FileReader(str(log)), None)
    lines = [f"old line {i:04d}\n".encode() for i in range(2000)]
    with open(log, "ab") as fh:
        fh.write(b"".join(lines))
    os.rename(log, tmp_path / "a.log.1")
    log.write_bytes(b"new line\n")
    got = b""
    for _ in range(20):
        r = FileReader(str(log))
        data, st = read_all(r, st, budget=8192)
        got += data
        assert len(data) <= 8192
        if not r.more and data.endswith(b"new line\n"):
            break
    assert got == b"".join(lines) + b"new line\n"


def test_missing_file_is_an_error_not_silence(tmp_path: Path) -> None:
    r = FileReader(str(tmp_path / "nope.log"))
    data, st = read_all(r, None)
    assert data == b"" and st is None and "no such file" in (r.error or "")


def test_from_end_skips_history_on_first_read_only(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"history\n")
    data, st = read_all(FileReader(str(log), from_end=True), None)
    assert data == b""
    with open(log, "ab") as fh:
        fh.write(b"fresh\n")
    data, _ = read_all(FileReader(str(log), from_end=True), st)
    assert data == b"fresh\n"


# -- journal, kmsg ----------------------------------------------------------------------------------

FAKE_JOURNALCTL = r'''#!/usr/bin/env python3
import json, sys, os
entries = [json.loads(l) for l in open(os.environ["FAKE_JOURNAL"])]
args = sys.argv[1:]
open(os.environ["FAKE_JOURNAL"] + ".args", "a").write(json.dumps(args) + "\n")
after = next((a.split("=", 1)[1] for a in args if a.startswith("--after-cursor=")), None)
since = next((a.split("=", 1)[1] for a in args if a.startswith("--since=@")), None)
start = 0
if after is not None:
    start = next((i + 1 for i, e in enumerate(entries) if e["__CURSOR"] == after), None)
    if start is None:
        sys.exit("Failed to seek to cursor: Invalid argument")
elif since is not None:
    start = next((i for i, e in enumerate(entries) if int(e["__REALTIME_TIMESTAMP"]) >= int(since[1:]) * 10**6),
                 len(entries))
for e in entries[start:]:
    print(json.dumps(e))
'''


def journal_entry(i: int, message: str, ts: float, transport: str = "kernel") -> dict[str, str]:
    return {"__CURSOR": f"s=abc;i={i};t={int(ts * 1e6):x}", "__REALTIME_TIMESTAMP": str(int(ts * 1e6)), "MESSAGE": message,
            "_TRANSPORT": transport, "PRIORITY": "3", "_HOSTNAME": "gpu1"}


@pytest.fixture
def fake_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    exe = tmp_path / "journalctl"
    exe.write_text(FAKE_JOURNALCTL)
    exe.chmod(0o755)
    store = tmp_path / "journal.jsonl"
    store.write_text("")
    monkeypatch.setenv("QWEN_TRIAGE_JOURNALCTL", str(exe))
    monkeypatch.setenv("FAKE_JOURNAL", str(store))
    return store


def append_journal(store: Path, *entries: dict[str, str]) -> None:
    with open(store, "a") as fh:
        for e in entries:
            fh.write(json.dumps(e) + "\n")


def test_journal_cursor_is_stored_and_used(fake_journal: Path) -> None:
    now = time.time()
    append_journal(fake_journal, journal_entry(1, "hello", now), journal_entry(2, XID79.strip(), now))
    data, st = read_all(JournalReader(None), None)
    assert data.count(b"\n") == 2 and st.cursor.startswith("s=abc;i=2;")
    append_journal(fake_journal, journal_entry(3, "later", now))
    data, st = read_all(JournalReader(None), st)
    assert b"later" in data and b"hello" not in data and st.cursor.startswith("s=abc;i=3;")
    calls = [json.loads(line) for line in Path(str(fake_journal) + ".args").read_text().splitlines()]
    assert "--dmesg" in calls[0] and "--boot" in calls[0]
    assert any(a.startswith("--after-cursor=s=abc;i=2;") for a in calls[1])
    data, st = read_all(JournalReader("ollama"), None)
    calls = [json.loads(line) for line in Path(str(fake_journal) + ".args").read_text().splitlines()]
    assert "--unit=ollama.service" in calls[-1]


def test_old_journal_evidence_past_the_hold_is_not_raised(fake_journal: Path, compiled, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    now = time.time()
    append_journal(fake_journal, journal_entry(1, OOM.strip(), now - 7200, transport="stdout"),
                   journal_entry(2, "fine", now))
    st = State()
    res = run_check([JournalReader("vllm")], st, compiled, CheckConfig(hold=3600), "b1", now=now)
    assert res.active == []
    append_journal(fake_journal, journal_entry(3, OOM.strip(), now - 10, transport="stdout"))
    res = run_check([JournalReader("vllm")], st, compiled, CheckConfig(hold=3600), "b1", now=now)
    assert [d.class_ for d in res.active] == ["memory.gpu_oom"]
    assert abs(res.active[0].last_seen - (now - 10)) < 1


def kmsg_record(seq: int, usec: int, msg: str) -> bytes:
    return f"3,{seq},{usec},-;{msg}\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n".encode()


def test_kmsg_resumes_after_the_stored_sequence_number(tmp_path: Path) -> None:
    k = tmp_path / "kmsg"
    k.write_bytes(kmsg_record(1, 1_000_000, "boot") + kmsg_record(2, 2_500_000, "NVRM: something"))
    data, st = read_all(KmsgReader(str(k)), None, boot_id="b1")
    assert data == b"[    1.000000] boot\n[    2.500000] NVRM: something\n" and st.kmsg_seq == 2
    with open(k, "ab") as fh:
        fh.write(kmsg_record(3, 3_000_000, "third"))
    data, st = read_all(KmsgReader(str(k)), st, boot_id="b1")
    assert data == b"[    3.000000] third\n"
    # a reboot restarts the numbering: everything of the new boot is read
    k.write_bytes(kmsg_record(1, 1_000_000, "new boot"))
    data, st = read_all(KmsgReader(str(k)), st, boot_id="b2")
    assert data == b"[    1.000000] new boot\n" and st.boot_id == "b2"


def test_parse_kmsg() -> None:
    assert parse_kmsg(b"6,339,5140900,-;NVRM: loading") == (339, 5140900, b"NVRM: loading")
    assert parse_kmsg(b"garbage") is None


# -- hold and boot --------------------------------------------------------------------------------


def test_hardware_is_held_until_reboot_and_others_for_the_hold(tmp_path: Path, compiled) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "k.log"
    log.write_text(QUIET + XID79 + OOM)
    st = State()
    t = 1_000_000.0
    cfg = CheckConfig(hold=60)
    res = run_check([FileReader(str(log))], st, compiled, cfg, "boot-A", now=t)
    assert {d.class_ for d in res.active} == {"hardware.xid_fatal", "memory.gpu_oom"}
    assert res.active[0].class_ == "hardware.xid_fatal" and res.active[0].until_boot
    assert sorted(k.split("\t")[0] for k in res.new) == ["hardware.xid_fatal", "memory.gpu_oom"]
    res = run_check([FileReader(str(log))], st, compiled, cfg, "boot-A", now=t + 30)
    assert {d.class_ for d in res.active} == {"hardware.xid_fatal", "memory.gpu_oom"} and res.new == []
    res = run_check([FileReader(str(log))], st, compiled, cfg, "boot-A", now=t + 61)
    assert [d.class_ for d in res.active] == ["hardware.xid_fatal"]
    assert [d.class_ for d in res.cleared] == ["memory.gpu_oom"]
    res = run_check([FileReader(str(log))], st, compiled, cfg, "boot-A", now=t + 10 * 86400)
    assert [d.class_ for d in res.active] == ["hardware.xid_fatal"]
    res = run_check([FileReader(str(log))], st, compiled, cfg, "boot-B", now=t + 10 * 86400 + 1)
    assert res.active == [] and res.status == "ok"
    assert [d.class_ for d in res.cleared] == ["hardware.xid_fatal"]


NONFATAL_SXID = "[73309.599396] nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate\n"
FATAL_SXID = "[73310.000001] nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 24007, Fatal, Link 28 sourcetrack timeout error (First)\n"


def test_a_warning_of_a_node_class_clears_after_the_hold_and_an_error_of_it_waits_for_a_reboot(
        tmp_path: Path, compiled) -> None:  # type: ignore[no-untyped-def]
    """A non-fatal SXid (the fabric corrected it) is a warning: shown, but not held until the node reboots."""
    log = tmp_path / "k.log"
    log.write_text(QUIET + NONFATAL_SXID)
    st = State()
    t = 1_000_000.0
    cfg = CheckConfig(hold=60)
    res = run_check([FileReader(str(log))], st, compiled, cfg, "boot-A", now=t)
    assert [(d.class_, d.severity, d.until_boot) for d in res.active] == [("hardware.nvlink_error", "warning", False)]
    res = run_check([FileReader(str(log))], st, compiled, cfg, "boot-A", now=t + 61)
    assert res.active == [] and [d.class_ for d in res.cleared] == ["hardware.nvlink_error"]
    with open(log, "a") as fh:
        fh.write(NONFATAL_SXID + FATAL_SXID)
    res = run_check([FileReader(str(log))], st, compiled, cfg, "boot-A", now=t + 100)
    assert [(d.class_, d.severity, d.until_boot) for d in res.active] == [("hardware.nvlink_error", "critical", True)]
    with open(log, "a") as fh:
        fh.write(NONFATAL_SXID)  # a later warning of the class does not undo the hold
    res = run_check([FileReader(str(log))], st, compiled, cfg, "boot-A", now=t + 10 * 86400)
    assert [(d.class_, d.until_boot) for d in res.active] == [("hardware.nvlink_error", True)]


def test_new_evidence_extends_the_hold(tmp_path: Path, compiled) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "v.log"
    log.write_text(OOM)
    st = State()
    t = 1_000_000.0
    cfg = CheckConfig(hold=60)
    run_check([FileReader(str(log))], st, compiled, cfg, "b", now=t)
    with open(log, "a") as fh:
        fh.write(OOM)
    res = run_check([FileReader(str(log))], st, compiled, cfg, "b", now=t + 50)
    assert res.active[0].count == 2 and res.active[0].first_seen == t and res.active[0].last_seen == t + 50
    res = run_check([FileReader(str(log))], st, compiled, cfg, "b", now=t + 100)
    assert [d.class_ for d in res.active] == ["memory.gpu_oom"]


def test_nothing_is_lost_between_runs_of_a_growing_file(tmp_path: Path, compiled) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "k.log"
    log.write_text(QUIET * 50000)  # ~3.5 MB of noise, read 256 KiB a run
    st = State()
    cfg = CheckConfig(max_bytes=256 << 10)
    with open(log, "a") as fh:
        fh.write(XID79)
    for i in range(40):
        res = run_check([FileReader(str(log))], st, compiled, cfg, "b", now=1000.0 + i)
        if res.active:
            break
        assert res.sources[0].more
    assert [d.class_ for d in res.active] == ["hardware.xid_fatal"]
    assert res.lines_read_total[str(log)] == 50001


def test_rotation_before_the_new_file_exists_keeps_the_old_position(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"old 1\n")
    _, st = read_all(FileReader(str(log)), None)
    with open(log, "ab") as fh:
        fh.write(b"old 2\n")
    os.rename(log, tmp_path / "a.log.1")
    r = FileReader(str(log))
    data, st = read_all(r, st)
    assert data == b"old 2\n" and r.error is None and st.file.line == 2
    log.write_bytes(b"new 1\n")
    data, st = read_all(FileReader(str(log)), st)
    assert data == b"new 1\n" and st.file.line == 3


def test_a_vanished_journal_cursor_goes_on_from_its_time(fake_journal: Path) -> None:
    now = time.time()
    append_journal(fake_journal, journal_entry(1, "one", now - 100), journal_entry(2, "two", now - 50))
    _, st = read_all(JournalReader(None), None)
    # the journal is vacuumed and rewritten: the stored cursor is gone, later entries remain
    fake_journal.write_text("")
    append_journal(fake_journal, journal_entry(7, "old, before the cursor", now - 200),
                   journal_entry(8, "after the cursor", now - 10))
    r = JournalReader(None)
    data, st = read_all(r, st)
    assert data.count(b"\n") == 1 and b"after the cursor" in data and r.error is None
    assert st.cursor.startswith("s=abc;i=8;") and any("no longer valid" in n for n in r.notes)


def test_journalctl_failing_is_an_error(fake_journal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = tmp_path / "broken"
    exe.write_text("#!/bin/sh\necho 'No journal files were found.' >&2\nexit 1\n")
    exe.chmod(0o755)
    monkeypatch.setenv("QWEN_TRIAGE_JOURNALCTL", str(exe))
    r = JournalReader("ollama")
    data, st = read_all(r, None)
    assert data == b"" and "No journal files were found" in (r.error or "")


def test_a_saved_journal_json_file_is_read_as_journal_entries(tmp_path: Path, compiled) -> None:  # type: ignore[no-untyped-def]
    now = time.time()
    log = tmp_path / "saved.json"
    log.write_text(json.dumps(journal_entry(1, OOM.strip(), now - 7200, transport="stdout")) + "\n"
                   + json.dumps(journal_entry(2, XID79.strip(), now - 7200)) + "\n")
    chunks = list(FileReader(str(log)).read(None, 1 << 20, time.monotonic() + 5, "b"))
    assert chunks and all(c.kind == JOURNAL_JSON for c in chunks)
    res = run_check([FileReader(str(log))], State(), compiled, CheckConfig(hold=3600), "b1", now=now)
    # the entries' own times count: a two-hour-old OOM is past the hold, a hardware Xid waits for a reboot
    assert [d.class_ for d in res.active] == ["hardware.xid_fatal"]


def test_a_journal_that_never_answers_is_unknown_not_ok(tmp_path: Path, boot: BootId, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29 §2: journalctl that prints nothing and never exits (a broken journal) must not read as a healthy
    node: the check says unknown (NPD exit 2) once its --timeout has passed, every run."""
    exe = tmp_path / "journalctl"
    exe.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(600)\n")
    exe.chmod(0o755)
    monkeypatch.setenv("QWEN_TRIAGE_JOURNALCTL", str(exe))
    for _ in range(2):
        cp = run_check_cli("--journal", "ollama", "--state", str(tmp_path / "st"), "--format", "npd",
                           "--timeout", "3", timeout=300)
        assert cp.returncode == 2, (cp.stdout, cp.stderr)
        assert cp.stdout.startswith("unknown: ")
