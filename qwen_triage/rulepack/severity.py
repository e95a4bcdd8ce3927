"""Severity and status of a rule: plain enums, importable without pydantic (the scan path needs them)."""

from __future__ import annotations

from enum import Enum


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
