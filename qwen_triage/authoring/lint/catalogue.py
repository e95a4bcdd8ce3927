"""Checks of the files every pack shares: the class catalogue, the runner's per-class fix defaults and
the declarations of the built-in checks (rules/checks.yaml, :mod:`qwen_triage.rulepack.checks`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from qwen_triage.authoring.lint.check import Check
from qwen_triage.authoring.lint.context import LintContext, fix_defaults_error
from qwen_triage.authoring.lint.problem import Problem
from qwen_triage.rulepack.errors import RuleFileError
from qwen_triage.rulepack.spec import ClassSpec


def failed(check: Check, exc: RuleFileError) -> Problem:
    """A load error as this check's problem, at the error's own file:line:col."""
    return check.at(exc.path, exc.line, exc.column, exc.reason)


def _catalogue_invalid(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """classes.yaml must load: every rule names a class from it, so nothing else can be checked without it."""
    if ctx.classes_error is not None:
        yield failed(check, ctx.classes_error)


def _catalogue_cycle(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """A class that explains itself through a chain has no root cause to list its symptoms under."""
    for cycle in ctx.cycles:
        yield check.at(ctx.base / "classes.yaml", 1, 1, "explains cycle: " + " -> ".join(cycle))


def _fix_defaults_invalid(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """The runner applies these defaults unattended: actions must come from the vocabulary, classes exist."""
    if ctx.fix_defaults_error is not None:
        yield failed(check, ctx.fix_defaults_error)


def _checks_invalid(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """The built-in checks (doctor, check-model, plan, the runner) are declared in checks.yaml: a bad
    declaration or an unknown class there fails a preflight finding when it is made, not when it is written."""
    from qwen_triage.rulepack.checks import CHECKS_FILE, problems

    path = ctx.base / CHECKS_FILE
    if path.is_file():
        yield from (failed(check, exc) for exc in problems(path, frozenset(ctx.classes or ())))


CATALOGUE_INVALID = Check("catalogue-invalid", "error", "classes.yaml fails to load", "run", _catalogue_invalid)
CHECKS = (
    CATALOGUE_INVALID,
    Check("catalogue-cycle", "error", "a class explains itself through `explains`", "run", _catalogue_cycle),
    Check("fix-defaults-invalid", "error", "fix-defaults.yaml fails its schema or names an unknown class", "run",
          _fix_defaults_invalid),
    Check("checks-invalid", "error", "checks.yaml (the built-in checks) fails its schema or names an unknown class",
          "run", _checks_invalid),
)


def lint_fix_defaults(path: Path, classes: dict[str, ClassSpec]) -> list[Problem]:
    """The runner's per-class fix defaults: schema (actions from the vocabulary), class ids exist."""
    exc = fix_defaults_error(path, classes)
    return [failed(CHECKS[2], exc)] if exc is not None else []
