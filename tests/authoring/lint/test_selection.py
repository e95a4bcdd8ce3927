"""Choosing checks: `--select`/`--ignore`/`--level` take an id or a leading run of its words (`pattern` is every
`pattern-*` check), an unknown one is a usage error, `--list-checks` lists them all (text, JSON), and
the exit status stays what it was: errors fail, warnings only with `--strict`."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from qwen_triage.authoring.lint.registry import CHECKS
from qwen_triage.authoring.lint.check import chosen, unknown_selectors
from qwen_triage.cli.main import cli
from tests.authoring.lint.rulefiles import ids, lint, rule, rules_dir

TWO_WARNINGS = rule(match="any: ['^.*frobnicate failed']", example="it: frobnicate failed", fix="")  # anchored: probes stay fast
BOTH = {"pattern-unbounded-gap", "fix-missing"}


def _lint(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["rules", "lint", *args])
    return r.exit_code, r.output


def test_select_and_ignore_by_id_and_by_prefix(tmp_path: Path) -> None:
    d = rules_dir(tmp_path, TWO_WARNINGS)
    assert ids(lint(d)) == BOTH
    assert ids(lint(d, select=["fix-missing"])) == {"fix-missing"}
    assert ids(lint(d, select=["pattern"])) == {"pattern-unbounded-gap"}
    assert ids(lint(d, ignore=["pattern"])) == {"fix-missing"}
    assert ids(lint(d, select=["pattern", "fix"], ignore=["pattern-unbounded-gap"])) == {"fix-missing"}


def test_a_prefix_is_whole_words() -> None:
    assert [c.id for c in chosen(CHECKS, select=["example"])] == ["example-match-misses", "example-no-match-fires"]
    assert unknown_selectors(CHECKS, ["pat", "pattern", "overlap-shadowed", "nosuch"]) == ["pat", "nosuch"]


def test_cli_ignore_and_exit_status(tmp_path: Path) -> None:
    d = str(rules_dir(tmp_path, TWO_WARNINGS))
    code, out = _lint(d)
    assert code == 0 and "[fix-missing]" in out and "[pattern-unbounded-gap]" in out
    code, out = _lint("--ignore", "fix-missing", d)
    assert code == 0 and "[fix-missing]" not in out and "[pattern-unbounded-gap]" in out
    assert _lint("--strict", d)[0] == 1
    assert _lint("--strict", "--ignore", "fix", "--ignore", "pattern", d)[0] == 0


def test_cli_unknown_check_is_a_usage_error(tmp_path: Path) -> None:
    code, out = _lint("--ignore", "fix-mising", str(rules_dir(tmp_path, rule())))
    assert code == 2 and "fix-mising" in out and "--list-checks" in out


def test_cli_json_problems(tmp_path: Path) -> None:
    d = str(rules_dir(tmp_path, rule(example="frobnicate failed well", fix="")))
    code, out = _lint("--format", "json", d)
    data = json.loads(out[: out.rindex("}") + 1])
    assert code == 1 and data["errors"] == 1 and data["warnings"] == 1
    assert {(p["check"], p["level"], p["rule"]) for p in data["problems"]} == {
        ("example-match-misses", "error", "local.clean"), ("fix-missing", "warning", "local.clean")}


def test_list_checks_text_and_json() -> None:
    code, out = _lint("--list-checks")
    assert code == 0
    rows = [line.split(None, 2) for line in out.splitlines()]
    assert [(r[0], r[1]) for r in rows] == [(c.id, c.level) for c in CHECKS]
    code, out = _lint("--list-checks", "--format", "json")
    listed = json.loads(out)["checks"]
    assert code == 0 and [c["id"] for c in listed] == [c.id for c in CHECKS]
    assert all(c["level"] in ("error", "warning", "info") and len(c["why"]) > len(c["summary"]) for c in listed)
    assert len({c.id for c in CHECKS}) == len(CHECKS)


def test_a_check_given_another_level(tmp_path: Path) -> None:
    d = rules_dir(tmp_path, TWO_WARNINGS)
    assert {(p.check, p.level) for p in lint(d, levels=[("fix", "error"), ("pattern", "info")])} == {
        ("fix-missing", "error"), ("pattern-unbounded-gap", "info")}
    assert {p.level for p in lint(d, levels=[("fix", "error"), ("fix-missing", "info")])} == {"info", "warning"}
    code, out = _lint("--level", "fix-missing=error", str(d))
    assert code == 1 and "error: [local.clean] no fix steps" in out
    assert _lint("--level", "fix-missing=loud", str(d))[0] == 2
    assert _lint("--level", "fix-mising=error", str(d))[0] == 2
