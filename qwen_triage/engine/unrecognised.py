"""Error evidence no rule explains: never silent on a failing log.

The prefilter also looks for lines that *say* something failed — the final
exception line of a Python traceback, ``ERROR`` / ``FATAL`` / ``CRITICAL`` /
``panic:`` lines — and for the frames of tracebacks. A signal line on which no
rule matched is kept as a *template*: the line with its variable parts masked
(numbers, paths, addresses, quoted values…), so the same failure on eight ranks
is one item with a count. Each item keeps its first evidence line and who
raised it (the program, and for a traceback the library of the frame that
raised). Lines the known-benign list (``rules/benign.yaml``) names are dropped:
healthy servers print some error-looking lines every day.

Bounded: at most ``MAX_TEMPLATES`` distinct templates per scan; at most one
pending traceback frame per input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from qwen_triage.engine.records import LineRecord

MAX_TEMPLATES = 200
TAIL_LINES = 50  # heartbeats this close to the end of an input are where it stopped
MAX_TEMPLATE_CHARS = 240

# Signals, as prefilter patterns: wide (the prefilter sees raw lines with their wrappers);
# the collector confirms each on the message with the precise patterns below.
SIGNALS = {
    "frame": r'File "[^"]{1,500}", line \d+, in ',
    "exception": r"[A-Z]\w{0,80}(?:Error|Exception|Exit|Interrupt|Failure|Fault|Abort)\b",
    "error": (
        r"\b(?:ERROR|FATAL|CRITICAL|PANIC)\b|\blevel=(?:error|fatal|ERROR|FATAL)\b|\bpanic: |\bfatal error: "
        r"|\berror: |\bError: |terminate called after throwing"
    ),
}

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]{1,500})", line \d+, in \S')
_EXCEPTION = re.compile(
    r"^(?P<exc>(?:[A-Za-z_]\w{0,60}\.){0,8}[A-Z]\w{0,80}(?:Error|Exception|Exit|Interrupt|Failure|Fault|Abort))"
    r"(?::\s?(?P<msg>.{0,400}))?$"
)
_ERROR = re.compile(
    r"\b(?:ERROR|FATAL|CRITICAL|PANIC)\b|\blevel=(?:error|fatal|ERROR|FATAL)\b|^panic: |\bfatal error: "
    r"|^(?:error|Error): |\bterminate called after throwing"
)
_ERROR_LEVELS = ("error", "critical", "fatal")

# Masks, most specific first: each variable part becomes a placeholder.
_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<UUID>"),
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?\b"), "<IP>"),
    (re.compile(r"\b[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?\b"), "<PCI>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"), "<TIME>"),
    (re.compile(r"\b\d\d:\d\d:\d\d(?:[.,]\d+)?\b"), "<TIME>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<HEX>"),
    (re.compile(r"\b[0-9a-f]{16,}\b"), "<HEX>"),
    (re.compile(r"(?:(?<=\s)|^|(?<=[=(\['\"]))(?:[A-Za-z]:)?(?:/|\\\\)[^\s'\",:)\]]{1,300}"), "<PATH>"),
    # quoted single values (a name, an id); quoted phrases stay, they are the message
    (re.compile(r"'[^'\s]{1,200}'"), "'<S>'"),
    (re.compile(r'"[^"\s]{1,200}"'), '"<S>"'),
    (re.compile(r"`[^`\s]{1,200}`"), "`<S>`"),
    (re.compile(r"(?<![A-Za-z0-9_.])\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"), "<N>"),
)
_SPACES = re.compile(r"\s+")
# Where a traceback frame lives: site-packages/<library>/…, dist-packages, or a local file.
_LIBRARY = re.compile(r"(?:site|dist)-packages/(?P<lib>[A-Za-z_][\w]*)")


def template_of(message: str) -> str:
    """The message with its variable parts masked, whitespace folded, bounded."""
    text = message.strip()[: MAX_TEMPLATE_CHARS * 2]
    for pattern, placeholder in _MASKS:
        text = pattern.sub(placeholder, text)
    return _SPACES.sub(" ", text)[:MAX_TEMPLATE_CHARS]


def frame_file(message: str) -> str | None:
    """The file of a traceback frame line (``  File "/x/y.py", line 3, in f``), else None."""
    m = _FRAME.search(message)
    return m["file"] if m else None


def is_exception_line(message: str) -> bool:
    """Whether the message is a traceback's final line (``pkg.SomeError: text``)."""
    return _EXCEPTION.search(message.strip()) is not None


