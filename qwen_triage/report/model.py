"""The report: a versioned JSON contract, produced from these types.

``qwen-triage schema`` prints the JSON Schema of :class:`Report`. Bump
``SCHEMA_VERSION`` on any change that removes or retypes a field; adding a
field is compatible.

Plain dataclasses, not pydantic models: a scan builds its report from values it
made itself, and importing pydantic costs more than triaging a small log. The
contract is still pydantic's: :func:`json_schema` and :func:`validate` build a
``TypeAdapter`` over these types on first use (:func:`to_json` writes the same
JSON without one, for speed), reading
``__pydantic_config__`` (aliases, no unknown keys) and the attribute docstrings
(field descriptions); pydantic models elsewhere (preflight results, the run log)
hold these types as fields like any other.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum
from typing import Any, Callable, TypeVar

from qwen_triage import __version__
from qwen_triage.rulepack.severity import Severity

SCHEMA_VERSION = 3  # 2: `hang` (engine.hang); 3: `printed_by` (the message catalogue), a diagnosis's `because`
T = TypeVar("T")


def _alias(name: str) -> str:
    return "class" if name == "class_" else name


# Read by pydantic when it validates or serialises these types; nothing here imports it.
_CONFIG: dict[str, Any] = {
    "alias_generator": _alias,
    "populate_by_name": True,
    "extra": "forbid",
    "use_attribute_docstrings": True,
}


@dataclass(kw_only=True)
class Evidence:
    __pydantic_config__ = _CONFIG
    path: str
    """input the line came from"""
    line: int
    """1-based line number in that input"""
    text: str
    """the line as read (wrappers kept, ANSI removed)"""
    truncated: bool = False
    """the line was longer than the matching bound and was cut"""


@dataclass(kw_only=True)
class FixOut:
    __pydantic_config__ = _CONFIG
    step: str
    action: dict[str, Any] | None = None
    """structured action from the fixed vocabulary, with its `safety` class"""


@dataclass(kw_only=True)
class Symptom:
    __pydantic_config__ = _CONFIG
    class_: str
    rule: str
    title: str
    severity: Severity
    count: int
    evidence: list[Evidence]


@dataclass(kw_only=True)
class Relayed:
    """A line that only passes on the failure of its diagnosis (a wrapper's "failed to start", a launcher's
    "child failed"): part of that diagnosis, never a problem of its own (added in 0.3)."""

    __pydantic_config__ = _CONFIG
    rule: str
    """the relay rule that knows the line"""
    title: str
    count: int
    """lines it matched"""
    evidence: list[Evidence]
    """its first lines"""


@dataclass(kw_only=True)
class PrintedBy:
    """Where a line was printed, from the message catalogue (rulepack.catalogue): the program whose released source
    holds its template, the file and function, and the pinned releases that hold it (schema 3)."""

    __pydantic_config__ = _CONFIG
    program: str
    """the catalogue's key of the program (vllm, llamacpp, nccl, torch ...); a code table's name (cuda_runtime,
    errno ...) where the words are that library's text for a code; `script` for an exception raised in code
    outside any installed package"""
    releases: list[str]
    """the pinned releases read whose source holds the template, oldest first; empty for a code table or a script"""
    file: str
    """the file inside the release (vllm/config/parallel.py); the code's name for a code table; the script's file
    name"""
    function: str | None = None
    """the enclosing function (Class.method), where the extractor knew it"""
    display: str | None = None
    """the program's name as users know it (vLLM)"""
    family: str | None = None
    """what that part of the program does, from rules/catalogue-map.yaml (configuration validation)"""
    template: str | None = None
    """the message as the source writes it, placeholders typed ({int}, {path}, {str} ...); null when no template
    holds the words and the exception was placed by its traceback's innermost frame, a file of that program"""


@dataclass(kw_only=True)
class Observation:
    __pydantic_config__ = _CONFIG
    class_: str
    rule: str
    title: str
    severity: Severity
    summary: str
    facts: dict[str, Any]
    evidence: list[Evidence]
    more_evidence: int = 0
    """evidence lines not listed"""
    count: int
    references: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class Diagnosis(Observation):
    rules: list[str] = field(default_factory=list)
    """every rule that found this class"""
    symptoms: list[Symptom] = field(default_factory=list)
    """consequences of this root cause"""
    relayed: list[Relayed] = field(default_factory=list)
    """lines that only pass this failure on (a worker's or launcher's wrapper of it)"""
    fix: list[FixOut] = field(default_factory=list)
    because: str | None = None
    """null: a rule found it; `catalogue`: no rule explained the line, and the message catalogue located its
    template in a module family whose errors mean this class (rules/catalogue-map.yaml, schema 3)"""
    printed_by: PrintedBy | None = None
    """for `because: catalogue`: where the line was printed"""


