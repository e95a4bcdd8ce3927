"""Hardening (issue 10, items 4, 10, 11, 18): one hostile line, a cut gzip, big journal records, non-logs.

Each test is built from the attack that broke the tool: a 5000-digit pid in a
worker prefix, journal JSON nested past the parser's depth or with fields of
the wrong type and timestamps past year 9999, a 400-digit fact, a gzip cut in
the middle, a first journal record over 4 KB, a byte-array MESSAGE over 13 KB,
a binary or empty input. The property tests throw arbitrary text at the
normaliser, the journal reader, the chunker and fact extraction.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.facts import convert_fact
from qwen_triage.engine.normalize import decode_line, normalize
from qwen_triage.engine.sources import Block, iter_blocks, journal_blocks, raw_blocks
from qwen_triage.inputs.source import InputError, Source
from qwen_triage.inputs.file import open_source
from qwen_triage.engine.scanner import scan_paths
from qwen_triage.rulepack.pack import load_pack
from qwen_triage.units import MAX_INT_DIGITS, bounded_int, port_number

DATA = Path(__file__).parents[1] / "data"
BIG = "9" * 5000
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def pack(tmp_path_factory) -> CompiledPack:
    return CompiledPack.build(load_pack([DATA / "rules"], bundled=False), engine="literal",
                              cache_dir=tmp_path_factory.mktemp("hs"))


def lines_of(blocks) -> list[tuple[int, bytes]]:
    return [(b.origin_line(i), line) for b in blocks for i, line in enumerate(b.data.split(b"\n")[:-1])]


# --- item 4: every number from a log is bounded -------------------------------------


@pytest.mark.parametrize("line", [
    f"(VllmWorker rank=0 pid={BIG}) INFO hello",
    f"(VllmWorker rank={BIG} pid=1) INFO hello",
    f"(VllmWorker_TP{BIG} pid=1) INFO hello",
    f"(pid={BIG}) hello",
    f"host:{BIG}:{BIG} [{BIG}] NCCL WARN hello",
    f"[1,{BIG}]<stdout>:hello",
    f"[rank{BIG}]:hello",
    f"Nov 29 10:00:00 host prog[{BIG}]: hello",
    f"2026-01-01T00:00:00Z host prog[{BIG}]: hello",
])
def test_item4_huge_numbers_in_prefixes_do_not_crash(line: str) -> None:
    rec = normalize(line)
    assert rec.message in line
    for value in (rec.pid, rec.rank, rec.gpu):
        assert value is None or abs(value) < 10**MAX_INT_DIGITS


def test_item4_bounded_int_and_port() -> None:
    assert bounded_int("1234") == 1234 and bounded_int("1,234") == 1234
    assert bounded_int(BIG) is None and bounded_int("x") is None and bounded_int(None) is None
    assert bounded_int("0x1f", 16) == 31
    assert port_number("8000") == 8000 and port_number(8000) == 8000
    assert port_number("99999") is None and port_number(0) is None and port_number(BIG) is None


def test_item4_fact_of_400_digits_stays_text(tmp_path, pack) -> None:
    digits = "7" * 400
    assert convert_fact("int", digits) == digits
    assert convert_fact("hex", "f" * 400) == "f" * 400
    assert convert_fact("int", "12") == 12
    p = tmp_path / "x.log"
    p.write_text(f"TESTGGUF tensor data is not within the file bounds at offset {digits}\n")
    report = scan_paths([str(p)], pack)
    (diag,) = report.diagnoses
    assert diag.facts["offset"] == digits


def test_item4_port_99999_in_a_bind_error_is_ignored_by_relaunch() -> None:
    from qwen_triage.runner.fixplan import verifier_for
    from qwen_triage.runner.vllm.probe import parse_launch

    launch = parse_launch(["vllm", "serve", "m", "--port", "8123"])
    kind, args = verifier_for({"type": "check_port", "port": "99999"}, launch)
    assert (kind, args["port"]) == ("port", 8123)
    _kind, args = verifier_for({"type": "free_port", "port": BIG}, launch)
    assert args["port"] == 8123
    _kind, args = verifier_for({"type": "stop_process", "what": f"the process on GPU {BIG}"}, launch)
    assert args == {}
    from qwen_triage.runner.fixplan import run_probe

    found = run_probe({"type": "check_port", "port": "99999"}, launch)  # probes 8123, not 99999
    assert all("99999" not in line for line in found)


def _journal(records: list[object]) -> Block:
    data = b"".join(json.dumps(r).encode() + b"\n" if not isinstance(r, bytes) else r + b"\n" for r in records)
    return Block(data=data, first_line=1)


def test_item4_journal_deep_nesting_odd_types_and_far_timestamps() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    records: list[object] = [
        deep,
        {"MESSAGE": "odd types", "_PID": BIG, "_HOSTNAME": {"a": [1]}, "SYSLOG_IDENTIFIER": ["x"],
         "PRIORITY": {"3": 3}, "__REALTIME_TIMESTAMP": BIG},
        {"MESSAGE": "far future", "__REALTIME_TIMESTAMP": "9" * 19, "_PID": "12"},
        {"MESSAGE": 12, "_TRANSPORT": ["kernel"]},
        {"MESSAGE": [True, -1, 2**70, "x", 104, 105]},
    ]
    out = list(journal_blocks(iter([_journal(records)])))
    lines = lines_of(out)
    assert lines[0][1] == deep  # not journal JSON at all: kept as text
    meta = out[0].meta
    assert meta is not None
    assert meta[1].pid is None and meta[1].host is None and meta[1].program is None and meta[1].timestamp is None
    assert meta[2].timestamp is None and meta[2].pid == 12
    assert lines[1][1] == b"odd types"


@PROPS
@given(st.text(max_size=300))
def test_item4_property_normaliser_never_raises_and_keeps_a_substring(line: str) -> None:
    text = decode_line(line.encode("utf-8", "surrogatepass"))
    rec = normalize(text)
    assert rec.message in text.rstrip("\r")
    for value in (rec.pid, rec.rank, rec.gpu):
        assert value is None or abs(value) < 10**MAX_INT_DIGITS


_prefixes = st.sampled_from(["(VllmWorker rank={n} pid={n}) ", "(pid={n}) ", "h:{n}:{n} [{n}] NCCL WARN ",
                             "[rank{n}]:", "[{n},{n}]<stderr>:", "Nov 29 10:00:00 h p[{n}]: ", ""])


@PROPS
@given(_prefixes, st.text(alphabet="0123456789", min_size=1, max_size=6000), st.text(max_size=80))
def test_item4_property_prefixes_with_any_number(prefix: str, number: str, rest: str) -> None:
    line = prefix.format(n=number) + rest
    rec = normalize(line)
    assert rec.message in line
    for value in (rec.pid, rec.rank, rec.gpu):
        assert value is None or abs(value) < 10**MAX_INT_DIGITS


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_fields = st.sampled_from(["MESSAGE", "_PID", "_HOSTNAME", "SYSLOG_IDENTIFIER", "_COMM", "PRIORITY",
                           "__REALTIME_TIMESTAMP", "_TRANSPORT", "__CURSOR"])


@PROPS
@given(st.lists(st.dictionaries(_fields, _json | st.text(alphabet="0123456789", max_size=40)), max_size=6))
def test_item4_property_journal_reader(records: list[dict]) -> None:
    out = list(journal_blocks(iter([_journal(records)])))
    for block in out:
        assert block.meta is not None and len(block.meta) == block.nlines
        for m in block.meta:
            assert m.pid is None or 0 <= m.pid < 10**10
            assert m.host is None or isinstance(m.host, str)
            assert m.program is None or isinstance(m.program, str)
        assert all(len(line) <= 64 * 1024 for line in block.data.split(b"\n"))


@PROPS
@given(st.binary(max_size=3000), st.integers(min_value=1, max_value=300), st.integers(min_value=1, max_value=200))
def test_item4_property_chunking(data: bytes, chunk: int, max_line: int) -> None:
    src = Source(name="x")
    got = lines_of(raw_blocks(io.BytesIO(data), src, max_line=max_line, chunk=chunk))
    expected = data.split(b"\n")
    if expected and expected[-1] == b"":
        expected.pop()
    assert [n for n, _ in got] == list(range(1, len(expected) + 1))
    for (_, line), whole in zip(got, expected, strict=True):
        assert len(line) <= max_line
        if b"\x1b" not in whole:  # cut to the bound, then NULs dropped (decoding drops them anyway)
            assert line == whole[:max_line].replace(b"\x00", b"")


@PROPS
@given(st.binary(max_size=2000))
def test_item4_property_iter_blocks_on_any_bytes(tmp_path_factory, data: bytes) -> None:
    p = tmp_path_factory.mktemp("b") / "x.log"
    p.write_bytes(data)
    try:
        for block in iter_blocks(open_source(str(p))):
            assert all(len(line) <= 5 * 64 * 1024 for line in block.data.split(b"\n"))
    except InputError:  # gzip magic then garbage: the one clean refusal allowed
        assert data.startswith(b"\x1f\x8b")


@PROPS
@given(st.sampled_from(["int", "float", "hex", "bytes", "str"]),
       st.text(max_size=50) | st.text(alphabet="0123456789abcdefx,.-", min_size=1, max_size=2000))
def test_item4_property_fact_extraction(kind: str, value: str) -> None:
    out = convert_fact(kind, value)
    if isinstance(out, int):
        assert out.bit_length() <= 128
    else:
        assert isinstance(out, (str, float))


# --- item 10: a truncated gzip ----------------------------------------------------


def test_item10_truncated_gzip_reports_what_was_read(tmp_path, pack) -> None:
    text = b"".join(b"line %d ok\n" % i for i in range(1, 25)) + b"TESTSEGV signal: segmentation fault\n"
    text += b"".join(b"filler %d %s\n" % (i, bytes(range(65, 91)) * 4) for i in range(3000))
    whole = gzip.compress(text)
    p = tmp_path / "server.log.gz"
    p.write_bytes(whole[: len(whole) // 2])
    report = scan_paths([str(p)], pack)
    assert [d.rule for d in report.diagnoses] == ["t.segv"]
    assert any("ended early" in n for n in report.notes)
    assert report.inputs[0].lines > 25


def test_item10_exit_status_from_the_diagnoses(tmp_path, monkeypatch) -> None:
    from click.testing import CliRunner

    from qwen_triage.cli.main import cli

    text = b"TESTSEGV signal: segmentation fault\n" + b"x" * 200_000 + b"\n"
    whole = gzip.compress(text)
    p = tmp_path / "server.log.gz"
    p.write_bytes(whole[: len(whole) - 20])
    result = CliRunner().invoke(cli, ["scan", "--rules", str(DATA / "rules"), "--format", "json", str(p)])
    assert result.exit_code == 1, result.output
    assert "ended early" in result.output


def test_item10_gzip_broken_from_the_start_is_still_an_input_error(tmp_path) -> None:
    p = tmp_path / "bad.gz"
    p.write_bytes(b"\x1f\x8bnot gzip at all")
    with pytest.raises(InputError):
        list(iter_blocks(open_source(str(p))))


# --- item 11: big journal records -------------------------------------------------


def test_item11_first_record_over_4kb_is_still_journal_json(tmp_path) -> None:
    recs = [{"__CURSOR": "c1", "MESSAGE": "A" * 6000, "_PID": "7"},
            {"__CURSOR": "c2", "MESSAGE": "TESTSEGV signal: segmentation fault", "_PID": "7"}]
    p = tmp_path / "j.json"
    p.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    src = open_source(str(p))
    lines = lines_of(iter_blocks(src))
    assert src.kind == "journal-json"
    assert lines[1] == (2, b"TESTSEGV signal: segmentation fault")


def test_item11_first_record_longer_than_a_journal_line_is_detected_by_its_key(tmp_path) -> None:
    p = tmp_path / "j.json"
    p.write_text(json.dumps({"__CURSOR": "c", "MESSAGE": "B" * 400_000}) + "\n"
                 + json.dumps({"__CURSOR": "d", "MESSAGE": "after"}) + "\n")
    src = open_source(str(p))
    lines = lines_of(iter_blocks(src))
    assert src.kind == "journal-json" and lines[-1] == (2, b"after")


def test_item11_non_utf8_byte_array_message_over_13kb_is_decoded(tmp_path) -> None:
    message = b"TESTSEGV signal: segmentation fault \xff" + b"\xfe" * 20_000
    p = tmp_path / "j.json"
    p.write_text(json.dumps({"__CURSOR": "c", "MESSAGE": list(message)}) + "\n")
    src = open_source(str(p))
    lines = lines_of(iter_blocks(src))
    assert src.kind == "journal-json"
    assert lines[0][1] == message


def test_item11_journal_over_4kb_gives_its_diagnosis(tmp_path, pack) -> None:
    recs = [{"__CURSOR": "c1", "MESSAGE": "x" * 5000},
            {"__CURSOR": "c2", "MESSAGE": list(b"TESTSEGV signal: segmentation fault \xff" + b"y" * 14_000)}]
    p = tmp_path / "j.json"
    p.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    assert [d.rule for d in scan_paths([str(p)], pack).diagnoses] == ["t.segv"]


# --- item 18: "No diagnosis" on something that is not a log -----------------------


def test_item18_binary_input_says_it_is_not_a_log(tmp_path, pack) -> None:
    p = tmp_path / "model.bin"
    p.write_bytes(bytes(range(256)) * 200)
    report = scan_paths([str(p)], pack)
    assert not report.diagnoses
    assert any("does not look like a text log" in n for n in report.notes)


def test_item18_empty_input_says_so(tmp_path, pack) -> None:
    p = tmp_path / "empty.log"
    p.write_bytes(b"")
    report = scan_paths([str(p)], pack)
    assert any("empty input" in n for n in report.notes)


def test_item18_a_text_log_gets_no_such_note(tmp_path, pack) -> None:
    p = tmp_path / "ok.log"
    p.write_text("INFO all fine\n" * 50 + "ünïcödé ✓\n")
    assert scan_paths([str(p)], pack).notes == []


def test_item18_text_renderer_prints_the_note(tmp_path) -> None:
    from click.testing import CliRunner

    from qwen_triage.cli.main import cli

    p = tmp_path / "model.bin"
    p.write_bytes(bytes(range(256)) * 50)
    result = CliRunner().invoke(cli, ["scan", "--rules", str(DATA / "rules"), str(p)])
    assert "not look like a text log" in result.output


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_item4_fact_of_400_digits_renders_in_every_format(tmp_path, fmt: str) -> None:
    from click.testing import CliRunner

    from qwen_triage.cli.main import cli

    p = tmp_path / "x.log"
    p.write_text(f"TESTGGUF tensor data is not within the file bounds at offset {'7' * 400}\n"
                 f"(VllmWorker rank=0 pid={BIG}) ERROR x\n")
    result = CliRunner().invoke(cli, ["scan", "--rules", str(DATA / "rules"), "--format", fmt, str(p)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
