"""The progress bar: shown for big inputs on a terminal, never on a pipe."""

from __future__ import annotations

import io

from qwen_triage.cli import progress
from qwen_triage.inputs.source import Source


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_hidden_on_a_pipe(monkeypatch) -> None:
    monkeypatch.setattr(progress.sys, "stderr", io.StringIO())
    with progress.scan_progress([Source(name="big", size=10**9)]) as cb:
        assert cb is None


def test_hidden_for_a_small_file_on_a_terminal(monkeypatch) -> None:
    monkeypatch.setattr(progress.sys, "stderr", FakeTty())
    with progress.scan_progress([Source(name="small", size=1000)]) as cb:
        assert cb is None


def test_shown_for_a_big_file_on_a_terminal(monkeypatch) -> None:
    tty = FakeTty()
    monkeypatch.setattr(progress.sys, "stderr", tty)
    src = Source(name="big.log", size=progress.BIG_INPUT * 2)
    with progress.scan_progress([src]) as cb:
        assert cb is not None
        src.bytes_read = progress.BIG_INPUT
        cb(src)
    assert "scanning big.log" in tty.getvalue()


def test_hash_progress_only_for_big_files_and_terminals() -> None:
    with progress.hash_progress(force=False) as start:
        assert start is None
    with progress.hash_progress(force=True) as start:
        assert start is not None
        small = start("tiny.safetensors", 10)
        small(10)  # a no-op callback: no bar for a file hashed in no time
        big = start("model-00001-of-00002.safetensors", progress.BIG_HASH)
        big(progress.BIG_HASH // 2)
