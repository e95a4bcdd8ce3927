"""Families as tables (a captured code → class, severity, words) and storms (`count` lines in a window)."""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.scanner import scan_paths
from qwen_triage.rulepack.errors import RuleFileError
from qwen_triage.rulepack.pack import load_pack

TABLE_RULES = """\
rules:
  - id: t.xid
    class: hardware.xid_app
    title: The GPU reported an Xid
    severity: warning
    sources: [kernel]
    match:
      any: ['TESTXID Xid \\((?P<pci>[0-9a-f:]{7,12})\\): (?P<xid>\\d{1,4})\\b']
    extract: {pci: str, xid: int}
    explain: "GPU {pci} reported Xid {xid}."
    table:
      key: xid
      source: https://docs.nvidia.com/deploy/xid-errors/index.html
      otherwise: OTHERWISE
      rows:
        - values: [48, 79, "094"]
          class: hardware.xid_fatal
          severity: critical
          title: The GPU reported a hardware Xid that needs a reset
          explain: "GPU {pci}: Xid {xid} needs a reset."
        - values: [74]
          class: hardware.nvlink_error
          severity: error
    examples:
      match: ["TESTXID Xid (0000:3b:00): 79, GPU has fallen off the bus"]
      no_match: ["TESTXID Xid"]
  - id: t.aer-storm
    class: hardware.pcie_error
    title: A storm of corrected PCIe errors
    severity: error
    sources: [kernel]
    match:
      any: ['TESTAER PCIe Bus Error: severity=Corrected']
      count: 5
      window: 50
    examples:
      match: ["TESTAER PCIe Bus Error: severity=Corrected, type=Physical Layer"]
      no_match: ["TESTAER PCIe Bus Error: severity=Uncorrected"]
  - id: t.flap
    class: node.nic_error
    title: A link flaps
    severity: warning
    sources: [kernel]
    match:
      any: ['TESTNIC (?P<iface>eth\\d): Link (?:up|down)']
      count: 3
      count_by: iface
      window: 50
    extract: {iface: str}
    explain: "{iface} flaps."
    examples:
      match: ["TESTNIC eth0: Link up\nTESTNIC eth0: Link down\nTESTNIC eth0: Link up"]
      no_match: ["TESTNIC eth0: Link up\nTESTNIC eth1: Link up\nTESTNIC eth2: Link up"]
"""


def compiled(tmp_path: Path, otherwise: str = "rule", engine: str = "literal") -> CompiledPack:
    d = tmp_path / f"rules-{otherwise}"
    d.mkdir(exist_ok=True)
    (d / "t.yaml").write_text(TABLE_RULES.replace("OTHERWISE", otherwise))
    return CompiledPack.build(load_pack([d], bundled=False), engine=engine, cache_dir=tmp_path / "hs")


def scan(tmp_path: Path, pack: CompiledPack, text: str):  # type: ignore[no-untyped-def]
    p = tmp_path / "k.log"
    p.write_text(text)
    return scan_paths([str(p)], pack)


@pytest.mark.parametrize("engine", ["literal", "hyperscan"])
def test_a_row_decides_class_severity_and_words(tmp_path: Path, engine: str) -> None:
    if engine == "hyperscan":
        pytest.importorskip("hyperscan")
    report = scan(tmp_path, compiled(tmp_path, engine=engine), "TESTXID Xid (0000:3b:00): 094, detail\n")
    (d,) = report.diagnoses
    assert (d.class_, d.severity.value, d.title) == ("hardware.xid_fatal", "critical", "The GPU reported a hardware Xid that needs a reset")
    assert d.summary == "GPU 0000:3b:00: Xid 94 needs a reset."
    assert d.rule == "t.xid"


def test_rows_keep_what_they_do_not_say(tmp_path: Path) -> None:
    report = scan(tmp_path, compiled(tmp_path), "TESTXID Xid (0000:3b:00): 74, link\n")
    (d,) = report.diagnoses
    assert (d.class_, d.severity.value, d.title) == ("hardware.nvlink_error", "error", "The GPU reported an Xid")
    assert d.summary == "GPU 0000:3b:00 reported Xid 74."


def test_a_code_no_row_lists(tmp_path: Path) -> None:
    line = "TESTXID Xid (0000:3b:00): 13, graphics exception\n"
    as_rule = scan(tmp_path, compiled(tmp_path, "rule"), line)
    assert [(o.class_, o.severity.value) for o in as_rule.diagnoses + as_rule.observations] == [("hardware.xid_app", "warning")]
    ignored = scan(tmp_path, compiled(tmp_path, "ignore"), line)
    assert ignored.diagnoses == [] and ignored.observations == []


