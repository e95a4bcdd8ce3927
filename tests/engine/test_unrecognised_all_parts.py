"""A line one part of an `all` rule took is not explained until that rule completes.

An `all` rule needs each of its parts within its window (a peer-access warning *and* a C++ assertion, say). A line
that matches one part only, in a log that never prints the other, belongs to no finding: were it taken as explained,
a failing log whose only error line is such a part (a TensorRT-LLM ``Assertion failed`` followed by its numbered
native backtrace, so that the line is not the log's last words either) would give an empty report. So:

- the rule completes: the line is its evidence, not listed;
- the rule never completes and nothing is diagnosed: the line is listed as an error no rule explains;
- the rule never completes but another rule diagnoses the log: the line is a known family's line beside a diagnosis,
  not listed (as a line some rule takes never is).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_triage.engine.scanner import compile_pack, scan_paths
from qwen_triage.rulepack.pack import load_pack

RULES = """\
rules:
  - id: local.peer-then-assert
    class: nccl.p2p_unsupported
    title: Peer access missing, then an assertion
    severity: error
    sources: [any]
    match:
      all:
        - 'quux peer access is not available'
        - 'Assertion failed: '
      window: 20
    examples:
      match: ["quux peer access is not available\\n[ERROR] Assertion failed: n > 0"]
      no_match: ["[ERROR] Assertion failed: n > 0"]
  - id: local.oom
    class: memory.gpu_oom
    title: Out of quux memory
    severity: error
    sources: [any]
    match: {any: ['quux out of memory']}
    examples: {match: ['quux out of memory'], no_match: ['nothing']}
"""

ASSERTION = "[ERROR] quux::Exception: [ERROR] Assertion failed: mMaxNumSequences > 0 (/src/quux/batch.cpp:123)\n"
BACKTRACE = ("1       0x7f0e1c2a3b4c quux::throwRuntimeError(char const*, int) + 100\n"
             "2       0x7f0e1c2a3b6e quux::batch::Manager::step() + 200\n")


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    rules = tmp_path_factory.mktemp("rules")
    rules.chmod(0o755)
    (rules / "local.yaml").write_text(RULES)
    return compile_pack(pack=load_pack([rules], bundled=False), engine="literal")


def _scan(tmp_path: Path, pack, text: str):  # type: ignore[no-untyped-def]
    log = tmp_path / "run.log"
    log.write_text(text)
    return scan_paths([str(log)], pack)


def test_a_part_of_a_rule_that_never_completes_is_listed(tmp_path: Path, pack) -> None:
    report = _scan(tmp_path, pack, "[INFO] quux engine loaded\n" + ASSERTION + BACKTRACE)
    assert report.diagnoses == []
    (item,) = report.unrecognised
    assert "Assertion failed" in item.template and item.evidence.line == 2


def test_a_part_of_a_rule_that_completes_is_its_evidence(tmp_path: Path, pack) -> None:
    report = _scan(tmp_path, pack, "[WARNING] quux peer access is not available\n" + ASSERTION + BACKTRACE)
    assert [d.class_ for d in report.diagnoses] == ["nccl.p2p_unsupported"]
    assert report.unrecognised == []


def test_a_part_beside_another_diagnosis_is_not_listed(tmp_path: Path, pack) -> None:
    report = _scan(tmp_path, pack, "[ERROR] quux out of memory on device 0\n" + ASSERTION + BACKTRACE)
    assert [d.class_ for d in report.diagnoses] == ["memory.gpu_oom"]
    assert report.unrecognised == []


def test_a_split_scan_lists_the_part_as_one_process_does(tmp_path: Path, pack) -> None:
    """The split scan (engine.split) replays each part's signals with the `all` rules they wait on."""
    from tests.engine.test_split import one_process, split

    log = tmp_path / "big.log"
    log.write_text("[INFO] quux engine loaded\n" * 300 + ASSERTION + BACKTRACE + "[INFO] quux idle\n" * 300)
    whole = one_process([log], pack, 512)
    assert [u["template"] for u in whole["unrecognised"]] and whole["diagnoses"] == []
    assert split([log], pack, 512, 2048, 0) == whole
