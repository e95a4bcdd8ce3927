"""Checks of what a rule says: every name its extract and its templates use is captured by a pattern."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from qwen_triage.authoring.lint.check import Check
from qwen_triage.authoring.lint.patterns import patterns_of
from qwen_triage.authoring.lint.problem import Problem
from qwen_triage.rulepack.pack import LoadedRule, compile_pattern

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


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


def _template_no_group(check: Check, lr: LoadedRule) -> Iterator[Problem]:
    """A `{name}` in the explanation, a fix step or an action's text is filled from a captured group (or from
    the facts every table row adds); one no pattern captures is shown as '?'."""
    rule = lr.rule
    groups = captured(lr) | row_facts(lr)
    texts = [rule.explain or ""] + [s.step for s in rule.fix]
    texts += [str(v) for s in rule.fix if s.action for v in s.action.values() if isinstance(v, str)]
    for text in texts:
        for name in _PLACEHOLDER.findall(text):
            if name not in groups:
                yield check.on_rule(lr, f"template uses {{{name}}}, which no pattern captures")


CHECKS = (
    Check("extract-no-group", "error", "`extract` names a group no pattern captures", "rule", _extract_no_group),
    Check("template-no-group", "error", "a `{name}` in a template names a group no pattern captures", "rule",
          _template_no_group),
)
