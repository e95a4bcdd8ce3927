"""The report: a versioned JSON contract, produced from these models.

``qwen-triage schema`` prints the JSON Schema of :class:`Report`. Bump
``SCHEMA_VERSION`` on any change that removes or retypes a field; adding a
field is compatible.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from qwen_triage import __version__
from qwen_triage.rulepack.severity import Severity

SCHEMA_VERSION = 1


class _Out(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class Evidence(_Out):
    path: str = Field(description="input the line came from")
    line: int = Field(description="1-based line number in that input")
    text: str = Field(description="the line as read (wrappers kept, ANSI removed)")
    truncated: bool = Field(default=False, description="the line was longer than the matching bound and was cut")


class FixOut(_Out):
    step: str
    action: dict[str, Any] | None = Field(
        default=None, description="structured action from the fixed vocabulary, with its `safety` class"
    )


class Symptom(_Out):
    class_: str = Field(alias="class")
    rule: str
    title: str
    severity: Severity
    count: int
    evidence: list[Evidence]


class Observation(_Out):
    class_: str = Field(alias="class")
    rule: str
    title: str
    severity: Severity
    summary: str
    facts: dict[str, Any]
    evidence: list[Evidence]
    more_evidence: int = Field(default=0, description="evidence lines not listed")
    count: int
    references: list[str] = Field(default_factory=list)


class Diagnosis(Observation):
    rules: list[str] = Field(default_factory=list, description="every rule that found this class")
    symptoms: list[Symptom] = Field(default_factory=list, description="consequences of this root cause")
    fix: list[FixOut] = Field(default_factory=list)


class Unrecognised(_Out):
    """Error evidence no rule explains, as a template (variable parts masked), deduplicated."""

    template: str = Field(description="the line with numbers, paths, addresses and quoted values masked")
    kind: str = Field(
        description="exception (a traceback's final line), error (an error-level line), exit (the process's status), "
        "or stall (the input ends repeating a heartbeat: a hang)"
    )
    count: int = Field(description="lines with this template")
    evidence: Evidence = Field(description="the first line with this template")
    program: str | None = Field(default=None, description="the program that printed it, where the line says")
    raised_by: str | None = Field(default=None, description="for exceptions: the library of the frame that raised")
    exception: str | None = Field(default=None, description="for exceptions: the exception's class name")
    hint: str | None = Field(default=None, description="for stalls: what usually hangs in that stage")


class DisabledRuleOut(_Out):
    rule: str
    pattern: str
    where: str
    reason: str = "pattern timed out"


class Stats(_Out):
    lines: int
    bytes: int
    seconds: float
    rules: int
    patterns: int = 0
    prefilter: str = ""
    candidate_lines: int = 0
    truncated_lines: int = Field(default=0, description="lines matched on a bounded prefix only")
    max_line_bytes: int = 0
    disabled_rules: list[DisabledRuleOut] = Field(default_factory=list)


class InputOut(_Out):
    name: str
    kind: str
    lines: int
    bytes: int


class Report(_Out):
    schema_version: int = SCHEMA_VERSION
    tool: str = f"qwen-triage {__version__}"
    inputs: list[InputOut] = Field(default_factory=list)
    diagnoses: list[Diagnosis] = Field(default_factory=list, description="root causes, most important first")
    observations: list[Observation] = Field(default_factory=list, description="benign findings worth knowing")
    notes: list[str] = Field(default_factory=list, description="things about the scan itself")
    unrecognised: list[Unrecognised] = Field(
        default_factory=list, description="error lines no rule explains, most telling first (added in 0.2)"
    )
    stats: Stats

    def to_json(self, indent: int | None = 2) -> str:
        return self.model_dump_json(by_alias=True, indent=indent)

    def classes(self) -> list[str]:
        return [d.class_ for d in self.diagnoses]
