"""Inputs: bounded lines, LF-only splitting, gzip, journal JSON, binary bytes."""

from __future__ import annotations

import gzip
import io
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_triage.engine.normalize import ANSI_BYTES_RE
from qwen_triage.engine.sources import iter_blocks, raw_blocks, strip_ansi_lines
from qwen_triage.inputs.source import Source
from qwen_triage.inputs.file import open_source


def lines_of(blocks) -> list[tuple[int, bytes, bool]]:
    out = []
    for b in blocks:
        for i, line in enumerate(b.data.split(b"\n")[:-1]):
            n = b.origin_line(i)
            out.append((n, line, n in b.truncated))
    return out


def test_split_on_lf_only_and_numbering_survives_bare_cr() -> None:
    data = b"pulling 10%\rpulling 50%\rpulling 100%\nsecond\r\nthird"
    got = lines_of(raw_blocks(io.BytesIO(data), Source(name="x"), chunk=7))
    assert [n for n, _, _ in got] == [1, 2, 3]
    assert got[0][1] == b"pulling 10%\rpulling 50%\rpulling 100%"
    assert got[2][1] == b"third"


def test_overlong_line_is_cut_and_the_rest_skipped_in_bounded_memory() -> None:
    big = b"A" * (3 * 2**20)
    data = b"first\n" + big + b"\nafter\n"
    got = lines_of(raw_blocks(io.BytesIO(data), Source(name="x"), max_line=1000, chunk=4096))
    assert [(n, len(t), cut) for n, t, cut in got] == [(1, 5, False), (2, 1000, True), (3, 5, False)]


def test_overlong_last_line_without_newline() -> None:
    data = b"x\n" + b"B" * 5000
    got = lines_of(raw_blocks(io.BytesIO(data), Source(name="x"), max_line=100, chunk=64))
    assert got == [(1, b"x", False), (2, b"B" * 100, True)]


def test_gzip_is_detected_by_magic(tmp_path) -> None:
    p = tmp_path / "server.log.gz"
    p.write_bytes(gzip.compress(b"one\ntwo\n"))
    src = open_source(str(p))
    assert [t for _, t, _ in lines_of(iter_blocks(src))] == [b"one", b"two"]
    assert src.lines_read == 2


def test_journal_json_message_string_and_byte_array(tmp_path) -> None:
    recs = [
        {"__CURSOR": "c1", "MESSAGE": "plain text", "_HOSTNAME": "host1", "SYSLOG_IDENTIFIER": "ollama",
         "_PID": "1234", "PRIORITY": "3", "__REALTIME_TIMESTAMP": "1732874401000000"},
        {"__CURSOR": "c2", "MESSAGE": list(b"bytes \xff here"), "_TRANSPORT": "kernel"},
        {"__CURSOR": "c3", "MESSAGE": "two\nlines"},
    ]
    p = tmp_path / "j.json"
    p.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    src = open_source(str(p))
    blocks = list(iter_blocks(src))
    assert src.kind == "journal-json"
    got = lines_of(blocks)
    assert [(n, t) for n, t, _ in got] == [(1, b"plain text"), (2, b"bytes \xff here"), (3, b"two"), (3, b"lines")]
    meta = blocks[0].meta
    assert meta[0].host == "host1" and meta[0].program == "ollama" and meta[0].pid == 1234
    assert meta[0].level == "error" and meta[0].timestamp.startswith("2024-11-29T")
    assert meta[1].program == "kernel"


def test_binary_garbage_and_nul_bytes_do_not_break_reading() -> None:
    data = bytes(range(256)) * 100 + b"\nok\n"
    got = lines_of(raw_blocks(io.BytesIO(data), Source(name="x")))
    assert got[-1][1] == b"ok"


_PIECES = [b"\x1b[31m", b"\x1b[0m", b"\x1b[1;2", b"\x1b]0;title\x07", b"\x1b]0;", b"\x1b\\", b"\x1b", b"\n",
           b"plain text ", b"ERROR", b"\r"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40))
def test_ansi_codes_are_removed_line_by_line(pieces: list[bytes]) -> None:
    """Only lines with an ESC are rewritten, each as the ANSI pattern strips it; no code spans (or eats) an LF."""
    data = b"".join(pieces)
    expected = b"\n".join(ANSI_BYTES_RE.sub(b"", line) for line in data.split(b"\n"))
    assert strip_ansi_lines(data) == expected
    assert strip_ansi_lines(data).count(b"\n") == data.count(b"\n")
