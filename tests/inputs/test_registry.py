"""Every source is built by name through one registry, and each kind reads through the same Reader protocol."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from qwen_triage.inputs.base import Reader
from qwen_triage.inputs.position import SourceState
from qwen_triage.inputs.registry import UnknownReader, build, names
from tests.timelimits import scaled, wait_until


def read_all(reader: Reader, prev: SourceState | None = None) -> bytes:
    return b"".join(c.data for c in reader.read(prev, 1 << 30, time.monotonic() + scaled(30), "boot-1"))


def test_the_four_kinds_are_registered() -> None:
    assert names() == ["file", "journal", "kernel", "process"]


def test_an_unknown_kind_is_refused_with_the_known_ones() -> None:
    with pytest.raises(UnknownReader, match="file, journal, kernel, process"):
        build("syslog")


def test_a_file_reader_by_name_resumes_from_its_position(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"one\ntwo\n")
    first = build("file", str(log))
    assert read_all(first) == b"one\ntwo\n" and first.key == f"file:{log}"
    with open(log, "ab") as f:
        f.write(b"three\n")
    again = build("file", str(log))
    assert read_all(again, first.state) == b"three\n" and again.lines == 1


def test_a_journal_reader_by_name_is_keyed_by_its_unit() -> None:
    reader = build("journal", "ollama")
    assert (reader.key, reader.via) == ("journal:ollama.service", "journalctl")


def test_the_kernel_reader_by_name_follows_the_kmsg_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kmsg = tmp_path / "kmsg"
    kmsg.write_bytes(b"3,7,5000000,-;NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n")
    monkeypatch.delenv("QWEN_TRIAGE_JOURNALCTL", raising=False)
    monkeypatch.setenv("QWEN_TRIAGE_KMSG", str(kmsg))
    reader = build("kernel")
    assert reader.via == str(kmsg)  # the file actually read, never passed off as /dev/kmsg
    assert read_all(reader) == b"[    5.000000] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
    assert reader.state is not None and reader.state.kmsg_seq == 7


def test_without_a_journal_or_a_readable_kmsg_the_kernel_is_read_with_dmesg(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The last resort of kernel_reader: it used to fall off its end and return None (found by mypy)."""
    import qwen_triage.inputs.kernel as kernel

    monkeypatch.delenv("QWEN_TRIAGE_JOURNALCTL", raising=False)
    monkeypatch.delenv("QWEN_TRIAGE_KMSG", raising=False)
    monkeypatch.setattr(kernel, "journal_tool_path", lambda: None)
    monkeypatch.setattr(kernel, "KMSG_PATH", str(tmp_path / "no-kmsg"))
    reader = build("kernel")
    assert isinstance(reader, kernel.DmesgReader) and reader.via == "dmesg"


def test_a_process_reader_reads_the_file_its_stdout_goes_to_even_after_a_rename(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    code = "import sys, time; print('ready', flush=True); time.sleep(60)"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=out, stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: log.stat().st_size > 0, 20, alive=lambda: proc.poll() is None, step=0.05)
        log.rename(tmp_path / "out.log.1")  # logrotate: the process still writes to the same file
        reader = build("process", proc.pid, 1)
        assert reader.label == f"{tmp_path / 'out.log.1'}"
        assert read_all(reader) == b"ready\n"
    finally:
        proc.kill()
        proc.wait()


def test_a_process_whose_stdout_is_not_a_file_has_no_reader() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    try:
        with pytest.raises(ValueError, match="not a file"):
            build("process", proc.pid, 1)
    finally:
        proc.kill()
        proc.wait()
