"""Pydantic models of the rule files and the class catalogue (unknown keys forbidden)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from qwen_triage.rulepack.actions import Action
from qwen_triage.rulepack.severity import Severity, Status
from qwen_triage.rulepack.spec import table_value

# Programs a rule reads (`sources:`). engine.origin enforces the system's records
# (`kernel`, `systemd`: only rules naming them read them, and rules naming only them
# read nothing else); among applications the names are a label for contributors and
# `rules list` (a library's message arrives under its host program's wrapper), and
# the pattern keeps a rule on its program (docs/writing-rules.md).
SOURCE_FAMILIES = (
    "ollama",
    "llama.cpp",
    "vllm",
    "nccl",
    "torch",
    "kernel",
    "docker",
    "hub",
    "transformers",
    "systemd",
    "sglang",
    "tgi",
    "accelerate",
    "deepspeed",
    "peft",
    "fabricmanager",
    "slurm",
    "kubernetes",
    "any",
)

# Record fields a rule may constrain with `where`.
RECORD_FIELDS = ("program", "host", "level", "format", "rank", "gpu", "pid", "process", "path", "raised_by", "source", "logger")

FactType = Literal["str", "int", "float", "bytes", "hex"]

# An exception class name as a traceback's last line prints it (the module part is not compared).
EXCEPTION_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,80}$"
# A raising site's module: path parts of a frame's file (`vllm/config/`, `transformers/models/auto/`).
MODULE_PART = r"^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*/?$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Raised(_Strict):
    """Where a traceback's exception was raised: its innermost frame's file and the exception's class.

    ``module``: path parts the frame's file contains (``vllm/config/`` matches
    ``…/site-packages/vllm/config/model.py`` and a source tree's ``…/vllm/vllm/config/model.py``;
    ``vllm/engine/arg_utils.py`` that one file). ``exception``: class names (``ValueError``; a
    qualified ``pydantic_core._pydantic_core.ValidationError`` is compared by its last part).
    """

    module: list[Annotated[str, Field(min_length=2, max_length=200, pattern=MODULE_PART)]] = Field(
        min_length=1, max_length=20)
    exception: list[Annotated[str, Field(pattern=EXCEPTION_NAME)]] = Field(default_factory=list, max_length=20)


def raised_pattern(exceptions: list[str]) -> str:
    """The pattern a `raised:` rule without patterns of its own keys on: the exception line of those classes.

    The message is captured up to 400 characters and not anchored at its end: an exception whose text runs longer
    (lm-eval's list of every model name it supports, a pydantic error with its input) is still that exception."""
    names = "|".join(sorted(set(exceptions)))
    return rf"^\s{{0,8}}(?:[A-Za-z_]\w{{0,60}}\.){{0,8}}(?P<exception>{names})(?::\s?(?P<message>.{{1,400}})|\s*$)"


class Match(_Strict):
    """What must be seen: ``any`` one pattern, or ``all`` within ``window`` lines.

    ``count`` (with ``any``): that many matching lines within ``window`` lines
    — a storm of lines that are harmless one by one (PCIe correctable errors);
    ``count_by`` (a fact) counts each value apart: one interface flapping, not
    every interface of a machine coming up once at boot.
    ``multiline``: the patterns may reach across the lines of a multi-line record
    (joined with a space), so the prefilter keys on words, not phrases.
    ``unless``: a match within ``window`` lines either side vetoes the finding;
    with ``unless_after``, only on the finding's lines or after them.
    """

    any: list[str] = Field(default_factory=list)
    all: list[str] = Field(default_factory=list)
    window: int = Field(default=200, ge=1, le=100_000)
    count: int = Field(default=1, ge=1, le=10_000)
    count_by: str | None = Field(default=None, pattern=r"^[A-Za-z_]\w{0,40}$")
    multiline: bool = False  # patterns match a multi-line record (NVRM message, AER/OOM report) joined
    unless: list[str] = Field(default_factory=list)
    # a veto counts only from the finding's line on (within ``window``): for output that lists what a
    # probe found right after the probe's complaint, where an earlier line belongs to an earlier start
    unless_after: bool = False
    where: dict[str, str] = Field(default_factory=dict)
    # the raising site of a traceback's exception (a structure rule: see Rule.floor)
    raised: Raised | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> "Match":
        if self.raised is not None and not self.any and not self.all:
            if not self.raised.exception:
                raise ValueError("`raised` without `any` patterns names the `exception` classes it keys on")
            self.any = [raised_pattern(self.raised.exception)]
        if self.raised is not None and self.all:
            raise ValueError("`raised` constrains a traceback's exception line: use it with `any`, not `all`")
        if bool(self.any) == bool(self.all):
            raise ValueError("give exactly one of `any` or `all` (a non-empty list of patterns)")
        for key in self.where:
            if key not in RECORD_FIELDS:
                raise ValueError(f"`where` names unknown field {key!r}; known: {', '.join(RECORD_FIELDS)}")
        if self.count > 1 and not self.any:
            raise ValueError("`count` counts lines of `any` patterns")
        if self.count_by is not None and self.count < 2:
            raise ValueError("`count_by` counts a storm per value: it needs `count` of 2 or more")
        if self.count > self.window:
            raise ValueError("`count` cannot exceed `window` (lines)")
        if self.unless_after and not self.unless:
            raise ValueError("`unless_after` needs `unless` patterns")
        return self


class FixStep(_Strict):
    step: str = Field(min_length=3)
    action: Action | None = None


class Examples(_Strict):
    match: list[str] = Field(min_length=1)
    no_match: list[str] = Field(min_length=1)


# A table is a closed set upstream defines: NVIDIA's Xid catalogue (the biggest, ~170 codes in ~10
# rows), CUresult, errno. Tables far beyond that are not catalogues, and cost seconds to load.
MAX_TABLE_ROWS = 200
MAX_TABLE_VALUES = 2000


class TableRow(_Strict):
    """Members of a code family that share a resolution: what a finding with one of these codes is."""

    values: list[str | int] = Field(min_length=1, max_length=MAX_TABLE_VALUES)
    class_: str | None = Field(default=None, alias="class")
    severity: Severity | None = None
    title: str | None = Field(default=None, min_length=3)
    explain: str | None = None
    fix: list[FixStep] | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Table(_Strict):
    """A closed set upstream defines (Xid codes, CUresult, NCCL results, errno…), one row per resolution.

    ``key`` is a fact the patterns capture; a finding whose key is listed in a
    row takes that row's class, severity, title, explain and fix (each falls
    back to the rule's own). ``otherwise``: for a value no row lists, ``rule``
    keeps the rule's own class, ``ignore`` drops the finding. ``codes``: shared
    code tables (``rules/codes/*.yaml``, by their ``table:`` name) whose codes
    with a class become rows after the rule's own (rulepack.codes); the rule's
    rows then override single codes, named in any of their forms.
    """

    key: str
    source: str | None = Field(default=None, description="URL of the upstream catalogue the rows follow")
    rows: list[TableRow] = Field(default_factory=list, max_length=MAX_TABLE_ROWS)
    codes: list[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{1,40}$")]] = Field(default_factory=list, max_length=8)
    otherwise: Literal["rule", "ignore"] = "rule"

    @model_validator(mode="after")
    def _unique_values(self) -> "Table":
        if not self.rows and not self.codes:
            raise ValueError("a table lists `rows`, names code tables in `codes`, or both")
        if self.source is None:
            if not self.codes:
                raise ValueError("a table without `codes` cites its upstream catalogue in `source`")
        elif not self.source.startswith(("https://", "http://")):
            raise ValueError(f"table source {self.source!r} is not a URL")
        seen: set[str] = set()
        if sum(len(row.values) for row in self.rows) > MAX_TABLE_VALUES:
            raise ValueError(f"table lists more than {MAX_TABLE_VALUES} values (the limit for one table)")
        for row in self.rows:
            for value in row.values:
                key = table_value(value)
                if key in seen:
                    raise ValueError(f"table value {value!r} is listed twice")
                seen.add(key)
        return self


class Rule(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)+$")
    class_: str = Field(alias="class")
    title: str = Field(min_length=3)
    severity: Severity
    status: Status = Status.stable
    sources: list[str] = Field(min_length=1)
    references: list[str] = Field(default_factory=list)
    match: Match
    extract: dict[str, FactType] = Field(default_factory=dict)
    explain: str | None = None
    fix: list[FixStep] = Field(default_factory=list)
    table: Table | None = None
    # a structure rule (a raising site, a code family): another rule's finding on the same line wins over
    # it, and its diagnosis ranks after theirs; a `raised:` rule is one whatever this says
    floor: bool = False
    relay: bool = False
    """the line only passes on a failure printed before it (a wrapper's "failed to start"): attached to the
    diagnosis when there is one, listed as unrecognised when there is none; never a problem of its own"""
    fallback: bool = False
    """the cause only when nothing else is: a line that healthy runs on other hosts print too (Ollama's "no
    compatible GPUs were discovered" on a CPU-only host) but that, in a log where no other rule found a failure,
    is the one sign of what went wrong. With any other diagnosis in the report it is an observation. On a relay
    rule: the relayed failure's most likely class when the log shows no failure of its own (the diagnosis, at
    warning, of a report no other rule fills); beside a diagnosis it is that diagnosis' relay"""
    examples: Examples

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _relay_and_fallback_kinds(self) -> "Rule":
        if self.relay and (self.severity is not Severity.info or self.table is not None):
            raise ValueError("a relay rule has severity info and no table: it names no failure of its own")
        if self.fallback and self.severity is Severity.info and not self.relay:
            raise ValueError("a fallback rule names a failure (severity above info), unless it is a relay whose line, "
                             "alone in a report, stands for its class")
        return self

    @model_validator(mode="after")
    def _table_key_is_a_fact(self) -> "Rule":
        if self.match.raised is not None:
            self.floor = True
            for name in ("exception", "message"):  # the groups of the pattern `raised` gives
                if f"(?P<{name}>" in "".join(self.match.any):
                    self.extract.setdefault(name, "str")
        if self.table is not None and self.table.key not in self.extract:
            raise ValueError(f"table key {self.table.key!r} is not a fact in `extract`")
        if self.match.count_by is not None and self.match.count_by not in self.extract:
            raise ValueError(f"`count_by` {self.match.count_by!r} is not a fact in `extract`")
        return self

    @field_validator("sources")
    @classmethod
    def _known_sources(cls, value: list[str]) -> list[str]:
        unknown = [s for s in value if s not in SOURCE_FAMILIES]
        if unknown:
            raise ValueError(f"unknown source {unknown[0]!r}; known: {', '.join(SOURCE_FAMILIES)}")
        return value

    @field_validator("references")
    @classmethod
    def _urls(cls, value: list[str]) -> list[str]:
        for url in value:
            if not url.startswith(("https://", "http://")):
                raise ValueError(f"reference {url!r} is not a URL")
        return value


class RuleFile(_Strict):
    rules: list[Rule]


class FailureClass(_Strict):
    id: str = Field(pattern=r"^[a-z0-9_]+\.[a-z0-9_]+$")
    title: str
    evidence: str
    fix: str
    explains: list[str] = Field(default_factory=list)
    # node policy (fleet/): a failure of the node, not of one workload - a node-problem-detector
    # condition, a Slurm drain, and only from the system's own records
    node_level: bool = False
    # the kernel's word about the hardware or the node: active until the node boots again, not
    # until the log goes quiet (a reset or a reboot is the fix)
    held_until_boot: bool = False


class ClassCatalogue(_Strict):
    classes: list[FailureClass]

    def by_id(self) -> dict[str, FailureClass]:
        return {c.id: c for c in self.classes}
