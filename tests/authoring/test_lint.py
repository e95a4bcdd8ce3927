"""Issue 10, item 14: `rules lint` reports every schema error of a file in one pass, runs the rules'
examples, and `rules actions` lists the action vocabulary.

Before, lint stopped at the first schema error (four rounds to fix one rule) and never ran examples.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from qwen_triage.authoring.lint.run import lint_paths
from qwen_triage.cli.main import cli
from qwen_triage.rulepack.actions import ACTION_TYPES

FOUR_ERRORS = """rules:
  - id: local.four
    class: config.bad_argument
    title: four mistakes
    severity: fatal
    sources: [vllm]
    match:
      any: ['frobnicate failed badly']
    extract: {}
    fix:
      - step: "x"
        action: {type: launch_rockets}
    examples:
      match: ["frobnicate failed badly"]
    colour: red
"""

BAD_EXAMPLE = """rules:
  - id: local.example
    class: config.bad_argument
    title: an example that does not fire
    severity: error
    sources: [vllm]
    match:
      any: ['frobnicate failed badly']
    fix:
      - step: "read the docs"
    examples:
      match: ["frobnicate failed well"]
      no_match: ["frobnicate failed badly"]
"""


def test_every_schema_error_in_one_pass(tmp_path: Path) -> None:
    f = tmp_path / "four.yaml"
    f.write_text(FOUR_ERRORS)
    errors = [p for p in lint_paths([f], examples=False) if p.level == "error"]
    text = "\n".join(str(p) for p in errors)
    assert len(errors) >= 4, text
    assert "severity" in text and "launch_rockets" in text
    assert "no_match" in text and "colour" in text
    lines = {p.line for p in errors}
    assert {5, 12, 15} <= lines, text  # each at its own line
    assert all(str(p).startswith(f"{f}:{p.line}:{p.column}: error") for p in errors)
    assert {p.check for p in errors} == {"file-invalid"} and all(str(p).endswith(" [file-invalid]") for p in errors)


def test_failing_examples_are_lint_errors(tmp_path: Path) -> None:
    f = tmp_path / "example.yaml"
    f.write_text(BAD_EXAMPLE)
    errors = [str(p) for p in lint_paths([f]) if p.level == "error"]
    assert any("match example does not fire" in e and "local.example" in e for e in errors), errors
    assert any("no_match example fires" in e for e in errors), errors
    assert sorted(p.check for p in lint_paths([f])) == ["example-match-misses", "example-no-match-fires"]


def test_rules_actions_lists_every_type() -> None:
    r = CliRunner().invoke(cli, ["rules", "actions", "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    types = {a["type"]: a for a in data["actions"]}
    assert len(types) == len(ACTION_TYPES)
    assert types["reboot"]["safety"] == "destructive" and types["free_port"]["safety"] == "caution"
    assert types["set_arg"]["safety"] == "safe or caution"
    assert [p["name"] for p in types["set_arg"]["parameters"]] == ["arg", "value"]
    assert "--max-model-len" in data["allowed"]["args"] and "NCCL_P2P_DISABLE" in data["allowed"]["env"]
    text = CliRunner().invoke(cli, ["rules", "actions"])
    assert text.exit_code == 0 and "lower_max_model_len" in text.output and "destructive" in text.output


def test_docs_say_no_match_is_required() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "writing-rules.md").read_text()
    assert "`examples.no_match` are both required" in doc
