"""Hardening (issue 10, item 9): hostile rule packs must not exhaust the machine.

The attacks: a `where:` constraint with no timeout (43 s on a 41-character
field) that lint's backtracking probe skipped; a 2 GB rule file read whole
before its size was checked, and `/dev/zero` behind a symlink (MemoryError);
`unless` with a huge window (quadratic in the findings waiting on it); a short
pattern that takes Hyperscan a minute to compile.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.scanner import scan_paths
from qwen_triage.rulepack.errors import MAX_RULE_FILE_BYTES, RuleFileError
from qwen_triage.rulepack.pack import load_pack
from qwen_triage.rulepack.yamlload import load_yaml
from tests.timelimits import scaled


def _rule(rid: str, match: str, examples: tuple[str, str] = ("x", "y")) -> str:
    return f"""  - id: {rid}
    class: process.segfault
    title: hostile {rid}
    severity: error
    sources: [any]
    match:
{match}
    examples:
      match: [{examples[0]!r}]
      no_match: [{examples[1]!r}]
"""


def _pack(tmp_path: Path, body: str, engine: str = "literal") -> CompiledPack:
    d = tmp_path / "rules"
    d.mkdir(exist_ok=True)
    (d / "hostile.yaml").write_text("rules:\n" + body)
    return CompiledPack.build(load_pack([d], bundled=False), engine=engine, cache_dir=tmp_path / "cache")


WHERE_ATTACK = _rule("h.where", "      any: ['HOSTWHERE boom']\n      where: {program: '(a|a)*'}")
WHERE_LINE = "Nov 29 10:00:00 host " + "a" * 41 + "![4242]: HOSTWHERE boom\n"  # a journal line: its tag names the program


def test_item9_where_constraint_times_out_and_names_the_rule(tmp_path) -> None:
    compiled = _pack(tmp_path, WHERE_ATTACK)
    log = tmp_path / "x.log"
    log.write_text(WHERE_LINE * 5)
    t0 = time.perf_counter()
    report = scan_paths([str(log)], compiled)
    assert time.perf_counter() - t0 < scaled(10)
    assert not report.diagnoses
    assert [d.rule for d in report.stats.disabled_rules] == ["h.where"]
    assert any("h.where" in n for n in report.notes)


def test_item9_lint_probes_where_constraints(tmp_path) -> None:
    from qwen_triage.authoring.lint.run import lint_rule

    d = tmp_path / "rules"
    d.mkdir()
    (d / "hostile.yaml").write_text("rules:\n" + WHERE_ATTACK)
    (rule,) = load_pack([d], bundled=False).rules
    problems = [str(p) for p in lint_rule(rule) if p.level == "error"]
    assert any("where program" in p and "timed out" in p for p in problems), problems


def test_item9_bundled_where_constraints_pass_the_probe() -> None:
    from qwen_triage.authoring.lint.probe import probe_pattern

    for lr in load_pack([]).rules:
        for field, constraint in lr.rule.match.where.items():
            assert probe_pattern(constraint, [], full=True) is None, (lr.rule.id, field)


def test_item9_huge_rule_file_is_refused_before_reading(tmp_path) -> None:
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:  # sparse: 2 GB on paper, nothing on disk
        fh.truncate(2 * 2**30)
    t0 = time.perf_counter()
    with pytest.raises(RuleFileError, match="limited"):
        load_yaml(big)
    assert time.perf_counter() - t0 < scaled(1)


def test_item9_dev_zero_behind_a_symlink_is_refused(tmp_path) -> None:
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero here")
    d = tmp_path / "rules"
    d.mkdir()
    (d / "zero.yaml").symlink_to("/dev/zero")
    with pytest.raises(RuleFileError, match="not a regular file"):
        load_yaml(d / "zero.yaml")
    with pytest.raises(RuleFileError, match="not a regular file"):
        load_pack([d], bundled=False, cache_dir=tmp_path / "cache")


def test_item9_fifo_is_refused_without_blocking(tmp_path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(RuleFileError, match="not a regular file"):
        load_yaml(fifo)


def test_item9_a_file_at_the_limit_still_reads_and_one_past_it_does_not(tmp_path) -> None:
    from qwen_triage.rulepack.errors import read_bounded

    p = tmp_path / "ok.yaml"
    p.write_bytes(b"x" * 1000)
    assert len(read_bounded(str(p), limit=1000)) == 1000
    with pytest.raises(RuleFileError, match="limited"):
        read_bounded(str(p), limit=999)
    assert MAX_RULE_FILE_BYTES >= 2**20


UNLESS_ATTACK = _rule("h.unless", "      any: ['UNLESSHIT']\n      unless: ['UNLESSVETO']\n      window: 100000")


def test_item9_unless_with_a_huge_window_is_not_quadratic(tmp_path) -> None:
    compiled = _pack(tmp_path, UNLESS_ATTACK)
    log = tmp_path / "x.log"
    log.write_text("UNLESSHIT\n" * 20_000)
    t0 = time.perf_counter()
    report = scan_paths([str(log)], compiled)
    assert time.perf_counter() - t0 < scaled(30)  # quadratic: 2e8 veto checks, minutes
    assert [d.rule for d in report.diagnoses] == ["h.unless"]


def test_item9_unless_veto_still_vetoes_everything_pending(tmp_path) -> None:
    compiled = _pack(tmp_path, UNLESS_ATTACK)
    log = tmp_path / "x.log"
    log.write_text("UNLESSHIT\n" * 3000 + "UNLESSVETO\n")
    assert scan_paths([str(log)], compiled).diagnoses == []
    log.write_text("UNLESSVETO\n" + "UNLESSHIT\n" * 10)
    assert scan_paths([str(log)], compiled).diagnoses == []


def test_item9_unless_window_passes_then_fires(tmp_path) -> None:
    compiled = _pack(tmp_path, _rule("h.u2", "      any: ['UNLESSHIT']\n      unless: ['UNLESSVETO']\n      window: 3"))
    log = tmp_path / "x.log"
    log.write_text("UNLESSHIT\n" + "filler\n" * 5 + "UNLESSVETO\n")
    assert [d.rule for d in scan_paths([str(log)], compiled).diagnoses] == ["h.u2"]


def test_item9_pattern_too_costly_for_hyperscan_goes_to_the_literal_prefilter(tmp_path) -> None:
    pytest.importorskip("hyperscan")
    body = _rule("h.heavy", "      any: ['HEAVYHS x[a-z]{0,60000}y']")
    t0 = time.perf_counter()
    compiled = _pack(tmp_path, body, engine="hyperscan")
    assert time.perf_counter() - t0 < scaled(20)  # compiled as is: over a minute
    assert compiled.prefilter.name == "hyperscan" and compiled.prefilter.screened == [0]
    log = tmp_path / "x.log"
    log.write_text("noise\nHEAVYHS xabcy\n")
    report = scan_paths([str(log)], compiled)
    assert [d.rule for d in report.diagnoses] == ["h.heavy"]
    assert any("h.heavy" in n and "Hyperscan" in n for n in report.notes)


def test_item9_expanded_size_measures_nested_repeats() -> None:
    from qwen_triage.engine.prefilter import MAX_EXPANDED, expanded_size, screen_heavy

    assert expanded_size("abc") == 3
    assert expanded_size("x(?:[a-z]{0,300}y){30}") > 9000
    assert expanded_size("a{1,99999999999999999999999}") > MAX_EXPANDED  # beyond Python's parser
    assert screen_heavy(["ok", "x[a-z]{0,50000}y"]) == [1]
    assert len(screen_heavy(["q[a-z]{0,4000}"] * 8)) == 4  # the other four fit the total budget


# -- issue 30 §6: lint decides by work, not by the clock ----------------------------------------------------------

def test_a_probe_starved_of_cpu_is_not_called_catastrophic() -> None:
    """On a loaded machine the regex engine's wall-clock timeout fires while the probe had almost no CPU: it is
    run again with a longer limit, and only CPU spent counts (the same answer as on an idle machine)."""
    import time

    from qwen_triage.authoring.lint.probe import PROBE_TIMEOUT, _cpu_seconds

    tries: list[float] = []

    def starved(_probe: str, timeout: float) -> None:  # the scheduler gives it no CPU for six wall limits
        tries.append(timeout)
        if len(tries) <= 6:
            raise TimeoutError

    def burns(_probe: str, timeout: float) -> None:  # a catastrophic pattern: all CPU until the limit
        end = time.thread_time() + timeout
        while time.thread_time() < end:
            pass
        raise TimeoutError

    cost = _cpu_seconds(starved, "x")
    assert cost is not None and cost < 0.1  # however long the machine kept it waiting: the wall never decides
    assert tries == [PROBE_TIMEOUT * 4**i for i in range(7)]
    assert _cpu_seconds(burns, "x") is None
