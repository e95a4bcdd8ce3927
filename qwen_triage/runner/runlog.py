"""The relaunch journal: one JSON object per line, appended, never rewritten.

A run writes ``run-start``, one ``attempt`` record per launch (argv, the
environment the runner set, the changes from the launch before and why, the
diagnoses, timings, the outcome), and ``run-end`` with the final working
command. Secrets (``--api-key``, ``HF_TOKEN``…) are masked before they are
written. Each record is a single ``write`` of a whole line, so two runs
appending to the same journal do not interleave inside a line.

A journal that cannot be written (a full disk, a short write) costs the record,
never the run: the record is dropped whole (a short write is cut back, so no
partial line swallows the next record) and one line says so. The journal is
created 0600: it holds the command lines of a server.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from qwen_triage.filemode import make_private
from qwen_triage.redact import MASK, is_secret_env, is_secret_flag, mask_argv, mask_env, redact_tree
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




def _warn_stderr(message: str) -> None:
    try:
        sys.stderr.write(f"qwen-triage: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class Journal:
    def __init__(self, path: str | Path, warn: Callable[[str], None] = _warn_stderr,
                 write: Callable[[int, bytes], int] = os.write):
        self.path = Path(path)
        self.warn = warn  # one line per record the journal could not keep
        self._write = write  # os.write; a test passes a short or failing one

    def append(self, record: AttemptRecord | RunRecord | ReadyRecord) -> bool:
        """Append one record as one line; False (and a one-line warning) when it could not be kept."""
        data = record.model_dump(mode="json", by_alias=True)
        data["argv"] = mask_argv(data.get("argv") or [])
        if data.get("final_argv"):
            data["final_argv"] = mask_argv(data["final_argv"])
        for key in ("env", "final_env"):
            if data.get(key):
                data[key] = mask_env(data[key])
        for change in data.get("changes") or []:
            name = change.get("name", "")
            if is_secret_flag(name) or (change.get("kind") == "env" and is_secret_env(name)):
                change.update({k: MASK for k in ("before", "after") if change.get(k)})
        data = redact_tree(data)  # notes, facts, proofs: whatever came from a log
        line = (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            return self._lost(record, exc.strerror or str(exc))
        try:
            make_private(fd)
            try:
                written = self._write(fd, line)
            except OSError as exc:
                return self._lost(record, exc.strerror or str(exc))
            if written != len(line):
                self._cut_back(fd, written)
                return self._lost(record, f"short write ({written} of {len(line)} bytes)")
            return True
        finally:
            os.close(fd)

    @staticmethod
    def _cut_back(fd: int, written: int) -> None:
        """Remove the part of a line a short write left at the end, unless someone appended after it."""
        try:
            end = os.lseek(fd, 0, os.SEEK_CUR)
            if written > 0 and os.fstat(fd).st_size == end:
                os.ftruncate(fd, end - written)
        except OSError:
            pass

    def _lost(self, record: AttemptRecord | RunRecord | ReadyRecord, why: str) -> bool:
        what = f"{record.kind} record" + (f" of attempt {record.attempt}" if isinstance(record, AttemptRecord) else "")
        self.warn(f"cannot write the relaunch journal {self.path}: {why}; the {what} is not kept, the run goes on")
        return False


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
