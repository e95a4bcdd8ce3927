"""Broken rule files fail with file:line:column and the reason; the bundled pack is clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from qwen_triage.rulepack.pack import load_pack, load_rule_file, load_classes
from qwen_triage.rulepack.paths import bundled_rules_dir
from qwen_triage.rulepack.errors import RuleFileError

GOOD_RULE = """\
rules:
  - id: x.one
    class: process.segfault
    title: one
    severity: error
    sources: [any]
    match:
      any: ['Segmentation fault \\(core dumped\\)']
    examples:
      match: ["Segmentation fault (core dumped)"]
      no_match: ["Segmentation"]
"""
PATTERN_LINE = "any: ['Segmentation fault \\(core dumped\\)']"
assert PATTERN_LINE in GOOD_RULE


def load_text(tmp_path: Path, text: str) -> None:
    p = tmp_path / "r.yaml"
    p.write_text(text)
    load_rule_file(p, load_classes(bundled_rules_dir() / "classes.yaml"))


@pytest.mark.parametrize(
    ("text", "line", "col", "reason"),
    [
        (GOOD_RULE.replace("severity: error", "severity: fatal"), 5, 15, "severity"),
        (GOOD_RULE.replace("class: process.segfault", "class: process.nope"), 3, 12, "unknown class"),
        (GOOD_RULE.replace("    title: one\n", "    title: one\n    colour: red\n"), 5, 13, "colour"),
        (GOOD_RULE.replace(PATTERN_LINE, "any: ['Segmentation (fault']"), 8, 13,
         "bad pattern"),
        (GOOD_RULE.replace("      no_match: [\"Segmentation\"]\n", ""), 10, 7, "no_match"),
        (GOOD_RULE + "    fix:\n      - step: run it\n        action: {type: run_shell, cmd: 'rm -rf /'}\n", 14, 17,
         "run_shell"),
        (GOOD_RULE.replace("title: one", "title: &a one"), 4, 12, "anchors are not allowed"),
        (GOOD_RULE.replace("title: one", "title: !!python/object/apply:os.system ['id']"), 4, 12, "not allowed"),
        ("rules:\n  - id: [unclosed\n", 3, 1, "YAML syntax"),
        (GOOD_RULE.replace("    title: one\n", "    title: one\n    title: two\n"), 5, 5, "duplicate key"),
        (GOOD_RULE.replace(PATTERN_LINE, PATTERN_LINE + "\n      unless_after: true"), 8, 7, "`unless_after` needs"),
    ],
    ids=["enum", "class", "unknown-key", "regex", "examples", "action", "anchor", "python-tag", "syntax", "dupkey",
         "lone-unless-after"],
)
def test_errors_have_positions(tmp_path, text, line, col, reason) -> None:
    with pytest.raises(RuleFileError) as info:
        load_text(tmp_path, text)
    err = info.value
    assert (err.line, err.column) == (line, col), str(err)
    assert reason in err.reason
    assert str(err).startswith(f"{tmp_path / 'r.yaml'}:{line}:{col}: ")


def test_alias_bomb_is_rejected_before_expansion(tmp_path) -> None:
    bomb = "a: &a ['x','x','x','x','x','x','x','x','x']\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n"
        for i in range(9)
    )
    with pytest.raises(RuleFileError, match="anchors are not allowed"):
        load_text(tmp_path, bomb)


def test_duplicate_ids_across_directories(tmp_path) -> None:
    d1, d2 = tmp_path / "a", tmp_path / "b"
    d1.mkdir()
    d2.mkdir()
    (d1 / "r.yaml").write_text(GOOD_RULE)
    (d2 / "r.yaml").write_text(GOOD_RULE)
    with pytest.raises(RuleFileError, match="duplicate rule id 'x.one'"):
        load_pack([d1, d2], bundled=False)


def run_cli(*args: str, env: dict | None = None, input: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qwen_triage", *args], capture_output=True, timeout=300, env=env,
                          input=input)


def test_scan_with_broken_rule_dir_exits_2_with_one_line(tmp_path) -> None:
    (tmp_path / "bad.yaml").write_text(GOOD_RULE.replace("severity: error", "severity: fatal"))
    proc = run_cli("scan", "--rules", str(tmp_path), "/dev/null")
    assert proc.returncode == 2
    err = proc.stderr.decode().strip().splitlines()
    assert len(err) == 1 and f"{tmp_path / 'bad.yaml'}:5:15:" in err[0]


def test_rules_env_variable_adds_a_directory(tmp_path) -> None:
    import os

    (tmp_path / "mine.yaml").write_text(GOOD_RULE)
    log = tmp_path / "x.log"
    log.write_text("Segmentation fault (core dumped)\n")
    env = dict(os.environ, QWEN_TRIAGE_RULES=str(tmp_path))
    proc = run_cli("rules", "show", "x.one", env=env)
    assert proc.returncode == 0 and b'"id": "x.one"' in proc.stdout


def test_lint_reports_hostile_pattern_and_missing_literal(tmp_path) -> None:
    data = Path(__file__).parents[1] / "data"
    proc = run_cli("rules", "lint", str(data / "rules_hostile.yaml"))
    assert proc.returncode == 1
    assert b"timed out" in proc.stdout
    weak = tmp_path / "weak.yaml"
    weak.write_text(GOOD_RULE.replace(PATTERN_LINE, r"any: ['\d+ \w+']"))
    proc = run_cli("rules", "lint", str(weak))
    assert proc.returncode == 1 and b"no required literal" in proc.stdout


def test_bundled_pack_lints_clean() -> None:
    """`qwen-triage rules lint` on the bundled pack: no error. The robustness checks' variants (thousands of
    re-rendered examples, the longest part of a lint) are left to
    tests/authoring/lint/test_robustness.py, which runs them all under each prefilter and asserts more (no head
    or drift miss either); running them here too only repeated that work (.ci/run relies on this suite)."""
    from qwen_triage.authoring.lint.run import lint_paths

    errors = [str(p) for p in lint_paths([], ignore=("robust",)) if p.level == "error"]
    assert errors == []


@pytest.mark.parametrize("engine", ["hyperscan", "literal"])
def test_bundled_examples_pass_with_each_prefilter(engine, request) -> None:
    """The session's compiled bundled pack under each prefilter (conftest: ``warm_cache``, ``compiled_literal``)."""
    from qwen_triage.authoring.lint.examples import test_examples

    if engine == "hyperscan":
        pytest.importorskip("hyperscan")
    compiled = request.getfixturevalue("warm_cache" if engine == "hyperscan" else "compiled_literal")
    assert compiled.prefilter.name == engine
    failed = [f"{r.rule} {r.kind}: {r.example!r}" for r in test_examples(compiled.pack, compiled) if not r.ok]
    assert failed == []


def test_pack_cache_follows_file_changes(tmp_path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    f = rules / "r.yaml"
    f.write_text(GOOD_RULE)
    cache = tmp_path / "cache"
    first = load_pack([rules], bundled=False, cache_dir=cache)
    assert [r.rule.title for r in first.rules] == ["one"]
    assert list(cache.glob("pack-*.pickle"))
    again = load_pack([rules], bundled=False, cache_dir=cache)
    assert [r.rule.title for r in again.rules] == ["one"]
    f.write_text(GOOD_RULE.replace("title: one", "title: changed"))
    assert [r.rule.title for r in load_pack([rules], bundled=False, cache_dir=cache).rules] == ["changed"]