def test_two_codes_two_classes_in_one_log(tmp_path: Path) -> None:
    report = scan(tmp_path, compiled(tmp_path), "TESTXID Xid (0000:3b:00): 74, a\nTESTXID Xid (0000:3c:00): 48, b\n")
    assert set(report.classes()) == {"hardware.xid_fatal", "hardware.nvlink_error"}


def test_a_storm_fires_and_a_trickle_does_not(tmp_path: Path) -> None:
    line = "TESTAER PCIe Bus Error: severity=Corrected, type=Physical Layer\n"
    pack = compiled(tmp_path)
    trickle = "".join(line + "noise\n" * 60 for _ in range(6))  # six errors, never five within 50 lines
    assert scan(tmp_path, pack, trickle).diagnoses == []
    storm = "noise\n" * 10 + line * 5
    (d,) = scan(tmp_path, pack, storm).diagnoses
    assert d.class_ == "hardware.pcie_error"
    assert d.facts["lines_in_window"] == 5
    assert d.evidence[0].line == 11


def test_a_storm_by_value_counts_each_value_apart(tmp_path: Path) -> None:
    pack = compiled(tmp_path)
    boot = "".join(f"TESTNIC eth{i}: Link up\n" for i in range(6))  # six links up once each: no storm
    assert scan(tmp_path, pack, boot).diagnoses == []
    flap = "".join(f"TESTNIC eth{i % 2}: Link {'up' if i % 4 < 2 else 'down'}\n" for i in range(5))
    (d,) = scan(tmp_path, pack, flap).diagnoses  # eth0 three times among eth1's two lines
    assert (d.class_, d.facts["iface"], d.facts["lines_in_window"]) == ("node.nic_error", "eth0", 3)
    assert [e.line for e in d.evidence] == [1, 3, 5]


def test_table_checks(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "t.yaml").write_text(TABLE_RULES.replace("OTHERWISE", "rule").replace("class: hardware.nvlink_error", "class: hardware.nope"))
    with pytest.raises(RuleFileError, match="unknown class 'hardware.nope'"):
        load_pack([bad], bundled=False)
    (bad / "t.yaml").write_text(TABLE_RULES.replace("OTHERWISE", "rule").replace("values: [74]", "values: [79]"))
    with pytest.raises(RuleFileError, match="listed twice"):
        load_pack([bad], bundled=False)
    (bad / "t.yaml").write_text(TABLE_RULES.replace("OTHERWISE", "rule").replace("key: xid", "key: code"))
    with pytest.raises(RuleFileError, match="not a fact"):
        load_pack([bad], bundled=False)
    (bad / "t.yaml").write_text(TABLE_RULES.replace("OTHERWISE", "rule").replace("count: 5", "count: 500"))
    with pytest.raises(RuleFileError, match="cannot exceed"):
        load_pack([bad], bundled=False)
    (bad / "t.yaml").write_text(TABLE_RULES.replace("OTHERWISE", "rule").replace("count_by: iface", "count_by: port"))
    with pytest.raises(RuleFileError, match="`count_by` 'port' is not a fact"):
        load_pack([bad], bundled=False)
    (bad / "t.yaml").write_text(TABLE_RULES.replace("OTHERWISE", "rule").replace("count: 3", "count: 1"))
    with pytest.raises(RuleFileError, match="needs `count` of 2 or more"):
        load_pack([bad], bundled=False)


def test_the_pack_cache_keeps_tables_and_counts(tmp_path: Path) -> None:
    d = tmp_path / "rules"
    d.mkdir()
    (d / "t.yaml").write_text(TABLE_RULES.replace("OTHERWISE", "ignore"))
    fresh = load_pack([d], bundled=False, cache_dir=tmp_path / "cache")
    cached = load_pack([d], bundled=False, cache_dir=tmp_path / "cache")
    assert list(tmp_path.joinpath("cache").glob("pack-*.pickle"))
    assert [r.rule for r in cached.rules] == [r.rule for r in fresh.rules]
    assert cached.rules[0].rule.table is not None and cached.rules[0].rule.table.otherwise == "ignore"
    assert cached.rules[1].rule.match.count == 5
    assert cached.rules[2].rule.match.count_by == "iface"
