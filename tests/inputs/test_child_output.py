"""The reader of a wrapped child's output: what the pass-through logged, read back in the order it was seen."""

from __future__ import annotations

import math
import os
import sys

from qwen_triage.inputs.process import ChildOutput


def _log(tmp_path, data: bytes) -> int:
    fd = os.open(tmp_path / "child.log", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, data)
    return fd


def test_logged_and_handed_pieces_come_back_in_order_with_their_stream_and_time(tmp_path) -> None:
    reader = ChildOutput(_log(tmp_path, b"one\ntwo\nthree"), label="vllm serve")
    reader.logged(1, 4, 1.0)
    reader.logged(2, 4, 2.0)
    reader.handed(2, b"inline\n", 3.0)
    reader.logged(1, 5, 4.0)
    got = [(c.stream, c.data, c.when, c.first_line) for c in reader.read(None, sys.maxsize, math.inf)]
    assert got == [(1, b"one\n", 1.0, 1), (2, b"two\n", 2.0, 2), (2, b"inline\n", 3.0, 3), (1, b"three", 4.0, 4)]
    assert not reader.waiting and not reader.more
    assert reader.state is not None and reader.state.kind == "process"
    assert (reader.state.lines_total, reader.state.bytes_total) == (3, 20)
    reader.close()
    assert reader.log_fd is None


def test_a_budget_leaves_the_rest_for_the_next_read(tmp_path) -> None:
    reader = ChildOutput(_log(tmp_path, b"a" * 10 + b"b" * 10 + b"c" * 10))
    for when in (1.0, 2.0, 3.0):
        reader.logged(1, 10, when)
    first = [c.data for c in reader.read(None, 15, math.inf)]
    assert first == [b"a" * 10, b"b" * 10] and reader.more and reader.waiting
    assert [c.data for c in reader.read(None, 15, math.inf)] == [b"c" * 10] and not reader.more
    reader.close()


def test_a_log_cut_short_loses_only_what_is_gone(tmp_path) -> None:
    fd = _log(tmp_path, b"kept\n")
    reader = ChildOutput(fd)
    reader.logged(1, 5, 1.0)
    reader.logged(1, 8, 2.0)  # truncated behind our back: these bytes never reach the log
    got = [c.data for c in reader.read(None, sys.maxsize, math.inf)]
    assert got == [b"kept\n", b""]
    os.pwrite(fd, b"later\n", 13)  # the writer goes on at its own offset
    reader.logged(2, 6, 3.0)
    assert [c.data for c in reader.read(None, sys.maxsize, math.inf)] == [b"later\n"]
    reader.close()


def test_without_a_log_only_handed_pieces_exist() -> None:
    reader = ChildOutput(None)
    reader.handed(1, b"x\n", 1.0)
    assert [c.data for c in reader.read(None, sys.maxsize, math.inf)] == [b"x\n"]
    assert reader.via == "records"
    reader.close()
