"""The one reading interface: a :class:`Reader` yields :class:`Chunk` s of whole lines and leaves a position.

Why one protocol: ``check`` runs unattended and must never skip or re-read lines across runs, so every source
reads within a ``budget`` (bytes) and a ``deadline`` (``time.monotonic()``) and, when exhausted, leaves the
:class:`SourceState` to resume from in ``reader.state``. The caller stores that state only after it has matched
every chunk, so a run that dies half-way reads the same lines again next time rather than skipping them.
The positions (:mod:`qwen_triage.inputs.position`) are pydantic models because they are saved as JSON
(``check --state``) by a process that may run as root: data only, validated on load. They live apart so that
opening a file for ``scan`` does not import pydantic (a warm start-up cost).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

from qwen_triage.inputs.source import TEXT

if TYPE_CHECKING:
    from qwen_triage.inputs.position import SourceState


def totals(prev: SourceState | None, kind: str | None = None) -> tuple[int, int]:
    """The counters a read goes on from: lines and bytes read since the state began (0, 0 when ``prev`` is of
    another ``kind`` than the one given, so a source read another way starts its counters again)."""
    if prev is None or (kind is not None and prev.kind != kind):
        return 0, 0
    return prev.lines_total, prev.bytes_total


@dataclass
class Chunk:
    """Whole lines a reader hands on, with the line number they start at."""

    data: bytes  # whole lines, each ending in LF
    first_line: int  # line number of the first one, counted over the source's life
    kind: str = TEXT  # what the lines are (qwen_triage.inputs.source.KINDS): the engine decodes by it


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
