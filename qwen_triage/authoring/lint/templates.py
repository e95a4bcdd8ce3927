"""Checks of what a rule says: every name its extract and its templates use is captured by a pattern."""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

from qwen_triage.authoring.lint.check import Check
from qwen_triage.authoring.lint.patterns import patterns_of
from qwen_triage.authoring.lint.problem import Problem
from qwen_triage.rulepack.pack import LoadedRule, compile_pattern
from qwen_triage.rulepack.templates import PLACEHOLDER, outside_optional


@lru_cache(maxsize=4096)
def _groups(pattern: str) -> frozenset[str]:
    return frozenset(compile_pattern(pattern).groupindex)  # once per pattern: compiling is lint's main cost


def captured(lr: LoadedRule) -> set[str]:
    """The named groups of the rule's patterns."""
    return {name for p in patterns_of(lr) for name in _groups(p)}


def _extract_no_group(check: Check, lr: LoadedRule) -> Iterator[Problem]:
    """A fact with no group to fill it is never set: the report would say '?' where it means a value."""
    groups = captured(lr)
    for name in lr.rule.extract:
        if name not in groups:
            yield check.on_rule(lr, f"extract names {name!r}, which no pattern captures")


def row_facts(lr: LoadedRule) -> set[str]:
    """The facts every finding of the rule gets from its table row (a code table's ``code_name``…): those all
    rows add, when a code no row lists gives no finding (``otherwise: ignore``)."""
    table = lr.rule.table
    if table is None or table.otherwise != "ignore" or not table.rows:
        return set()
    return set.intersection(*(set(row.facts) for row in table.rows))


def engine_facts(lr: LoadedRule) -> set[str]:
    """The facts the engine adds to every finding of the rule: a storm's ``lines_in_window``."""
    return {"lines_in_window"} if lr.rule.match.count > 1 else set()


def _texts(lr: LoadedRule) -> list[str]:
    """Every text of the rule a report fills: its explanation, its fix steps, its actions' string values."""
    rule = lr.rule
    texts = [rule.explain or ""] + [s.step for s in rule.fix]
    return texts + [str(v) for s in rule.fix if s.action for v in s.action.values() if isinstance(v, str)]


def always_set(lr: LoadedRule) -> set[str]:
    """The facts every finding of the rule has: captured by each of its `any` patterns, or by an `all` pattern
    (which must match too), or added by every table row."""
    match = lr.rule.match
    every_any = set.intersection(*(set(_groups(p)) for p in match.any)) if match.any else set()
    return every_any | {n for p in match.all for n in _groups(p)} | row_facts(lr) | engine_facts(lr)


def _template_maybe_unset(check: Check, lr: LoadedRule) -> Iterator[Problem]:
    """A fact some of the rule's patterns do not capture is unset on their matches, and the report would print
    '?' in its place ("tensor '?'"): it belongs in an optional part `[[…]]`, dropped when its fact is unset."""
    groups, always = captured(lr), always_set(lr)
    for text in _texts(lr):
        for name in dict.fromkeys(outside_optional(text)):
            if name in groups and name not in always:
                yield check.on_rule(lr, f"{{{name}}} is not captured by every pattern, so some findings would "
                                        f"print '?' for it: put the words that name it in [[…]]")


def _template_no_group(check: Check, lr: LoadedRule) -> Iterator[Problem]:
    """A `{name}` in the explanation, a fix step or an action's text is filled from a captured group (or from
    the facts every table row adds); one no pattern captures is shown as '?'."""
    groups = captured(lr) | row_facts(lr) | engine_facts(lr)
    for text in _texts(lr):
        for name in PLACEHOLDER.findall(text):
            if name not in groups:
                yield check.on_rule(lr, f"template uses {{{name}}}, which no pattern captures")


CHECKS = (
    Check("extract-no-group", "error", "`extract` names a group no pattern captures", "rule", _extract_no_group),
    Check("template-no-group", "error", "a `{name}` in a template names a group no pattern captures", "rule",
          _template_no_group),
    Check("template-maybe-unset", "error", "a `{name}` some patterns do not capture stands outside `[[…]]`",
          "rule", _template_maybe_unset),
)
