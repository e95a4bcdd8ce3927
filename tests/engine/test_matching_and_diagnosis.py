"""Matching and diagnosis: prefilters, windows, vetoes, field constraints, explains-ordering, timeouts."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from qwen_triage.engine.scanner import Scanner
from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.rulepack.pack import load_pack
from qwen_triage.inputs.source import Source
from qwen_triage.inputs.file import open_source
from qwen_triage.engine.scanner import scan_paths

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture(scope="module", params=["hyperscan", "literal"])
def test_pack(request, tmp_path_factory) -> CompiledPack:
    if request.param == "hyperscan":
        pytest.importorskip("hyperscan")
    pack = load_pack([DATA / "rules"], bundled=False)
    return CompiledPack.build(pack, engine=request.param, cache_dir=tmp_path_factory.mktemp("hs"))


def scan_text(tmp_path: Path, compiled: CompiledPack, text: str, name: str = "x.log"):
    p = tmp_path / name
    p.write_text(text)
    return scan_paths([str(p)], compiled)


def test_root_cause_first_and_symptom_nested(tmp_path, test_pack) -> None:
    log = "noise\nTESTSEGV signal: segmentation fault\nmore\nTESTGGUF tensor data is not within the file bounds at offset 99\n"
    report = scan_text(tmp_path, test_pack, log)
    assert report.classes() == ["model.gguf_corrupt"]
    d = report.diagnoses[0]
    assert [s.class_ for s in d.symptoms] == ["process.segfault"]
    assert d.facts == {"offset": 99}
    assert d.summary == "bad file at byte 99 (unknown:)"  # a fact no line gave takes its word along: never a "?"
    assert d.fix[0].step == "re-download from byte 99"
    assert d.fix[0].action == {"type": "redownload", "what": "blob at 99", "safety": "destructive"}
    assert d.evidence[0].line == 4


def test_chains_flatten_to_the_top_cause(tmp_path, test_pack) -> None:
    log = (
        "TESTWATCHDOG caught collective operation timeout\n"
        "TESTNCCLINIT unhandled system error\n"
        "[ 12.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.\n"
    )
    report = scan_text(tmp_path, test_pack, log)
    assert report.classes() == ["hardware.xid_fatal"]
    assert {s.class_ for s in report.diagnoses[0].symptoms} == {"nccl.init_failure", "nccl.timeout"}
    assert report.diagnoses[0].facts == {"pci": "0000:3b:00", "xid": 79}


def test_unrelated_roots_order_by_severity_then_first_seen(tmp_path, test_pack) -> None:
    log = "TESTOOM CUDA out of memory. Tried to allocate 2.00 GiB\nTESTVETO address already in use\n"
    report = scan_text(tmp_path, test_pack, log)
    # gpu_oom explains nothing here; both are errors, so first occurrence decides
    assert report.classes() == ["memory.gpu_oom", "server.port_in_use"]
    assert report.diagnoses[0].facts == {"asked": 2 * 2**30}


def test_where_constraint_needs_a_kernel_line(tmp_path, test_pack) -> None:
    assert scan_text(tmp_path, test_pack, "NVRM: Xid (PCI:0000:3b:00): 79\n").classes() == []
    journald = "Nov 29 10:00:01 host1 kernel: NVRM: Xid (PCI:0000:3b:00): 79\n"
    assert scan_text(tmp_path, test_pack, journald).classes() == ["hardware.xid_fatal"]


def test_info_is_an_observation_never_a_diagnosis(tmp_path, test_pack) -> None:
    report = scan_text(tmp_path, test_pack, "TESTBENIGN custom allreduce is disabled\n" * 3)
    assert report.diagnoses == []
    assert [o.rule for o in report.observations] == ["t.benign"]
    assert report.observations[0].count == 3


def test_all_within_window(tmp_path, test_pack) -> None:
    near = "TESTPAIR first half 1\nx\nTESTPAIR second half 2\n"
    far = "TESTPAIR first half 1\n" + "x\n" * 5 + "TESTPAIR second half 2\n"
    report = scan_text(tmp_path, test_pack, near)
    assert report.classes() == ["model.shard_missing"]
    assert report.diagnoses[0].facts == {"a": 1, "b": 2}
    assert [e.line for e in report.diagnoses[0].evidence] == [1, 3]
    assert scan_text(tmp_path, test_pack, far).classes() == []


def test_unless_vetoes_before_and_after(tmp_path, test_pack) -> None:
    hit = "TESTVETO address already in use\n"
    veto = "TESTVETO retrying on another port\n"
    assert scan_text(tmp_path, test_pack, hit).classes() == ["server.port_in_use"]
    assert scan_text(tmp_path, test_pack, hit + "x\n" + veto).classes() == []
    assert scan_text(tmp_path, test_pack, veto + hit).classes() == []
    assert scan_text(tmp_path, test_pack, hit + "x\n" * 10 + veto).classes() == ["server.port_in_use"]


def test_several_inputs_one_report(tmp_path, test_pack) -> None:
    a = tmp_path / "vllm.log"
    a.write_text("TESTWATCHDOG caught collective operation timeout\n")
    b = tmp_path / "dmesg.txt"
    b.write_text("[ 3.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=0\n")
    report = scan_paths([str(a), str(b)], test_pack)
    assert report.classes() == ["hardware.xid_fatal"]
    assert report.diagnoses[0].symptoms[0].evidence[0].path == str(a)
    assert [i.name for i in report.inputs] == [str(a), str(b)]


def test_gzip_input(tmp_path, test_pack) -> None:
    p = tmp_path / "server.log.gz"
    p.write_bytes(gzip.compress(b"TESTSEGV signal: segmentation fault\n"))
    assert scan_paths([str(p)], test_pack).classes() == ["process.segfault"]


def test_overlong_line_is_matched_on_its_prefix_and_reported(tmp_path, test_pack) -> None:
    p = tmp_path / "big.log"
    with open(p, "wb") as f:
        f.write(b"TESTSEGV signal: segmentation fault" + b" pad" * (25 * 2**20))  # a 100 MB line
        f.write(b"\nTESTVETO address already in use\n")
    report = scan_paths([str(p)], test_pack)
    assert report.classes() == ["process.segfault", "server.port_in_use"]
    assert report.stats.truncated_lines == 1
    assert report.diagnoses[0].evidence[0].truncated or report.diagnoses[1].evidence[0].truncated
    assert any("matched on their first" in n for n in report.notes)
    assert report.inputs[0].lines == 2


def test_binary_bytes_ansi_and_cr(tmp_path, test_pack) -> None:
    p = tmp_path / "bin.log"
    p.write_bytes(
        b"\x00\xff\xfe garbage \x80\x81\n\x1b[31mTESTSEGV\x1b[0m signal: segmentation fault\r\nprogress 1%\rprogress 2%\n"
    )
    report = scan_paths([str(p)], test_pack)
    assert report.classes() == ["process.segfault"]
    assert report.diagnoses[0].evidence[0].line == 2
    assert report.diagnoses[0].evidence[0].text == "TESTSEGV signal: segmentation fault"


def test_hostile_pattern_times_out_is_disabled_and_scan_finishes(tmp_path) -> None:
    pack = load_pack([DATA / "rules", DATA / "rules_hostile.yaml"], bundled=False)
    compiled = CompiledPack.build(pack, engine="literal")
    p = tmp_path / "h.log"
    # a `z` after the run: a prefilter that reads more of the pattern than its literal still lets it through
    p.write_text(("HOSTILE " + "x" * 64 + "!z\n") * 3 + "TESTSEGV signal: segmentation fault\n")
    report = scan_paths([str(p)], compiled)
    assert report.classes() == ["process.segfault"]
    assert [d.rule for d in report.stats.disabled_rules] == ["t.hostile"]
    assert sum("t.hostile" in n for n in report.notes) == 1


def test_stdin_source(test_pack, monkeypatch) -> None:
    import io
    import sys

    fake = io.TextIOWrapper(io.BufferedReader(io.BytesIO(b"TESTSEGV signal: segmentation fault\n")))
    monkeypatch.setattr(sys, "stdin", fake)
    scanner = Scanner(test_pack)
    list(scanner.scan_source(open_source("-")))
    report = scanner.report()
    assert report.classes() == ["process.segfault"]
    assert report.diagnoses[0].evidence[0].path == "<stdin>"


def test_live_feed_line_reports_new_diagnosis_once(test_pack) -> None:
    scanner = Scanner(test_pack)
    src = Source(name="<child>")
    scanner.add_source(src)
    first = list(scanner.feed_line(src, "TESTSEGV signal: segmentation fault", 1))
    again = list(scanner.feed_line(src, "TESTSEGV signal: segmentation fault", 2))
    assert len(first) == 1 and again == []
    assert scanner.report().diagnoses[0].count == 2
