"""Where a problem in a rule or data file is: importable without YAML or pydantic.

Every command catches :class:`RuleFileError`; keeping it here keeps the YAML
parser and the schemas off the start-up path of commands that never parse YAML.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MAX_RULE_FILE_BYTES = 8 * 2**20  # a rule or data file larger than this is refused before it is read


@dataclass(frozen=True)
class Position:
    line: int  # 1-based
    column: int  # 1-based


class RuleFileError(Exception):
    """A problem in a rule file, with its place: ``file:line:col: reason``."""

    def __init__(self, path: str | Path, line: int, column: int, reason: str):
        self.path = str(path)
        self.line = line
        self.column = column
        self.reason = reason
        super().__init__(f"{self.path}:{line}:{column}: {reason}")
