"""Checks of a rule's fix steps: their actions stay inside what a rule may change, and there are some."""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from qwen_triage.authoring.lint.check import Check
from qwen_triage.authoring.lint.problem import Problem
from qwen_triage.rulepack.pack import LoadedRule


@lru_cache(maxsize=1)
def _action_adapter() -> Any:
    """Built once a run: building a TypeAdapter of the action union costs as much as a rule file's YAML."""
    from pydantic import TypeAdapter

    from qwen_triage.rulepack.actions import Action

    return TypeAdapter(Action)


def _action_problem(action: dict[str, Any] | None) -> str | None:
    """A fix action aimed at what a rule must never change (the model, credentials, paths, LD_*…)."""
    if not action:
        return None
    from pydantic import ValidationError

    from qwen_triage.rulepack.actions import denied_reason

    try:
        parsed = _action_adapter().validate_python({k: v for k, v in action.items() if k != "safety"})
    except ValidationError:
        return None  # the schema reports it
    why = denied_reason(parsed)
    return f"fix action {action.get('type')}: {why}" if why else None


def _action_denied(check: Check, lr: LoadedRule) -> Iterator[Problem]:
    """The runner never applies such an action, whatever the rule says: a rule that carries one is wrong."""
    for step in lr.rule.fix:
        reason = _action_problem(step.action)
        if reason:
            yield check.on_rule(lr, reason)


def _fix_missing(check: Check, lr: LoadedRule) -> Iterator[Problem]:
    """Without steps of its own a rule shows its class's default fix, which is seldom the specific one."""
    if not lr.rule.fix:
        yield check.on_rule(lr, "no fix steps: the class's default fix will be shown")


CHECKS = (
    Check("action-denied", "error", "a fix action aims at what a rule must never change", "rule", _action_denied),
    Check("fix-missing", "warning", "a rule has no fix steps of its own", "rule", _fix_missing),
)
