"""A preflight check's finding: the second kind of input the correlator takes, beside a rule firing on log lines.

A check (``plan``, ``check-model``, ``doctor``, the runner's own launch checks)
words its finding itself, so unlike a log finding it carries its summary, fix
steps and evidence ready to show. What does not vary (class, title, severity,
a fix that names nothing found) is declared once in ``rules/checks.yaml``;
:func:`finding` looks it up, so a check passes only what it found. Its own
module, apart from the correlator, so the scan path does not build this model
at import time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from qwen_triage.report.model import Evidence, FixOut, PrintedBy
from qwen_triage.rulepack.severity import Severity

if TYPE_CHECKING:
    from qwen_triage.rulepack.checks import CheckSpec


class CheckFinding(BaseModel):
    """One check's verdict, worded by the check itself (no rule templates to fill)."""

    model_config = ConfigDict(extra="forbid")

    class_id: str
    rule: str
    title: str
    severity: Severity
    summary: str
    facts: dict[str, Any] = Field(default_factory=dict)
    evidence: list[Evidence] = Field(default_factory=list)
    fix: list[FixOut] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)
    count: int = 1  # lines it stands for (a located template seen on eight ranks is one finding)
    because: str | None = None  # "catalogue": a line no rule explains, classed by where it was printed
    printed_by: PrintedBy | None = None  # for `because: catalogue` (engine.locate)


def finding(
    check_id: str,
    summary: str,
    *,
    evidence: Iterable[Evidence] = (),
    fix: Iterable[FixOut] | None = None,
    facts: dict[str, Any] | None = None,
    variant: str | None = None,
    checks: dict[str, CheckSpec] | None = None,
) -> CheckFinding:
    """The finding of the declared check ``check_id``: its class, title and severity (or its ``variant``'s)
    from the declaration, the title's ``{fact}`` names filled from ``facts``; ``fix`` None takes the
    declared fix steps. An undeclared id is a KeyError: a check cannot report under a name nobody lists."""
    from qwen_triage.rulepack.checks import bundled_checks

    declared = bundled_checks() if checks is None else checks
    if check_id not in declared:
        raise KeyError(f"check {check_id!r} is not declared in rules/checks.yaml")
    spec = declared[check_id]
    title, severity, class_id = spec.variant(variant)
    facts = facts or {}
    steps = (
        list(fix)
        if fix is not None
        else [FixOut(step=s.step, action=s.action.model_dump(mode="json") if s.action else None) for s in spec.fix]
    )
    return CheckFinding(
        class_id=class_id,
        rule=check_id,
        title=title.format_map(facts) if "{" in title else title,
        severity=severity,
        summary=summary,
        facts=facts,
        evidence=list(evidence),
        fix=steps,
    )
