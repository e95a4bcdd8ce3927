"""A lint run: load once (:mod:`.context`), run the chosen checks, report problems in file order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from qwen_triage.authoring.lint.catalogue import CATALOGUE_INVALID
from qwen_triage.authoring.lint.check import Check, chosen, level_of
from qwen_triage.authoring.lint.context import load_context
from qwen_triage.authoring.lint.problem import Level, Problem
from qwen_triage.authoring.lint.registry import CHECKS, RULE_CHECKS
from qwen_triage.rulepack.pack import LoadedRule


def lint_paths(paths: list[Path], *, examples: bool = True, select: Sequence[str] = (),
               ignore: Sequence[str] = (), levels: Sequence[tuple[str, Level]] = (),
               base: Path | None = None) -> list[Problem]:
    """Lint rule files or directories (default: the bundled pack) with the checks ``select`` names
    (all when empty) less those ``ignore`` names (ids or id prefixes, :func:`.check.matches`).

    ``examples``: also run each rule's ``match``/``no_match`` examples through the real matcher
    (what ``rules test`` does); a failing one is an error. ``levels``: (selector, level) overrides of the
    checks' own levels (:func:`.check.parse_levels`). ``base``: see :func:`.context.load_context`.
    """
    checks = [replace(c, level=level_of(c, levels)) for c in chosen(CHECKS, select, ignore)]
    if not examples:
        checks = [c for c in checks if not c.examples]
    ctx = load_context(paths, base)
    if ctx.classes_error is not None:  # nothing else can be checked without the catalogue
        return [p for c in checks if c.id == CATALOGUE_INVALID.id for p in c.run(ctx)]
    problems: list[Problem] = []
    for check in checks:
        if check.scope == "run":
            problems.extend(check.run(ctx))
    rule_checks = [c for c in checks if c.scope == "rule"]
    for lr in ctx.rules:
        problems.extend(_rule_problems(lr, rule_checks))
    return sorted(problems, key=lambda p: (p.path, p.line, p.column))


def _rule_problems(lr: LoadedRule, checks: Sequence[Check]) -> list[Problem]:
    return [p for check in checks for p in check.run(lr)]


def lint_rule(lr: LoadedRule) -> list[Problem]:
    """Every per-rule check on one loaded rule."""
    return _rule_problems(lr, RULE_CHECKS)
