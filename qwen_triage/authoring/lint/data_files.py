"""Checks of the data files beside the rules: the launch stages, the known-benign lines, the catalogue map."""

from __future__ import annotations

from collections.abc import Iterator

from qwen_triage.authoring.lint.catalogue import failed
from qwen_triage.authoring.lint.check import Check
from qwen_triage.authoring.lint.context import LintContext
from qwen_triage.authoring.lint.probe import probe_pattern
from qwen_triage.authoring.lint.problem import Problem


def _data_invalid(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """stages.yaml, benign.yaml and catalogue-map.yaml load with the pack: a schema error, a pattern that misses
    its own example, or a family whose class does not exist would stop every scan."""
    for data in ctx.data_files:
        if data.error is not None:
            yield failed(check, data.error)


def _benign_backtracking(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """Benign patterns run on every unexplained error line: probed for backtracking as rules' patterns are."""
    from qwen_triage.rulepack.benign import BENIGN_FILE, load_benign_templates

    for data in ctx.data_files:
        if data.name != BENIGN_FILE or data.error is not None:
            continue
        for template in load_benign_templates(data.path):
            reason = probe_pattern(template.pattern, template.examples)
            if reason:
                yield check.at(data.path, 1, 1, f"benign pattern {template.pattern!r}: {reason}")


CHECKS = (
    Check("data-invalid", "error", "stages.yaml, benign.yaml or catalogue-map.yaml fails its schema", "run",
          _data_invalid),
    Check("benign-backtracking", "error", "a benign pattern backtracks catastrophically on a probe line", "run",
          _benign_backtracking),
)
