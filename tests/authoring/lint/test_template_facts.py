"""Issue 29 §3: `rules lint` holds a fact that some of a rule's patterns do not capture to an optional part
`[[…]]` of the rule's texts, so a report never prints '?' where a line did not give the fact."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.authoring.lint.rulefiles import lint, rule, rules_dir

TWO_WAYS = "any: ['frobnicate failed (?P<how>badly)', 'frobnicate broke down']"
BOTH_SAY = "any: ['frobnicate failed (?P<how>badly)', 'frobnicate broke (?P<how>down)']"
ALL_SAYS = "any: ['frobnicate failed badly', 'frobnicate broke down']\n      all: ['frobnicator (?P<how>\\w+) reset']"


def maybe_unset(tmp_path: Path, match: str, extra: str = "", fix: str = '- step: "read the frobnicator docs"'):
    problems = lint(rules_dir(tmp_path, rule(match=match, extra=extra, fix=fix)), examples=False)
    return [str(p) for p in problems if p.check == "template-maybe-unset"]


def texts(where: str, how: str) -> tuple[str, str]:
    """The rule's `explain` line and fix block, naming the fact as ``how`` ("{how}" or "[[ {how}]]") in one place."""
    extra = f'    explain: "frobnicated{how}"\n' if where == "explain" else ""
    fix = {"explain": '- step: "read the docs"',
           "step": f'- step: "undo what it did{how}"',
           "action": f'- step: "see the docs"\n        action: {{type: hardware_service, what: "frobnicator{how}"}}'}[where]
    return extra, fix


@pytest.mark.parametrize("where", ["explain", "step", "action"])
def test_a_fact_one_pattern_leaves_unset_is_an_error_outside_brackets(tmp_path: Path, where: str) -> None:
    found = maybe_unset(tmp_path, TWO_WAYS, *texts(where, " {how}"))
    assert len(found) == 1 and "{how}" in found[0] and "error" in found[0], found


@pytest.mark.parametrize("where", ["explain", "step", "action"])
def test_the_same_fact_inside_brackets_is_fine(tmp_path: Path, where: str) -> None:
    assert maybe_unset(tmp_path, TWO_WAYS, *texts(where, "[[ {how}]]")) == []


@pytest.mark.parametrize("match", [BOTH_SAY, ALL_SAYS], ids=["every-any-pattern", "an-all-pattern"])
def test_a_fact_every_finding_has_may_stand_anywhere(tmp_path: Path, match: str) -> None:
    assert maybe_unset(tmp_path, match, '    explain: "frobnicated {how}"\n') == []
