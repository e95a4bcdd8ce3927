"""The run's log file: its default name (time and command), created private, never overwritten when asked.

Why its own module: ``run`` names and opens the log before anything starts (a log that cannot be written stops
the run there, :class:`LogFileError`), the supervisor's pass-through writes it, and ``relaunch`` keeps one per
attempt; none of that needs the supervisor itself.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path
from typing import Sequence

from qwen_triage.filemode import make_private


def default_log_path(argv: Sequence[str], now: datetime | None = None, base: Path | None = None) -> Path:
    """`<state dir>/runs/20250107-101500-vllm-serve.log`: named by time and command."""
    if base is None:
        from platformdirs import user_state_dir

        base = Path(user_state_dir("qwen-triage")) / "runs"
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    return base / f"{stamp}-{command_slug(argv)}.log"


def command_slug(argv: Sequence[str]) -> str:
    words = list(argv)
    if not words:
        return "run"
    first = os.path.basename(words[0])
    rest = words[1:]
    if re.fullmatch(r"python[\d.]*", first) and rest:
        if rest[0] == "-m" and len(rest) > 1:
            first, rest = rest[1], rest[2:]
        elif not rest[0].startswith("-"):
            first, rest = os.path.basename(rest[0]), rest[1:]
    parts = [first]
    if rest and re.fullmatch(r"[A-Za-z][\w-]{0,30}", rest[0]):
        parts.append(rest[0])  # a subcommand: `vllm serve`, `ollama serve`
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(parts)).strip("._-")
    return slug[:48] or "run"


class LogFileError(Exception):
    """The log file cannot be created; nothing was started."""


def open_log(path: Path, exclusive: bool = False) -> tuple[int, Path]:
    """Create (or truncate) the log. ``exclusive``: never overwrite, add -2, -3… to the name instead.

    Open for reading too: the pump writes it, triage reads the chunks back from it.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not exclusive:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            make_private(fd)  # an existing log keeps its mode on O_TRUNC: it holds the server's output, secrets too
            return fd, path
        for n in range(1, 1000):
            candidate = path if n == 1 else path.with_name(f"{path.stem}-{n}{path.suffix}")
            try:
                return os.open(candidate, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), candidate
            except FileExistsError:
                continue
        raise FileExistsError(path)
    except OSError as exc:
        raise LogFileError(f"cannot write the log {path}: {exc.strerror or exc}") from exc


def spool() -> int | None:
    """An unnamed temporary file for a run without a log: the pump writes it, triage reads it back."""
    import tempfile

    try:
        with tempfile.TemporaryFile(buffering=0) as f:
            return os.dup(f.fileno())
    except OSError:
        return None  # then the pump hands every chunk over in its record
