"""Checks that each rule's examples behave: what `rules test` runs, reported as lint problems."""

from __future__ import annotations

from collections.abc import Iterator

from qwen_triage.authoring.lint.check import Check
from qwen_triage.authoring.lint.context import LintContext
from qwen_triage.authoring.lint.examples import ExampleRun
from qwen_triage.authoring.lint.problem import Problem


def _failing(check: Check, ctx: LintContext, kind: str) -> Iterator[Problem]:
    want = "does not fire" if kind == "match" else "fires"
    for run in ctx.example_runs():
        if run.kind == kind and not run.ok:
            yield _at_rule(check, run, f"{kind} example {want}: {run.example[:200]!r}")


def _at_rule(check: Check, run: ExampleRun, message: str) -> Problem:
    return check.at(run.loaded.path, run.loaded.position.line, 1, message, run.loaded.rule.id)


def _match_misses(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """A `match` example is a line the rule exists for: through the real matcher (prefilter, sources,
    vetoes) it must fire, or the rule does not do what it says."""
    return _failing(check, ctx, "match")


def _no_match_fires(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """A `no_match` example is a near miss the rule must leave alone: firing on it is a false diagnosis."""
    return _failing(check, ctx, "no_match")


CHECKS = (
    Check("example-match-misses", "error", "a `match` example does not fire its rule", "run", _match_misses,
          examples=True),
    Check("example-no-match-fires", "error", "a `no_match` example fires its rule", "run", _no_match_fires,
          examples=True),
)
