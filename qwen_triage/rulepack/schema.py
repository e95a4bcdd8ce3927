"""Pydantic models of the rule files and the class catalogue (unknown keys forbidden)."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from qwen_triage.rulepack.actions import Action


class Severity(str, Enum):
    critical = "critical"
    error = "error"
    warning = "warning"
    info = "info"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.critical: 0, Severity.error: 1, Severity.warning: 2, Severity.info: 3}


class Status(str, Enum):
    stable = "stable"
    experimental = "experimental"
    deprecated = "deprecated"


# Programs a rule documents itself as applying to (`sources:`); matching is
# governed by patterns and `where`, this list is what contributors and
# `rules list` read.
SOURCE_FAMILIES = (
    "ollama",
    "llama.cpp",
    "vllm",
    "nccl",
    "torch",
    "kernel",
    "docker",
    "hub",
    "transformers",
    "systemd",
    "any",
)

# Record fields a rule may constrain with `where`.
RECORD_FIELDS = ("program", "host", "level", "format", "rank", "gpu", "pid", "process", "path")

FactType = Literal["str", "int", "float", "bytes", "hex"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Match(_Strict):
    """What must be seen: ``any`` one pattern, or ``all`` within ``window`` lines."""

    any: list[str] = Field(default_factory=list)
    all: list[str] = Field(default_factory=list)
    window: int = Field(default=200, ge=1, le=100_000)
    unless: list[str] = Field(default_factory=list)
    where: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_kind(self) -> "Match":
        if bool(self.any) == bool(self.all):
            raise ValueError("give exactly one of `any` or `all` (a non-empty list of patterns)")
        for key in self.where:
            if key not in RECORD_FIELDS:
                raise ValueError(f"`where` names unknown field {key!r}; known: {', '.join(RECORD_FIELDS)}")
        return self


class FixStep(_Strict):
    step: str = Field(min_length=3)
    action: Action | None = None


class Examples(_Strict):
    match: list[str] = Field(min_length=1)
    no_match: list[str] = Field(min_length=1)


class Rule(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)+$")
    class_: str = Field(alias="class")
    title: str = Field(min_length=3)
    severity: Severity
    status: Status = Status.stable
    sources: list[str] = Field(min_length=1)
    references: list[str] = Field(default_factory=list)
    match: Match
    extract: dict[str, FactType] = Field(default_factory=dict)
    explain: str | None = None
    fix: list[FixStep] = Field(default_factory=list)
    examples: Examples

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("sources")
    @classmethod
    def _known_sources(cls, value: list[str]) -> list[str]:
        unknown = [s for s in value if s not in SOURCE_FAMILIES]
        if unknown:
            raise ValueError(f"unknown source {unknown[0]!r}; known: {', '.join(SOURCE_FAMILIES)}")
        return value

    @field_validator("references")
    @classmethod
    def _urls(cls, value: list[str]) -> list[str]:
        for url in value:
            if not url.startswith(("https://", "http://")):
                raise ValueError(f"reference {url!r} is not a URL")
        return value


class RuleFile(_Strict):
    rules: list[Rule]


class FailureClass(_Strict):
    id: str = Field(pattern=r"^[a-z0-9_]+\.[a-z0-9_]+$")
    title: str
    evidence: str
    fix: str
    explains: list[str] = Field(default_factory=list)


class ClassCatalogue(_Strict):
    classes: list[FailureClass]

    def by_id(self) -> dict[str, FailureClass]:
        return {c.id: c for c in self.classes}
