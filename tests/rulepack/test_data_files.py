"""The data files beside the rules (stages, known-benign lines) are schema-checked and linted like rules."""

from __future__ import annotations

from pathlib import Path

from qwen_triage.authoring.lint.run import lint_paths
from qwen_triage.rulepack.pack import load_pack
from qwen_triage.rulepack.stages import bundled_stages


def test_bundled_stages_and_benign_list_load() -> None:
    stages = bundled_stages()
    assert [s.id for s in stages.stages][:1] == ["start"] and stages.stages[-1].quiet_ok
    assert stages.heartbeats
    assert load_pack().benign


def test_a_benign_pattern_that_misses_its_example_is_a_lint_error(tmp_path: Path) -> None:
    (tmp_path / "benign.yaml").write_text('benign:\n  - pattern: "abc"\n    why: because\n    examples: ["xyz"]\n')
    errors = [str(p) for p in lint_paths([tmp_path]) if p.level == "error"]
    assert errors == [f"{tmp_path / 'benign.yaml'}:2:5: error: benign.0: Value error, pattern does not match its example 'xyz' [data-invalid]"]


def test_a_duplicate_stage_is_a_lint_error(tmp_path: Path) -> None:
    stage = "  - id: a\n    label: first one\n    rank: 0\n    patterns: ['Starting']\n"
    (tmp_path / "stages.yaml").write_text("stages:\n" + stage + stage)
    (problem,) = [p for p in lint_paths([tmp_path]) if p.level == "error"]
    assert "duplicate stage id 'a'" in str(problem) and str(tmp_path / "stages.yaml") in str(problem)
    assert problem.check == "data-invalid"
