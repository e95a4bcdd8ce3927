"""qwen_triage.atomicfile.write_atomic: old file or whole new file, private by default, nothing left behind."""

from __future__ import annotations

import errno
import os
import stat

import pytest

from qwen_triage import atomicfile
from qwen_triage.atomicfile import write_atomic


def _mode(path) -> int:  # type: ignore[no-untyped-def]
    return stat.S_IMODE(os.stat(path).st_mode)


def _leftovers(directory) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_replaces_the_file_private_by_default(tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "state.json"
    target.write_bytes(b"old")
    os.chmod(target, 0o644)
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert _mode(target) == 0o600
    assert _leftovers(tmp_path) == []


def test_the_mode_asked_for_is_set_exactly_whatever_the_umask(tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "node.prom"
    old = os.umask(0o077)
    try:
        write_atomic(target, "qwen 1\n", mode=0o644)
    finally:
        os.umask(old)
    assert _mode(target) == 0o644
    assert target.read_text(encoding="utf-8") == "qwen 1\n"


def test_text_is_written_as_utf8(tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "t.txt"
    write_atomic(target, "“quoted” µ")
    assert target.read_bytes() == "“quoted” µ".encode()


def test_a_planted_temporary_name_is_never_written_through(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    target = tmp_path / "cache.bin"
    names = iter(["planted", "fresh"])
    monkeypatch.setattr(atomicfile, "_token", lambda: next(names))
    planted = tmp_path / ".cache.bin.planted.tmp"
    planted.symlink_to(victim)
    write_atomic(target, b"data")
    assert victim.read_bytes() == b"keep me"
    assert planted.is_symlink() and os.readlink(planted) == str(victim)
    assert target.read_bytes() == b"data" and not target.is_symlink()


def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    target = tmp_path / "state.json"
    target.symlink_to(victim)
    write_atomic(target, b"new")
    assert victim.read_bytes() == b"keep me"
    assert not target.is_symlink() and target.read_bytes() == b"new"


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path, monkeypatch, error) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "state.json"
    target.write_bytes(b"old")

    def half_then_fail(fd: int, data: bytes) -> None:
        os.write(fd, data[: len(data) // 2])
        raise error

    monkeypatch.setattr(atomicfile, "_write_all", half_then_fail)
    with pytest.raises(type(error)):
        write_atomic(target, b"new contents")
    assert target.read_bytes() == b"old"
    assert _leftovers(tmp_path) == []


def test_a_missing_directory_is_an_oserror(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OSError):
        write_atomic(tmp_path / "nowhere" / "f", b"x")
