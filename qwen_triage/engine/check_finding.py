"""A preflight check's finding: the second kind of input the correlator takes, beside a rule firing on log lines.

A check (``plan``, ``check-model``, ``doctor``, the runner's own launch checks)
words its finding itself, so unlike a log finding it carries its summary, fix
steps and evidence ready to show. Its own module, apart from the correlator,
so the scan path does not build this model at import time.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from qwen_triage.report.model import Evidence, FixOut
from qwen_triage.rulepack.severity import Severity


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