@dataclass(kw_only=True)
class Unrecognised:
    """Error evidence no rule explains, as a template (variable parts masked), deduplicated."""

    __pydantic_config__ = _CONFIG
    template: str
    """the line with numbers, paths, addresses and quoted values masked"""
    kind: str
    """exception (a traceback's final line), error (an error-level line), exit (the process's status),
    stall (the input ends repeating a heartbeat: a hang), or relay (a line that only passes on an earlier
    failure, listed because no diagnosis holds it)"""
    count: int
    """lines with this template"""
    evidence: Evidence
    """the first line with this template"""
    program: str | None = None
    """the program that printed it, where the line says"""
    raised_by: str | None = None
    """for exceptions: the library of the frame that raised"""
    exception: str | None = None
    """for exceptions: the exception's class name"""
    hint: str | None = None
    """for stalls: what usually hangs in that stage"""
    printed_by: PrintedBy | None = None
    """where the line was printed, when the message catalogue knows its template (schema 3)"""


@dataclass(kw_only=True)
class DisabledRuleOut:
    __pydantic_config__ = _CONFIG
    rule: str
    pattern: str
    where: str
    reason: str = "pattern timed out"


@dataclass(kw_only=True)
class Stats:
    __pydantic_config__ = _CONFIG
    lines: int
    bytes: int
    seconds: float
    rules: int
    patterns: int = 0
    prefilter: str = ""
    candidate_lines: int = 0
    truncated_lines: int = 0
    """lines matched on a bounded prefix only"""
    max_line_bytes: int = 0
    disabled_rules: list[DisabledRuleOut] = field(default_factory=list)


@dataclass(kw_only=True)
class HangCulprit:
    """The rank that stopped first, as far as the logs tell."""

    __pydantic_config__ = _CONFIG
    rank: int | None
    host: str | None = None
    """the host the rank ran on, where a line or the file says"""
    collective: str | None = None
    """the collective it stopped in or never entered (ALLREDUCE, all_reduce, …)"""
    seq: int | None = None
    """that collective's sequence number, where the logs give one"""
    why: str = ""


@dataclass(kw_only=True)
class HangSuspect:
    __pydantic_config__ = _CONFIG
    rank: int
    why: str


@dataclass(kw_only=True)
class HangRank:
    """What one rank was last seen doing."""

    __pydantic_config__ = _CONFIG
    rank: int
    local_rank: int | None = None
    host: str | None = None
    entered: int | None = None
    """sequence number of the last collective it entered (from an NCCL RAS report alone: how many operations of
    `collective` it launched on the job's largest communicator)"""
    completed: int | None = None
    """sequence number of the last collective it completed"""
    collective: str | None = None
    exitcode: int | None = None
    error: str | None = None
    """an error of its own (not a timeout, not a lost peer)"""
    last_line: Evidence | None = None
    verdict: str
    """culprit, suspect, timed out, lost peer, failed, stopped by launcher, in collective (a Flight Recorder dump's),
    dead, unresponsive, behind or in step (an NCCL RAS report's), or ok"""


@dataclass(kw_only=True)
class HangClock:
    """One host's clock against the reference host's (engine.clock), estimated from events every host logs."""

    __pydantic_config__ = _CONFIG
    host: str
    clock_offset_s: float
    """seconds this host's clock is ahead of the reference host's (0 for the reference)"""


@dataclass(kw_only=True)
class HangOutlier:
    """A host unlike every other: it printed another configuration (NCCL version, world size); on the common
    timeline, went quiet first (its log stops with no failure of its own while the other hosts' ranks failed); or
    its log got to an earlier launch stage (rules/stages.yaml) than every other host's."""

    __pydantic_config__ = _CONFIG
    host: str
    what: str
    value: str
    others: str
    """what the other hosts printed (or did)"""
    kind: str = "config"
    """config (a configuration value), quiet (went quiet first on the common timeline) or stage (behind: `value`
    is the label of the last launch stage its log reached, `others` the other hosts')"""
    quiet_lead_s: float | None = None
    """for quiet: seconds its last timed line came before the first failure the other hosts reported (clocks
    aligned; null where that cannot be told)"""


