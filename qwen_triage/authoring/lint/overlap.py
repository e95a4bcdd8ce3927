"""Cross-rule checks: two rules that fire on the same lines, and a rule another one always speaks over.

Both are cheap: duplicates compare pattern text, and shadowing reads the example runs lint already
made (every rule that fired on each example), so no pattern is compiled or matched again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterator
from typing import Any

from qwen_triage.authoring.lint.check import Check
from qwen_triage.authoring.lint.context import LintContext
from qwen_triage.authoring.lint.problem import Problem
from qwen_triage.rulepack.pack import LoadedRule


def triggers(lr: LoadedRule) -> list[tuple[Any, ...]]:
    """What makes the rule fire, as comparable keys: each `any` pattern alone (any one fires it), or the
    whole `all` set with its window, each with what else limits the lines it accepts (sources, `where`,
    `count`, `multiline`, `unless`, the raising site). Rules with one key in common fire on the same lines:
    two `raised:` rules share the exception line's pattern, but rules on other modules never fire together."""
    m, rule = lr.rule.match, lr.rule
    raised = (frozenset(m.raised_module), frozenset(m.raised_exception))
    limits = (frozenset(rule.sources), tuple(sorted(m.where.items())), m.count, m.multiline,
              frozenset(m.unless), m.unless_after, raised)
    if m.all:
        return [("all", frozenset(m.all), m.window, limits)]
    return [("any", p, m.window if m.count > 1 else None, limits) for p in m.any]


def _duplicate_pattern(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """Two rules with the same pattern (and the same limits) both fire on every such line: two diagnoses
    for one line, or, in one class, one rule's wording never shown. Usually a copy left behind."""
    first: dict[Hashable, LoadedRule] = {}
    linted = {id(lr) for lr in ctx.rules}
    for lr in [*ctx.bundled().values(), *ctx.rules]:
        for key in triggers(lr):
            other = first.setdefault(key, lr)
            if id(lr) in linted and other is not lr and other.rule.id != lr.rule.id:
                what = "patterns" if key[0] == "all" else f"pattern {key[1]!r}"
                yield check.on_rule(lr, f"same {what} as {other.rule.id} ({other.path}:{other.position.line}): "
                                        "both fire on the same lines")


def speaks_over(a: LoadedRule, b: LoadedRule, order: dict[str, int]) -> bool:
    """Whether ``a``'s finding speaks for a class group that ``b``'s is in: the correlator keeps the most
    severe finding, a sentence rule's before a structure rule's (``floor``), then the one with more facts, then the
    first (pack order)."""
    ka = (a.rule.severity.rank, a.rule.floor, -len(a.rule.extract), order[a.rule.id])
    kb = (b.rule.severity.rank, b.rule.floor, -len(b.rule.extract), order[b.rule.id])
    return ka < kb


def _shadowed(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """Rule B is shadowed by rule A when both have one class and no table, A fires on every one of B's
    `match` examples, and A speaks for the group (more severe; or as severe with as many facts, and
    loaded first). Then B's title, explanation and fix are never shown on the lines it was written for."""
    fired: dict[str, frozenset[str]] = {}  # rule id -> the other rules that fired on every one of its examples
    rules: dict[str, LoadedRule] = {}
    for run in ctx.example_runs():
        if run.kind != "match":
            continue
        rid = run.loaded.rule.id
        rules[rid] = run.loaded
        others = run.fired - {rid}
        fired[rid] = fired[rid] & others if rid in fired else others
    order = {rid: i for i, rid in enumerate(rules)}
    by_class: dict[str, set[str]] = defaultdict(set)
    for rid, lr in rules.items():
        by_class[lr.rule.class_].add(rid)
    for rid, lr in rules.items():
        if lr.rule.table is not None:
            continue
        over = [rules[a] for a in sorted(fired[rid] & by_class[lr.rule.class_])
                if rules[a].rule.table is None and speaks_over(rules[a], lr, order)]
        if over:
            yield check.on_rule(lr, f"shadowed by {over[0].rule.id} ({over[0].path}:{over[0].position.line}): "
                                    "it fires on every match example and speaks for the class")


CHECKS = (
    Check("overlap-duplicate-pattern", "warning", "two rules fire on the same lines through the same pattern",
          "run", _duplicate_pattern),
    Check("overlap-shadowed", "warning", "another rule of the class fires on all of a rule's examples and "
          "speaks over it", "run", _shadowed, examples=True),
)
