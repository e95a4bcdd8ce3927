"""What one ``check-model`` pass has learned so far: the files, their headers, the findings.

Shared by the per-format checks (``check``, ``config_check``) so that none of them
imports another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from qwen_triage.engine.check_finding import CheckFinding
from qwen_triage.preflight.model import safetensors_check as stcheck


class FileReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    kind: str
    bytes: int | None
    ok: bool
    tensors: int | None = None
    sha256: str | None = None
    detail: str = ""



class ScanState:
    def __init__(self, root: Path):
        self.root = root
        self.findings: list[CheckFinding] = []
        self.files: dict[str, FileReport] = {}
        self.headers: dict[str, stcheck.StHeader] = {}
        self.notes: list[str] = []

    def file(self, name: str, kind: str, size: int | None, ok: bool = True, **kw: Any) -> FileReport:
        report = FileReport(name=name, kind=kind, bytes=size, ok=ok, **kw)
        self.files[name] = report
        return report

    def fail(self, name: str, detail: str) -> None:
        if name in self.files:
            self.files[name].ok = False
            self.files[name].detail = self.files[name].detail or detail
