"""The one reading interface: a :class:`Reader` yields :class:`Chunk` s of whole lines and leaves a position.

Why one protocol: ``check`` runs unattended and must never skip or re-read lines across runs, so every source
reads within a ``budget`` (bytes) and a ``deadline`` (``time.monotonic()``) and, when exhausted, leaves the
:class:`SourceState` to resume from in ``reader.state``. The caller stores that state only after it has matched
every chunk, so a run that dies half-way reads the same lines again next time rather than skipping them.
The positions are pydantic models because they are saved as JSON (``check --state``) by a process that may run
as root: data only, validated on load.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from pydantic import BaseModel, ConfigDict, Field


class _Position(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class FileCursor(_Position):
    """Where a file source was read to, and which file that was."""

    dev: int = Field(ge=0)
    ino: int = Field(ge=0)
    offset: int = Field(default=0, ge=0)
    head_len: int = Field(default=0, ge=0)  # bytes hashed at the start of the file
    head_hash: str = ""  # sha256 of those bytes: a different file at the same inode, or one rewritten in place
    line: int = 0  # lines read from this file so far


class SourceState(_Position):
    """A reader's position: what to resume from, per kind of source."""

    kind: str  # "file", "journal", "kernel-journal", "kmsg", "dmesg"
    cursor: str | None = None  # journal: __CURSOR of the last entry read
    file: FileCursor | None = None
    kmsg_seq: int | None = None  # /dev/kmsg: sequence number of the last record read
    dmesg_ts: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # dmesg: timestamp of the last line read
    boot_id: str = ""  # boot the kmsg/dmesg position belongs to
    lines_total: int = 0  # lines read from this source since the state began (a counter)
    bytes_total: int = 0


def totals(prev: SourceState | None, kind: str | None = None) -> tuple[int, int]:
    """The counters a read goes on from: lines and bytes read since the state began (0, 0 when ``prev`` is of
    another ``kind`` than the one given, so a source read another way starts its counters again)."""
    if prev is None or (kind is not None and prev.kind != kind):
        return 0, 0
    return prev.lines_total, prev.bytes_total


@dataclass
class Chunk:
    data: bytes  # whole lines, each ending in LF
    first_line: int  # line number of the first one, counted over the source's life
    journal: bool = False  # the lines are the journal's JSON entries (one object a line)


@dataclass
class Reader:
    """One source. ``read`` is a generator: iterate it to the end, then look at ``state``, ``error``, ``more``."""

    key: str  # state key: "kernel", "journal:ollama.service", "file:/var/log/x.log"
    label: str  # what reports and metrics call it
    state: SourceState | None = None  # after read(): the position to store
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # the source could not be read this run
    more: bool = False  # stopped at the budget or the deadline; the rest is left for the next run
    lines: int = 0
    bytes: int = 0
    via: str = ""  # how it was read (journalctl, /dev/kmsg, dmesg, file)

    def read(self, prev: SourceState | None, budget: int, deadline: float, boot_id: str = "") -> Iterator[Chunk]:
        """Chunks of whole lines from ``prev`` on; at most ``budget`` bytes, stopping at ``deadline``."""
        raise NotImplementedError
