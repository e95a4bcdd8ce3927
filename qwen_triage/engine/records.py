"""One normalised input line.

A slotted dataclass rather than a pydantic model: records are built on the hot
path (every candidate line, and every line in live mode), and they never cross
a trust boundary — reports convert what they keep into pydantic models.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from qwen_triage.inputs.source import JOURNAL_JSON

# LineRecord.quoted: whose words a record quotes when they are not the program's own messages
REQUEST = "request"  # a request logger's fields: a client's text (engine.client_text); cut, read by no rule
SOURCE = "source"  # a line of code a traceback quotes: its string literals and comments are no messages


@dataclass(slots=True)
class LineRecord:
    """One line as every stage after decoding sees it: where it came from, its message without wrappers, and what
    the wrappers said."""

    path: str  # origin: file path, "<stdin>", or "<child>"
    line: int  # 1-based line number in that origin
    message: str  # the text rules match, wrappers removed
    text: str  # the whole line as read (decoded, ANSI removed)
    formats: tuple[str, ...] = ()  # recognised wrappers, outermost first
    timestamp: str | None = None
    host: str | None = None
    program: str | None = None  # program or unit ("kernel" for kernel lines)
    pid: int | None = None
    process: str | None = None  # vLLM process label (VllmWorker, EngineCore_0, …)
    rank: int | None = None  # the global rank, where the line or its file says
    local_rank: int | None = None  # the rank on its node (torchrun's `[default0]:`, a --log-dir file's folder)
    gpu: int | None = None
    level: str | None = None  # debug, info, warning, error, critical
    raised_by: str | None = None  # for a traceback's last line or a Go panic: the library that raised
    raised_in: str | None = None  # ... and the file of its innermost frame (a Go panic: the package path)
    truncated: bool = False
    source_index: int = 0  # which input of the scan it came from
    head_len: int = -1  # a record joined from several lines: its first line's share of the message
    quoted: str | None = None  # REQUEST or SOURCE: someone else's words (engine.origin decides what may read them)
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def logged_by_journal(self) -> bool:
        """Read from the journal's own entries: its timestamp and origin fields are journald's, not the text's."""
        return JOURNAL_JSON in self.formats

    @property
    def format(self) -> str:
        return ">".join(self.formats) if self.formats else "plain"

    def state(self, origin: int = 0) -> tuple[object, ...]:
        """Every field as plain data, its line counted from ``origin``: two scans that numbered an input's lines
        from different places compare their records so (engine.split)."""
        values = [getattr(self, name) for name in _FIELDS]
        values[_LINE] = self.line - origin
        values[_EXTRA] = tuple(sorted(self.extra.items()))
        return tuple(values)

    def field(self, name: str) -> str | None:
        """A field by name as text, for rules' `where` constraints."""
        if name == "format":
            return self.format
        if name in ("source", "logger"):  # the `file.cc:123` a wrapper printed before the message (NCCL, a
            return self.extra.get(name)  # logger's head); the name of the Python logger that wrote the line
        value = getattr(self, name)
        return None if value is None else str(value)


_FIELDS = tuple(f.name for f in fields(LineRecord))
_LINE = _FIELDS.index("line")
_EXTRA = _FIELDS.index("extra")
