"""The follower (`scan --follow`, `attach`) and the reader (`check`) recognise a file's changes the same way."""

from __future__ import annotations

import os
import time
from pathlib import Path

from qwen_triage.inputs.file import BREAK, FileFollower, FileReader
from tests.timelimits import scaled


def read_all(reader: FileReader, prev=None) -> bytes:  # type: ignore[no-untyped-def]
    return b"".join(c.data for c in reader.read(prev, 1 << 30, time.monotonic() + scaled(30), ""))


def rewrite_in_place(path: Path, data: bytes) -> None:
    """Other first bytes at the same inode, and the file no shorter than what was read: no truncation by size."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, 0)
    finally:
        os.close(fd)


def test_a_file_rewritten_in_place_is_read_again_by_both(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"old one\nold two\n")
    follower = FileFollower(log)
    assert follower.poll() == [b"old one\nold two\n"]
    reader = FileReader(str(log))
    assert read_all(reader) == b"old one\nold two\n"

    rewrite_in_place(log, b"NEW ONE\nold two\nnew three\n")
    assert follower.poll() == [BREAK, b"NEW ONE\nold two\nnew three\n"] and follower.truncations == 1
    again = FileReader(str(log))
    assert read_all(again, reader.state) == b"NEW ONE\nold two\nnew three\n"
    assert any("truncated or rewritten" in n for n in again.notes)
    follower.close()


def test_the_follower_keeps_the_position_check_stores(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"x" * 10 + b"\n")
    follower = FileFollower(log, from_end=True)
    assert follower.poll() == []
    st = log.stat()
    assert follower.cursor is not None
    assert (follower.cursor.dev, follower.cursor.ino, follower.cursor.offset) == (st.st_dev, st.st_ino, 11)
    follower.close()
