"""Hardening (issue 10, item 8): the relaunch journal on a full disk or after a short write.

The attack: a journal on a full disk let ENOSPC escape as a traceback, and a
short write left half a line that swallowed the next record. Now the record is
dropped whole with one line saying so, the run goes on, and the file is 0600.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from qwen_triage.runner.runlog import Journal, RunRecord, read_journal


def _rec(run: str = "r1") -> RunRecord:
    return RunRecord(kind="run-start", run=run, time="2026-01-01T00:00:00Z", argv=["vllm", "serve", "m"])


def test_item8_journal_is_created_0600_and_an_old_0644_one_is_tightened(tmp_path) -> None:
    path = tmp_path / "j.jsonl"
    assert Journal(path).append(_rec())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    old = tmp_path / "old.jsonl"
    old.write_text("")
    old.chmod(0o644)
    Journal(old).append(_rec())
    assert stat.S_IMODE(old.stat().st_mode) == 0o600


def test_item8_short_write_leaves_no_partial_line(tmp_path) -> None:
    path = tmp_path / "j.jsonl"
    warnings: list[str] = []
    Journal(path).append(_rec("before"))

    def short(fd: int, data: bytes) -> int:
        return os.write(fd, data[: len(data) // 2])

    assert Journal(path, warn=warnings.append, write=short).append(_rec("lost")) is False
    assert Journal(path).append(_rec("after"))
    assert [r["run"] for r in read_journal(path)] == ["before", "after"]
    assert path.read_text().count("\n") == 2
    (message,) = warnings
    assert "\n" not in message and "short write" in message and "the run goes on" in message


def test_item8_enospc_from_a_fake_write_is_one_line(tmp_path) -> None:
    path = tmp_path / "j.jsonl"
    warnings: list[str] = []

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    assert Journal(path, warn=warnings.append, write=full).append(_rec()) is False
    assert warnings == [f"cannot write the relaunch journal {path}: No space left on device; "
                        "the run-start record is not kept, the run goes on"]
    assert path.read_text() == ""


def test_item8_real_enospc_on_dev_full(capsys) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system to give a real ENOSPC")
    assert Journal("/dev/full").append(_rec()) is False
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err


def test_item8_unwritable_directory_is_one_line(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    warnings: list[str] = []
    assert Journal(blocker / "sub" / "j.jsonl", warn=warnings.append).append(_rec()) is False
    assert len(warnings) == 1


def test_item8_attempt_logs_are_created_0600(tmp_path) -> None:
    from qwen_triage.live.run_log import open_log

    for exclusive in (False, True):
        fd, path = open_log(tmp_path / f"attempt-{exclusive}.log", exclusive=exclusive)
        os.close(fd)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_item8_detached_attempt_log_is_created_0600(tmp_path) -> None:
    from qwen_triage.runner.attempt import DetachedServer

    log = tmp_path / "attempt-1.log"
    server = DetachedServer(["true"], dict(os.environ), log, stall=None, grace=1.0)
    server.start()
    assert server.proc is not None
    server.proc.wait(timeout=10)
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
