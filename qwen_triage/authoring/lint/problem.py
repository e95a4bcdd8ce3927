"""What a lint check reports: one problem at ``file:line:col``, named by the check that found it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["error", "warning", "info"]
LEVELS: tuple[Level, ...] = ("error", "warning", "info")


@dataclass
class Problem:
    """Printed gcc-style, the check id last (``[-Wname]`` in gcc): editors parse ``file:line:col: level:``."""

    path: str
    line: int
    column: int
    level: str  # one of LEVELS
    message: str
    rule: str | None = None
    check: str = ""  # the id of the check that reported it

    def __str__(self) -> str:
        who = f" [{self.rule}]" if self.rule else ""
        named = f" [{self.check}]" if self.check else ""
        return f"{self.path}:{self.line}:{self.column}: {self.level}:{who} {self.message}{named}"

    def as_json(self) -> dict[str, object]:
        return {"path": self.path, "line": self.line, "column": self.column, "level": self.level,
                "check": self.check, "rule": self.rule, "message": self.message}
