"""Each lint check on a small file that breaks one thing: the problem names exactly that check, at the
check's level, and `--ignore` of the check's id silences it (the ids stay what the docs and users' CI say)."""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_triage.authoring.lint.registry import CHECKS
from qwen_triage.authoring.lint.run import lint_paths
from tests.authoring.lint.rulefiles import ids, lint, rule, rules_dir

DENIED = '- step: "preload the shim"\n        action: {type: set_env, name: LD_PRELOAD, value: /opt/x.so}'
# check id -> (rule file texts, extra files); a rule file's other checks must stay quiet
CASES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "data-invalid": ((), {"benign_yaml": 'benign:\n  - pattern: "abc"\n    why: because\n    examples: ["xyz"]\n'}),
    "benign-backtracking": ((), {"benign_yaml": "benign:\n  - pattern: 'ERROR (a|aa)+$'\n    why: noise\n"
                                                "    examples: ['ERROR aa']\n"}),
    "data-map-unmatched": ((), {"catalogue__map_yaml": "families:\n  - id: nowhere\n    program: noprogram\n"
                                                                "    label: nothing at all\n    files: ['x/**']\n"
                                                                "    class: config.bad_argument\n    severity: error\n"
                                                                "    why: a family of a program nobody ships\n"}),
    "file-invalid": ((rule(extra="    colour: red\n"),), {}),
    "class-unknown": ((rule(cls="nosuch.class"),), {}),
    "rule-id-duplicate": ((rule("vllm.port-in-use"),), {}),
    "pattern-no-literal": ((rule(match=r"any: ['[a-z]+ \d+']", example="frob 12", no_match="frob"),), {}),
    "pattern-backtracking": ((rule(match="any: ['(?i)frobnicate (a+)+b']", example="frobnicate aab"),), {}),
    "pattern-spans-lines": ((rule(match="any: ['(?s)[Ff]robnicate failed']", example="frobnicate failed"),), {}),
    "pattern-unbounded-gap": ((rule(match="any: ['^.*frobnicate failed']", example="it: frobnicate failed"),), {}),
    # past what Hyperscan compiles in time: prefiltered by its literals alone, and every report would say so; the
    # repeat takes a character no probe line repeats after the literal, so the backtracking probe costs it nothing
    # (`[a-z ]{0,6000}` cost ~0.2 s of CPU on the probe of 3000 literals, at the probe's bar on a busy machine)
    "pattern-heavy-budget": ((rule(match="any: ['(?i)frobnicate failed [#]{0,6000}badly']"),), {}),
    "extract-no-group": ((rule(extra="    extract: {size: int}\n"),), {}),
    "template-no-group": ((rule(extra='    explain: "frobnicated {size} times"\n'),), {}),
    "template-maybe-unset": ((rule(match="any: ['(?i)frobnicate failed (?P<how>badly)', '(?i)frobnicate broke down']",
                                   extra='    explain: "frobnicated {how}"\n'),), {}),
    "action-denied": ((rule(fix=DENIED),), {}),
    "fix-missing": ((rule(fix=""),), {}),
    "example-match-misses": ((rule(example="frobnicate failed well"),), {}),
    "example-no-match-fires": ((rule(no_match="frobnicate failed badly twice"),), {}),
    "overlap-duplicate-pattern": ((rule("local.a"), rule("local.b", cls="server.port_in_use")), {}),
    "overlap-shadowed": ((rule("local.wide", severity="critical", match="any: ['(?i)frobnicate failed']",
                               example="frobnicate failed"), rule("local.narrow")), {}),
    # a kernel rule keyed in the middle of free text: on a real kernel line (dmesg, journald's kernel:) the
    # match must begin where the kernel's message does
    "robust-wrapper": ((rule(match="any: ['(?i)frobnicate failed badly']", sources="kernel",
                             example="one two three four five frobnicate failed badly"),), {}),
    "robust-head": ((rule(match="any: ['(?i)^frobnicate failed badly']", sources="sglang"),), {}),
    "robust-drift": ((rule(match="any: ['frobnicate failed badly']"),), {}),
    "pattern-long-literal": ((rule(match="any: ['(?i)frobnicate failed (?:so )?badly that the widget rolled off the "
                                         "table and under the sofa']",
                                   example="frobnicate failed badly that the widget rolled off the table and under the "
                                           "sofa"),), {}),
}
# what else a case cannot help tripping: a `where` no example line has a field for never fires
ALSO = {"where-backtracking": {"example-match-misses"},
        # a sentence of 13 words breaks when a release adds one inside it
        "pattern-long-literal": {"robust-drift"}}
CASES["where-backtracking"] = ((rule(match="any: ['frobnicate failed badly']\n      where: {program: '(a|a)*'}"),), {})
CATALOGUE = {"catalogue-invalid", "catalogue-cycle", "fix-defaults-invalid", "checks-invalid"}  # tests/authoring/lint/test_catalogue.py
LEVEL = {c.id: c.level for c in CHECKS}


def test_every_check_has_a_case() -> None:
    assert set(CASES) | CATALOGUE == set(LEVEL)


def test_the_clean_rule_is_clean(tmp_path: Path) -> None:
    assert lint(rules_dir(tmp_path, rule())) == []


@pytest.mark.parametrize("check", sorted(CASES))
def test_a_broken_file_names_the_check_and_ignore_silences_it(tmp_path: Path, check: str) -> None:
    texts, files = CASES[check]
    d = rules_dir(tmp_path, *texts, **files)
    problems = lint(d)
    assert ids(problems) == {check} | ALSO.get(check, set()), [str(p) for p in problems]
    mine = [p for p in problems if p.check == check]
    assert {p.level for p in mine} == {LEVEL[check]}
    assert all(str(p).endswith(f" [{check}]") and str(p).startswith(f"{p.path}:{p.line}:{p.column}: ")
               for p in mine)
    assert check not in ids(lint_paths([d], ignore=[check]))


def test_a_storm_may_name_the_lines_it_counted(tmp_path: Path) -> None:
    """`{lines_in_window}` is a fact the engine gives every finding of a `count` rule, and only of one."""
    explain = '    explain: "frobnicated {lines_in_window} times"\n'
    storm = rule(match="any: ['(?i)frobnicate failed badly']\n      count: 2\n      window: 10", extra=explain)
    storm = storm.replace("match: ['frobnicate failed badly']", 'match: ["frobnicate failed badly\\nfrobnicate failed badly"]')
    assert lint(rules_dir(tmp_path / "storm", storm)) == []
    assert ids(lint(rules_dir(tmp_path / "one", rule(extra=explain)))) == {"template-no-group"}