@dataclass(kw_only=True)
class Hang:
    """Hang forensics over a multi-rank job's logs (engine.hang): who stopped first, and who only waited."""

    __pydantic_config__ = _CONFIG
    culprit: HangCulprit | None = None
    """null when the logs cannot decide (see suspects) or no rank failed"""
    suspects: list[HangSuspect] = field(default_factory=list)
    """ranks still in doubt, with why"""
    ranks: list[HangRank] = field(default_factory=list)
    summary: str = ""
    cause: Diagnosis | None = None
    """a diagnosis on the culprit's host that the taxonomy says explains the ranks' timeouts (an Xid, an OOM
    kill in that host's kernel log): why the culprit stopped"""
    cause_lead_s: float | None = None
    """seconds the cause's line came before the first failure the ranks reported, the hosts' clocks aligned
    (negative: after); null when either has no time"""
    clocks: list[HangClock] = field(default_factory=list)
    """each host's clock offset, where the logs of several hosts share events to align them on"""
    outliers: list[HangOutlier] = field(default_factory=list)
    """hosts whose configuration differs from every other host's"""


@dataclass(kw_only=True)
class InputOut:
    __pydantic_config__ = _CONFIG
    name: str
    kind: str
    lines: int
    bytes: int


@dataclass(kw_only=True)
class Report:
    __pydantic_config__ = _CONFIG
    schema_version: int = SCHEMA_VERSION
    tool: str = f"qwen-triage {__version__}"
    inputs: list[InputOut] = field(default_factory=list)
    diagnoses: list[Diagnosis] = field(default_factory=list)
    """root causes, most important first"""
    observations: list[Observation] = field(default_factory=list)
    """findings that are not a cause on their own: notices, and lines that only relay an error printed before
    them (a symptom, never a sign of health)"""
    notes: list[str] = field(default_factory=list)
    """things about the scan itself"""
    unrecognised: list[Unrecognised] = field(default_factory=list)
    """error lines no rule explains, most telling first (added in 0.2)"""
    nothing_read: bool = False
    """no input held a log line or journal entry (empty, or the journal's `-- No entries --` only): the report
    says nothing about health, whatever it lacks"""
    hang: Hang | None = None
    """which rank of a multi-rank job stopped first (schema 2); null when the logs show no multi-rank job"""
    stats: Stats

    def to_json(self, indent: int | None = 2) -> str:
        return to_json(self, indent)

    def classes(self) -> list[str]:
        return [d.class_ for d in self.diagnoses]


def _make_adapter(kind: Any) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(kind)


_adapter: Callable[[Any], Any] = functools.cache(_make_adapter)  # one TypeAdapter per type


class _NotPlain(Exception):
    """A value :func:`_plain` does not convert the way pydantic would: pydantic serialises it."""


def _plain(obj: Any) -> Any:
    """JSON-ready data of report objects, as pydantic's ``mode="json"`` dump gives it for these types.

    Building pydantic's serialiser for the report takes longer than scanning a small
    log, and a report holds only dataclasses, enums, lists, str-keyed dicts and
    scalars; anything else falls back to pydantic (``tests/report/test_report_json.py``
    checks both agree).
    """
    if obj is None or isinstance(obj, (str, bool, int)):
        return obj.value if isinstance(obj, Enum) else obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None  # pydantic's default for inf and nan: null
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            raise _NotPlain
        return {k: _plain(v) for k, v in obj.items()}
    if is_dataclass(obj) and not isinstance(obj, type) and getattr(obj, "__pydantic_config__", None) is _CONFIG:
        return {_alias(f.name): _plain(getattr(obj, f.name)) for f in fields(obj)}
    raise _NotPlain


def to_json(obj: Any, indent: int | None = 2) -> str:
    """One report object (or a list of them) as JSON with the contract's key names."""
    try:
        data = _plain(obj)
    except _NotPlain:
        kind = type(obj[0]) if isinstance(obj, list) and obj else type(obj)
        adapter = _adapter(list[kind]) if isinstance(obj, list) else _adapter(kind)  # type: ignore[valid-type]
        return adapter.dump_json(obj, by_alias=True, indent=indent).decode()
    separators = (",", ": ") if indent is not None else (",", ":")
    return json.dumps(data, indent=indent, ensure_ascii=False, separators=separators)


def to_dict(obj: Any) -> Any:
    """JSON-ready data of a report object, with the contract's key names (``class``)."""
    try:
        return _plain(obj)
    except _NotPlain:
        return _adapter(type(obj)).dump_python(obj, mode="json", by_alias=True)


def validate(kind: type[T], data: Any) -> T:
    """A report object from JSON-ready data (``class`` or ``class_``), checked against the contract."""
    return _adapter(kind).validate_python(data)


def from_json(kind: type[T], text: str | bytes) -> T:
    return _adapter(kind).validate_json(text)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`Report` (``qwen-triage schema``)."""
    schema: dict[str, Any] = _adapter(Report).json_schema(by_alias=True)
    return schema
