"""`scan`'s inputs are opened by inputs.file.open_source: checked when named, opened when read, closed after.

The engine only decodes what a source's opener hands it; these tests hold the opener to what `scan` needs:
the same error messages, gzip found by its magic (not its name), stdin left open, progress in file bytes,
and no file held open before or after it is read (a scan of thousands of paths must not run out of them).
"""

from __future__ import annotations

import gzip
import io
import os
import sys
from pathlib import Path

import pytest

from qwen_triage.engine.sources import iter_blocks

from qwen_triage.inputs.source import InputError
from qwen_triage.inputs.file import open_source


def text_of(source) -> bytes:  # type: ignore[no-untyped-def]
    return b"".join(block.data for block in iter_blocks(source))


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_path_that_is_no_file_is_refused_with_scans_messages(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    with pytest.raises(InputError, match=r"sub: is a directory$"):
        open_source(str(tmp_path / "sub"))
    with pytest.raises(InputError, match=r"missing\.log: no such file$"):
        open_source(str(tmp_path / "missing.log"))


def test_gzip_is_found_by_its_magic_not_its_name(tmp_path: Path) -> None:
    packed = tmp_path / "looks-plain.log"
    packed.write_bytes(gzip.compress(b"first\nsecond\n"))
    plain = tmp_path / "looks-packed.gz"
    plain.write_bytes(b"just text\n")
    assert text_of(open_source(str(packed))) == b"first\nsecond\n"
    assert text_of(open_source(str(plain))) == b"just text\n"


def test_files_are_held_open_only_while_they_are_read(tmp_path: Path) -> None:
    paths = []
    for i in range(40):
        p = tmp_path / f"{i}.log"
        p.write_bytes(gzip.compress(b"line\n") if i % 2 else b"line\n")
        paths.append(p)
    before = open_fds()
    sources = [open_source(str(p), i) for i, p in enumerate(paths)]
    assert open_fds() == before  # named, not opened
    for source in sources:
        blocks = iter_blocks(source)
        next(blocks)
        assert len(open_fds() - before) == 1  # this one, while it is read
        assert list(blocks) == []
        assert open_fds() == before  # closed once read


def test_a_file_gone_between_naming_and_reading_says_why(tmp_path: Path) -> None:
    log = tmp_path / "rotated-away.log"
    log.write_bytes(b"x\n")
    source = open_source(str(log))
    log.unlink()  # e.g. rotated away while earlier inputs were scanned
    with pytest.raises(InputError, match=r"rotated-away\.log: No such file or directory$"):
        list(iter_blocks(source))


def test_stdin_is_read_decompressed_and_left_open(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = io.BufferedReader(io.BytesIO(gzip.compress(b"from a pipe\n")))  # type: ignore[arg-type]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(raw))
    source = open_source("-")
    assert source.name == "<stdin>" and source.size is None
    assert text_of(source) == b"from a pipe\n"
    assert not raw.closed  # stdin is the caller's, not ours to close


def test_progress_counts_bytes_of_the_file_not_of_what_it_decompresses_to(tmp_path: Path) -> None:
    body = b"".join(b"line %d of a log that compresses well\n" % i for i in range(200_000))
    log = tmp_path / "big.log.gz"
    log.write_bytes(gzip.compress(body))
    source = open_source(str(log))
    assert source.size == log.stat().st_size < len(body)
    seen = []
    for _ in iter_blocks(source, chunk=1 << 16):
        seen.append(source.position())
    assert seen == sorted(seen) and len(set(seen)) > 1  # it moves as reading goes on
    assert 0 < seen[-1] <= source.size  # compressed bytes consumed, never the decompressed count
    assert source.bytes_read == len(body)