def library_of(frame_file: str) -> str:
    """``…/site-packages/vllm/worker/x.py`` → ``vllm``; a file outside any package → its name."""
    m = _LIBRARY.search(frame_file)
    if m:
        return m["lib"]
    name = frame_file.replace("\\", "/").rsplit("/", 1)[-1]
    return name[:-3] if name.endswith(".py") else name


@dataclass
class Item:
    """One unrecognised template: how often, where first, who raised it."""

    template: str
    kind: str  # "exception", "error", "exit"
    count: int
    first: LineRecord
    program: str | None = None
    raised_by: str | None = None  # the library of the frame that raised, for exceptions
    exception: str | None = None  # the exception's class name
    hint: str | None = None  # for a stall: what usually hangs there


@dataclass
class Progress:
    """Where one input's launch got to: its latest stage and the heartbeat it keeps repeating."""

    stage: str | None = None
    beat_template: str | None = None
    beats: int = 0  # consecutive lines of that heartbeat
    beat_last: LineRecord | None = None


MIN_BEATS = 3  # a heartbeat repeated this often, at the end of the input, is a hang


@dataclass
class Collector:
    """Signals of one scan, deduplicated by template; the benign ones dropped."""

    benign: tuple[re.Pattern[str], ...] = ()
    stages: dict[str, dict] = field(default_factory=dict)  # stage id -> its data (rank, label, resets, hint…)
    items: dict[str, Item] = field(default_factory=dict)
    dropped: int = 0  # distinct templates beyond MAX_TEMPLATES
    progress_of: dict[int, Progress] = field(default_factory=dict)  # source -> where its launch got to

    def heartbeat(self, rec: LineRecord, stage_before: Callable[[], str | None]) -> None:
        """A line a stuck launch repeats; a new run of them looks up the stage it repeats in."""
        p = self.progress_of.setdefault(rec.source_index, Progress())
        template = template_of(rec.message)
        if template == p.beat_template and p.beat_last is not None and rec.line - p.beat_last.line <= TAIL_LINES:
            p.beats += 1
        else:
            p.beat_template, p.beats = template, 1
            p.stage = stage_before() or p.stage
        p.beat_last = rec

    def stalls(self, lines_read: dict[int, int]) -> list[Item]:
        """Inputs that end repeating a heartbeat, short of a stage where silence is normal."""
        out = []
        for src, p in sorted(self.progress_of.items()):
            last = p.beat_last
            stage = self.stages.get(p.stage or "")
            if p.beats < MIN_BEATS or last is None or (stage is not None and stage.get("quiet_ok")):
                continue
            if lines_read.get(src, 0) - last.line > TAIL_LINES:
                continue  # the launch went on after the heartbeats
            where = f" in stage “{stage['label']}”" if stage else ""
            template = f"no progress{where}: the input ends repeating “{p.beat_template}” ({p.beats}x)"
            hint = (stage.get("hint") or None) if stage else None
            out.append(Item(template, "stall", p.beats, last, last.program, hint=hint))
        return out

    def signal(self, rec: LineRecord) -> None:
        """A candidate line no rule matched: kept when it says something failed and is not known benign."""
        message = rec.message.strip()
        if not message:
            return
        m = _EXCEPTION.search(message)
        if m is None and rec.level not in _ERROR_LEVELS and not _ERROR.search(message):
            return
        if any(p.search(message) for p in self.benign):
            return
        kind = "exception" if m else "error"
        exception = m["exc"].rsplit(".", 1)[-1] if m else None
        self.add(kind, message, rec, raised_by=rec.raised_by, exception=exception)

    def add(self, kind: str, message: str, rec: LineRecord, *, raised_by: str | None = None,
            exception: str | None = None) -> None:
        template = template_of(message)
        item = self.items.get(template)
        if item is not None:
            item.count += 1
            return
        if len(self.items) >= MAX_TEMPLATES:
            self.dropped += 1
            return
        self.items[template] = Item(template, kind, 1, rec, rec.program, raised_by, exception)

    def ordered(self) -> list[Item]:
        """Exceptions first (the likeliest cause), then by first appearance."""
        rank = {"exit": 0, "exception": 1, "error": 2, "stall": 3}
        return sorted(self.items.values(), key=lambda i: (rank.get(i.kind, 3), i.first.source_index, i.first.line))
