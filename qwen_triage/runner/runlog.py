"""The relaunch journal: one JSON object per line, appended, never rewritten.

A run writes ``run-start``, one ``attempt`` record per launch (argv, the
environment the runner set, the changes from the launch before and why, the
diagnoses, timings, the outcome), and ``run-end`` with the final working
command. Secrets (``--api-key``, ``HF_TOKEN``…) are masked before they are
written. Each record is a single ``write`` of a whole line, so two runs
appending to the same journal do not interleave inside a line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from qwen_triage.redact import mask_argv, mask_env
from qwen_triage.report.model import Diagnosis
from qwen_triage.runner.vllm.diff import Change

class DiagnosisBrief(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    class_: str = Field(alias="class")
    rule: str
    title: str
    severity: str
    facts: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, d: Diagnosis) -> "DiagnosisBrief":
        return cls(class_=d.class_, rule=d.rule, title=d.title, severity=d.severity.value, facts=d.facts)


class AttemptRecord(BaseModel):
    kind: Literal["attempt"] = "attempt"
    run: str
    attempt: int
    key: str = Field(description="same key = same launch")
    argv: list[str]
    env: dict[str, str] = Field(description="what the runner set for the server (on top of its own environment)")
    changes: list[Change] = Field(default_factory=list, description="from the launch before, each with its reason")
    started: str
    seconds: float = 0.0
    ready_after: float | None = None
    outcome: str
    exit_status: int | None = None
    pid: int | None = None
    diagnoses: list[DiagnosisBrief] = Field(default_factory=list)
    stage: str | None = None
    log: str | None = None
    notes: list[str] = Field(default_factory=list)


class ReadyRecord(BaseModel):
    """Written the moment an attempt is proven ready; its ``attempt`` record follows when it ends."""

    kind: Literal["ready"] = "ready"
    run: str
    attempt: int
    time: str
    ready_after: float
    pid: int | None = None
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    proof: str = ""


class RunRecord(BaseModel):
    kind: Literal["run-start", "run-end"]
    run: str
    time: str
    argv: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    apply: bool = False
    outcome: str | None = None
    exit_status: int | None = None
    attempts: int = 0
    final_argv: list[str] | None = None
    final_env: dict[str, str] | None = None
    instructions: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class Journal:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    def append(self, record: AttemptRecord | RunRecord | ReadyRecord) -> None:
        data = record.model_dump(mode="json", by_alias=True)
        data["argv"] = mask_argv(data.get("argv") or [])
        if data.get("final_argv"):
            data["final_argv"] = mask_argv(data["final_argv"])
        for key in ("env", "final_env"):
            if data.get(key):
                data[key] = mask_env(data[key])
        line = json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)


def read_journal(path: str | Path, run: str | None = None) -> Iterator[dict[str, Any]]:
    """The records of a journal (of one run when ``run`` is given); bad lines are skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and (run is None or rec.get("run") == run):
            yield rec
