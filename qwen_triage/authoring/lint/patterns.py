"""Checks of each rule's regular expressions: cheap to prefilter, safe on hostile lines, one line at a time."""

from __future__ import annotations

import re
from collections.abc import Iterator

from qwen_triage.authoring.lint.check import Check
from qwen_triage.authoring.lint.context import LintContext
from qwen_triage.authoring.lint.probe import probe_pattern
from qwen_triage.authoring.lint.problem import Problem
from qwen_triage.engine.literals import MIN_LITERAL, required_literals
from qwen_triage.engine.prefilter import HEAVY, MAX_EXPANDED_TOTAL, expanded_size, screen_heavy
from qwen_triage.rulepack.pack import LoadedRule

_UNBOUNDED_GAP = re.compile(r"(?<!\\)\.[*+](?!$)")
_CHAR_CLASS = re.compile(r"(?<!\\)\[(?:\\.|[^\]\\])*\]")


def patterns_of(lr: LoadedRule) -> list[str]:
    """Every pattern a rule runs on a line: its triggers and its vetoes."""
    return [*lr.rule.match.any, *lr.rule.match.all, *lr.rule.match.unless]


def _no_literal(check: Check, lr: LoadedRule) -> Iterator[Problem]:
    """The pure-Python prefilter keys each pattern on a required literal: without one, the pattern
    is tried on every line of every log."""
    for p in patterns_of(lr):
        req = required_literals(p)
        if req is None or req.weakest < MIN_LITERAL:
            yield check.on_rule(lr, f"pattern {p!r} has no required literal of {MIN_LITERAL}+ characters: "
                                    "the pure-Python prefilter would try it on every line")


def _backtracking(check: Check, lr: LoadedRule) -> Iterator[Problem]:
    """A pattern that backtracks exponentially hangs a scan on one hostile line."""
    for p in patterns_of(lr):
        reason = probe_pattern(p, list(lr.rule.examples.match))
        if reason:
            yield check.on_rule(lr, f"pattern {p!r}: {reason}")


def _where_backtracking(check: Check, lr: LoadedRule) -> Iterator[Problem]:
    """A `where` constraint must match a whole field: probed with fullmatch, on short fields too
    (a field of 41 characters was enough to hang one)."""
    for field_name, constraint in lr.rule.match.where.items():
        reason = probe_pattern(constraint, [], full=True)
        if reason:
            yield check.on_rule(lr, f"where {field_name}: {constraint!r}: {reason}")


def _unbounded_gap(check: Check, lr: LoadedRule) -> Iterator[Problem]:
    """An unbounded `.*` between two parts rescans the rest of a long line at every start."""
    for p in patterns_of(lr):
        if _UNBOUNDED_GAP.search(_CHAR_CLASS.sub("", p)):
            yield check.on_rule(lr, f"pattern {p!r} has an unbounded `.*`/`.+` gap; use a bounded one like "
                                    "`.{0,200}`")


def _spans_lines(check: Check, lr: LoadedRule) -> Iterator[Problem]:
    """Patterns see one line (or one joined record): a newline in one can never match."""
    for p in patterns_of(lr):
        if "\\n" in p or "(?s)" in p:
            yield check.on_rule(lr, f"pattern {p!r} tries to match across lines; use `all` with a window instead")


def _heavy_budget(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """Hyperscan compiles a pattern's expansion: the patterns above a size share a budget, and past it the
    largest are left out of the database and prefiltered by their literals alone (engine.prefilter.screen_heavy)
    -- a slower scan, and a note on every report, whoever's rule was left out. Named on each linted rule with a
    heavy pattern, while the pack (the bundled rules with the linted ones) is over the budget."""
    pack = {**ctx.bundled(), **{lr.rule.id: lr for lr in ctx.rules}}
    patterns = list(dict.fromkeys(p for lr in pack.values() if not lr.rule.match.multiline for p in patterns_of(lr)))
    screened = [patterns[i] for i in screen_heavy(patterns)]
    if not screened:
        return
    total = sum(n for p in patterns if (n := expanded_size(p)) > HEAVY)
    for lr in ctx.rules:
        for p in patterns_of(lr):
            if (n := expanded_size(p)) > HEAVY:
                yield check.on_rule(lr, f"pattern {p[:80]!r}... expands to {n} states; the pack's patterns above "
                                        f"{HEAVY} total {total}, over the budget of {MAX_EXPANDED_TOTAL}, so "
                                        f"{len(screened)} of them lose Hyperscan: bound its repeats tighter "
                                        "(`.{0,200}` rather than `.{0,4000}`)")


CHECKS = (
    Check("pattern-no-literal", "error", "a pattern has no required literal for the prefilter", "rule", _no_literal),
    Check("pattern-backtracking", "error", "a pattern backtracks catastrophically on a probe line", "rule",
          _backtracking),
    Check("pattern-spans-lines", "error", "a pattern tries to match across lines", "rule", _spans_lines),
    Check("pattern-unbounded-gap", "warning", "a pattern has an unbounded `.*`/`.+` gap", "rule", _unbounded_gap),
    Check("where-backtracking", "error", "a `where` constraint backtracks catastrophically on a probe field",
          "rule", _where_backtracking),
    Check("pattern-heavy-budget", "error", "the pack's largest patterns overrun Hyperscan's compile budget", "run",
          _heavy_budget),
)
