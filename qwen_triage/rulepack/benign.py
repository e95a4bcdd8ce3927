"""The known-benign list (``rules/benign.yaml``): error-looking lines healthy servers print.

Data beside the rules, so the "unrecognised errors" a scan lists stay what a
person should read: a contributor adds a template here when a healthy log of
theirs shows one, with an example that proves the pattern matches it.
"""

from __future__ import annotations

from pathlib import Path

import regex
from pydantic import BaseModel, ConfigDict, Field, model_validator

BENIGN_FILE = "benign.yaml"


class BenignTemplate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: str = Field(min_length=3)
    why: str = Field(min_length=3)
    examples: list[str] = Field(min_length=1)
    no_match: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _examples_hold(self) -> "BenignTemplate":
        try:
            compiled = regex.compile(self.pattern, regex.VERSION0)
        except regex.error as exc:
            raise ValueError(f"bad pattern: {exc}") from None
        try:
            for line in self.examples:
                if not compiled.search(line, timeout=1.0):
                    raise ValueError(f"pattern does not match its example {line!r}")
            for line in self.no_match:
                if compiled.search(line, timeout=1.0):
                    raise ValueError(f"pattern matches its no_match line {line!r}")
        except TimeoutError:
            raise ValueError("pattern timed out (>1s) on one of its own examples") from None
        return self


class BenignFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    benign: list[BenignTemplate] = Field(default_factory=list)


def load_benign_templates(path: Path) -> list[BenignTemplate]:
    """The templates of one benign file (for lint, which probes each pattern as it probes rules')."""
    from qwen_triage.rulepack.yamlload import load_yaml

    loaded = load_yaml(path)
    if loaded.data is None:
        return []
    parsed: BenignFile = loaded.validate(BenignFile)
    return list(parsed.benign)


def load_benign(path: Path) -> list[str]:
    """The patterns of one benign file; RuleFileError with file:line:col on a problem."""
    return [t.pattern for t in load_benign_templates(path)]
