"""The cross-rule checks, defined precisely: a duplicate fires on the same lines (same pattern, same
limits), not merely shares a pattern; a shadowed rule is spoken over on every one of its examples."""

from __future__ import annotations

from pathlib import Path

from qwen_triage.rulepack.pack import load_pack
from tests.authoring.lint.rulefiles import lint, quoted, rule, rules_dir

OVERLAP = ["overlap"]


def _found(d: Path) -> list[tuple[str, str | None]]:
    return sorted((p.check, p.rule) for p in lint(d, select=OVERLAP))


def test_a_pattern_shared_by_an_any_and_an_all_rule_is_no_duplicate(tmp_path: Path) -> None:
    both = "all: ['frobnicate failed badly', 'frobnicate gave up']"
    d = rules_dir(tmp_path, rule("local.a"), rule("local.b", cls="server.port_in_use", match=both,
                                                   example="frobnicate failed badly\nfrobnicate gave up"))
    assert _found(d) == []


def test_the_same_pattern_on_other_sources_is_no_duplicate(tmp_path: Path) -> None:
    other = rule("local.b", cls="server.port_in_use").replace("sources: [vllm]", "sources: [sglang]")
    assert _found(rules_dir(tmp_path, rule("local.a"), other)) == []


def _raised(rid: str, module: str) -> str:
    return rule(rid, match=f"raised: {{module: [{module}], exception: [ValueError]}}",
                example=f'  File "/venv/lib/python3.11/site-packages/{module}a.py", line 1, in f\nValueError: bad')


def test_raising_site_rules_on_other_modules_are_no_duplicates(tmp_path: Path) -> None:
    """Two `raised:` rules key on the same exception line's pattern; the module tells them apart, so only two rules
    on the same module are a duplicate."""
    assert _found(rules_dir(tmp_path / "a", _raised("local.a", "frob/config/"), _raised("local.b", "frob/cli/"))) == []
    found = _found(rules_dir(tmp_path / "b", _raised("local.a", "frob/config/"), _raised("local.b", "frob/config/")))
    assert ("overlap-duplicate-pattern", "local.b") in found


def test_a_contributed_rule_that_repeats_a_bundled_pattern_names_the_bundled_rule(tmp_path: Path) -> None:
    bundled = next(lr for lr in load_pack([]).rules if lr.rule.match.any and not lr.rule.match.where
                   and not lr.rule.match.unless and lr.rule.match.count == 1 and not lr.rule.match.multiline)
    pattern = bundled.rule.match.any[0]
    copy = rule("local.copy", cls=bundled.rule.class_, match=f"any: [{quoted(pattern)}]",
                example=bundled.rule.examples.match[0]).replace(
        "sources: [vllm]", "sources: [" + ", ".join(bundled.rule.sources) + "]")
    problems = [p for p in lint(rules_dir(tmp_path, copy), select=["overlap-duplicate-pattern"])]
    assert [(p.rule, p.level) for p in problems] == [("local.copy", "warning")]
    assert bundled.rule.id in problems[0].message and f"{bundled.path}:{bundled.position.line}" in problems[0].message


def test_a_narrow_rule_under_a_wider_one_of_its_class_is_shadowed(tmp_path: Path) -> None:
    wide = rule("local.wide", severity="critical", match="any: ['frobnicate failed']", example="frobnicate failed")
    assert _found(rules_dir(tmp_path, wide, rule("local.narrow"))) == [("overlap-shadowed", "local.narrow")]


def test_not_shadowed_when_it_speaks_itself_or_is_another_class(tmp_path: Path) -> None:
    wide = rule("local.wide", severity="warning", match="any: ['frobnicate failed']", example="frobnicate failed")
    assert _found(rules_dir(tmp_path / "a", wide, rule("local.narrow"))) == []  # narrow is more severe
    other = wide.replace("severity: warning", "severity: critical").replace("config.bad_argument",
                                                                           "server.port_in_use")
    assert _found(rules_dir(tmp_path / "b", other, rule("local.narrow"))) == []


def test_a_structure_rule_never_shadows_a_sentence_rule_of_its_class(tmp_path: Path) -> None:
    """The correlator lets a sentence rule speak before an as severe structure rule (``floor``) of its class, even
    one loaded first: such a floor firing on every example of a sentence rule speaks over nothing."""
    wide = rule("local.wide", match="any: ['frobnicate failed']", example="frobnicate failed",
                extra="    floor: true\n")
    # the sentence rule reads one line of its example, the structure rule the next (a floor yields on a line a
    # sentence rule reads, so only another line of the example shows the two side by side)
    narrow = rule("local.narrow", match="any: ['frobnication broke']").replace(
        "match: ['frobnicate failed badly']", 'match: ["frobnication broke\\nfrobnicate failed"]')
    assert _found(rules_dir(tmp_path / "a", wide, narrow)) == []
    sentence = wide.replace("    floor: true\n", "")
    assert _found(rules_dir(tmp_path / "b", sentence, narrow)) == [("overlap-shadowed", "local.narrow")]


def test_not_shadowed_when_one_example_escapes_the_wider_rule(tmp_path: Path) -> None:
    wide = rule("local.wide", severity="critical", match="any: ['frobnicate failed']", example="frobnicate failed")
    narrow = rule("local.narrow", match="any: ['frobnicate failed badly', 'frobnication broke']").replace(
        "match: ['frobnicate failed badly']", "match: ['frobnicate failed badly', 'frobnication broke']")
    assert _found(rules_dir(tmp_path, wide, narrow)) == []
