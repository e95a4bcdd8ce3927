"""Where a problem in a rule or data file is: importable without YAML or pydantic.

Every command catches :class:`RuleFileError`; keeping it here keeps the YAML
parser and the schemas off the start-up path of commands that never parse YAML.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from qwen_triage.lazydata import lazy_dataclass

MAX_RULE_FILE_BYTES = 2 * 2**20  # a rule or data file larger than this is refused before it is read (the biggest real one: ~80 KB)


@lazy_dataclass(frozen=True)
class Position:
    """Where in a rule file something stands, for messages that point at it."""

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


def read_bounded(path: str, limit: int = MAX_RULE_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; :class:`RuleFileError` otherwise."""
    too_big = f"rule files are limited to {limit} bytes"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block
    except OSError as exc:
        raise RuleFileError(path, 1, 1, f"cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RuleFileError(path, 1, 1, "not a regular file (a device, FIFO or directory): refused")
        if st.st_size > limit:
            raise RuleFileError(path, 1, 1, f"file is {st.st_size} bytes; {too_big}")
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise RuleFileError(path, 1, 1, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    if len(raw) > limit:  # it grew after stat
        raise RuleFileError(path, 1, 1, f"file is over {limit} bytes; {too_big}")
    return raw
