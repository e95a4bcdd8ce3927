"""The launch stages of ``rules/stages.yaml``: knowledge of how a server starts, kept as data.

The stall watchdog (``live/stall.py``) names the stage a silent launch stopped
in and prints its hint; which lines mark which stage is knowledge about vLLM,
NCCL and Ollama wording, so it lives beside the rules, is schema-checked here
and linted by ``rules lint``, and a contributor changes it without touching code.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

STAGES_FILE = "stages.yaml"


class Stage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    label: str = Field(min_length=3)  # "loading weights", as the stall report says it
    rank: int = Field(ge=0, le=1000)  # launches move to equal or higher ranks only
    patterns: tuple[str, ...] = Field(min_length=1)
    resets: bool = False  # a fresh start: taken whatever the current stage
    quiet_ok: bool = False  # silence here is normal; no stall report
    hint: str = ""

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            try:
                re.compile(pattern.encode())
            except re.error as exc:
                raise ValueError(f"bad pattern {pattern!r}: {exc}") from None
        return value


class StageFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    stages: tuple[Stage, ...] = Field(min_length=1)
    heartbeats: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _unique_ids(self) -> "StageFile":
        seen: set[str] = set()
        for stage in self.stages:
            if stage.id in seen:
                raise ValueError(f"duplicate stage id {stage.id!r}")
            seen.add(stage.id)
        for pattern in self.heartbeats:
            try:
                re.compile(pattern.encode())
            except re.error as exc:
                raise ValueError(f"bad heartbeat pattern {pattern!r}: {exc}") from None
        return self


def load_stage_file(path: Path) -> StageFile:
    """Validated stages; a problem raises RuleFileError with file:line:col."""
    from qwen_triage.rulepack.yamlload import load_yaml

    return load_yaml(path).validate(StageFile)


@functools.cache
def bundled_stages() -> StageFile:
    """The stages shipped with the pack, loaded once per process."""
    from qwen_triage.rulepack.paths import bundled_rules_dir

    return load_stage_file(bundled_rules_dir() / STAGES_FILE)
