"""Validated rules and classes as plain frozen data: what the engine runs on.

The pydantic models in ``schema`` check a rule file once; what passes is turned
into these dataclasses, which the scan path uses and the pack cache stores (each
file's entry as JSON, the whole pack as a pickle of these classes only). Keeping pydantic and YAML off the scan path is most of what makes
``qwen-triage scan`` of a small log start fast.
"""

from __future__ import annotations

from dataclasses import asdict, field, replace
from typing import Any, Callable

from qwen_triage.lazydata import lazy_dataclass
from qwen_triage.rulepack.severity import Severity, Status


def table_value(value: object) -> str:
    """How a code is compared in a table: integers without leading zeros, text case-folded."""
    text = str(value).strip()
    if text.lstrip("+-").isdigit() and len(text) <= 40:
        return str(int(text))
    return text.casefold()


@lazy_dataclass(frozen=True)
class MatchSpec:
    """What a rule looks for: the patterns any one of which fires it, those that must all be near, and its vetoes."""

    any: tuple[str, ...] = ()
    all: tuple[str, ...] = ()
    window: int = 200
    unless: tuple[str, ...] = ()
    where: dict[str, str] = field(default_factory=dict)
    count: int = 1
    multiline: bool = False
    unless_after: bool = False  # a veto counts only from the finding's first line on
    # the raising site (`raised:`): path parts of the innermost frame's file, and exception class names
    raised_module: tuple[str, ...] = ()
    raised_exception: tuple[str, ...] = ()
    count_by: str | None = None  # a fact: `count` lines with the same value of it make the storm


@lazy_dataclass(frozen=True)
class FixSpec:
    """One step of a fix: its words, and the action the runner may apply (rulepack.actions)."""

    step: str
    action: dict[str, Any] | None = None  # the action as JSON, its fixed safety class included


@lazy_dataclass(frozen=True)
class ExamplesSpec:
    """A rule's example lines: what it must match and what it must not (`rules test`, lint, the exports)."""

    match: tuple[str, ...] = ()
    no_match: tuple[str, ...] = ()


@lazy_dataclass(frozen=True)
class RowSpec:
    """One row of a rule's code table: the codes it covers and what it changes of the rule's finding."""

    values: tuple[str, ...]  # compared through table_value()
    class_: str | None = None
    severity: Severity | None = None
    title: str | None = None
    explain: str | None = None
    fix: tuple[FixSpec, ...] | None = None
    facts: dict[str, str] = field(default_factory=dict)  # added to the finding's (a code table's row: its name)


# What may follow a code's text where a program printed more after it on the line
# ("out of memory\nCUDA kernel errors…" joined, "unhandled system error, NCCL version 2.21.5").
_AFTER_TEXT = " .,;:'\"()[]-"


@lazy_dataclass(frozen=True)
class TableSpec:
    """A rule's code table: the captured fact that is looked up, and the rows it is looked up in."""

    key: str
    source: str
    rows: tuple[RowSpec, ...]
    otherwise: str = "rule"  # or "ignore"
    codes: tuple[str, ...] = ()  # the code tables (rules/codes/) the rows were resolved from

    def row_for(self, value: object) -> RowSpec | None:
        """The row listing the value. A rule with code tables also takes a captured text that starts with a
        code's text (the longest that does), since a capture of a message reaches to where the line ends."""
        wanted = table_value(value)
        row = next((row for row in self.rows if wanted in row.values), None)
        if row is not None or not self.codes:
            return row
        best: tuple[int, RowSpec] | None = None
        for row in self.rows:
            for v in row.values:
                if len(v) < len(wanted) and wanted.startswith(v) and wanted[len(v)] in _AFTER_TEXT \
                        and (best is None or len(v) > best[0]):
                    best = (len(v), row)
        return best[1] if best is not None else None


def _fix_specs(steps: Any) -> tuple[FixSpec, ...]:
    return tuple(FixSpec(s.step, s.action.model_dump(mode="json") if s.action else None) for s in steps)


@lazy_dataclass(frozen=True)
class RuleSpec:
    """A validated rule, as the engine runs it."""

    id: str
    class_: str
    title: str
    severity: Severity
    match: MatchSpec
    examples: ExamplesSpec
    status: Status = Status.stable
    sources: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    extract: dict[str, str] = field(default_factory=dict)
    explain: str | None = None
    fix: tuple[FixSpec, ...] = ()
    table: TableSpec | None = None
    floor: bool = False  # a structure rule: any other rule's finding on the same record wins over it
    relay: bool = False  # the line only passes on an earlier failure (schema.Rule.relay)
    fallback: bool = False  # the cause only when no other rule found one; else an observation (schema.Rule.fallback)

    @classmethod
    def from_model(cls, rule: Any,
                   code_rows: Callable[[tuple[str, ...], tuple[RowSpec, ...]], tuple[RowSpec, ...]] | None = None,
                   ) -> "RuleSpec":
        """From a validated ``schema.Rule`` (typed loosely: this module must not import the schemas).

        ``code_rows(names, own)``: the table's rows when it names code tables (``codes:``): the rule's own
        rows, then those the tables give (rulepack.codes.resolve_rows)."""
        m = rule.match
        table = None
        if rule.table is not None:
            t = rule.table
            own = tuple(
                RowSpec(
                    values=tuple(table_value(v) for v in row.values),
                    class_=row.class_,
                    severity=row.severity,
                    title=row.title,
                    explain=row.explain,
                    fix=_fix_specs(row.fix) if row.fix is not None else None,
                )
                for row in t.rows
            )
            rows = code_rows(tuple(t.codes), own) if code_rows is not None and t.codes else own
            table = TableSpec(key=t.key, source=t.source or "", otherwise=t.otherwise, rows=rows, codes=tuple(t.codes))
        return cls(
            id=rule.id,
            class_=rule.class_,
            title=rule.title,
            severity=rule.severity,
            status=rule.status,
            sources=tuple(rule.sources),
            references=tuple(rule.references),
            match=MatchSpec(tuple(m.any), tuple(m.all), m.window, tuple(m.unless), dict(m.where), m.count, m.multiline,
                            m.unless_after, tuple(m.raised.module) if m.raised else (),
                            tuple(m.raised.exception) if m.raised else (), m.count_by),
            extract=dict(rule.extract),
            explain=rule.explain,
            fix=_fix_specs(rule.fix),
            table=table,
            floor=bool(rule.floor),
            relay=rule.relay,
            fallback=rule.fallback,
            examples=ExamplesSpec(tuple(rule.examples.match), tuple(rule.examples.no_match)),
        )

    def for_row(self, row: RowSpec) -> "RuleSpec":
        """This rule as a finding of one table row sees it: the row's class, severity, words and fix."""
        return replace(
            self,
            class_=row.class_ or self.class_,
            severity=row.severity or self.severity,
            title=row.title or self.title,
            explain=row.explain if row.explain is not None else self.explain,
            fix=row.fix if row.fix is not None else self.fix,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the YAML's key names (``class``)."""
        out = asdict(self)
        out["class"] = out.pop("class_")
        out["severity"] = self.severity.value
        out["status"] = self.status.value
        if self.table is not None:
            for row in out["table"]["rows"]:
                row["class"] = row.pop("class_")
                row["severity"] = row["severity"].value if row["severity"] is not None else None
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RuleSpec":
        d = dict(data)
        m = d.pop("match")
        ex = d.pop("examples")
        return cls(
            id=d["id"],
            class_=d["class"],
            title=d["title"],
            severity=Severity(d["severity"]),
            status=Status(d["status"]),
            sources=tuple(d["sources"]),
            references=tuple(d["references"]),
            match=MatchSpec(
                tuple(m["any"]),
                tuple(m["all"]),
                int(m["window"]),
                tuple(m["unless"]),
                dict(m["where"]),
                int(m["count"]),
                bool(m["multiline"]),
                bool(m.get("unless_after", False)),
                tuple(m.get("raised_module", ())),
                tuple(m.get("raised_exception", ())),
                m.get("count_by"),
            ),
            extract=dict(d["extract"]),
            explain=d["explain"],
            fix=tuple(FixSpec(f["step"], f["action"]) for f in d["fix"]),
            table=_table_from_dict(d["table"]) if d.get("table") else None,
            floor=bool(d.get("floor", False)),
            relay=bool(d.get("relay", False)),
            fallback=bool(d.get("fallback", False)),
            examples=ExamplesSpec(tuple(ex["match"]), tuple(ex["no_match"])),
        )

    def shown(self) -> dict[str, Any]:
        """What ``rules show`` prints: the YAML-equivalent mapping, defaults left out."""
        out = self.to_dict()
        defaults: dict[str, Any] = {"status": "stable", "references": [], "extract": {}, "explain": None, "fix": [], "table": None,
                    "floor": False, "relay": False, "fallback": False}
        for key, value in defaults.items():
            if out.get(key) == value or (isinstance(value, list) and out.get(key) == ()):
                out.pop(key, None)
        table = out.get("table")
        if table is not None and table.get("codes"):
            # the rows a code table gave are the table's (rules/codes/): shown by name, not as ~100 rows
            table["rows"] = [r for r in table["rows"] if "code_table" not in (r.get("facts") or {})]
        match = out["match"]
        match_defaults: tuple[tuple[str, Any], ...] = (
            ("any", ()), ("all", ()), ("unless", ()), ("where", {}), ("window", 200), ("count", 1), ("multiline", False),
            ("unless_after", False), ("raised_module", ()), ("raised_exception", ()))
        for key, value in match_defaults:
            if match.get(key) == value:
                match.pop(key)
        return out


def _table_from_dict(t: dict[str, Any]) -> TableSpec:
    return TableSpec(
        key=t["key"],
        source=t["source"],
        otherwise=t["otherwise"],
        codes=tuple(t.get("codes", ())),
        rows=tuple(
            RowSpec(
                values=tuple(r["values"]),
                class_=r["class"],
                severity=Severity(r["severity"]) if r["severity"] else None,
                title=r["title"],
                explain=r["explain"],
                fix=tuple(FixSpec(f["step"], f["action"]) for f in r["fix"]) if r["fix"] is not None else None,
                facts=dict(r.get("facts", {})),
            )
            for r in t["rows"]
        ),
    )


@lazy_dataclass(frozen=True)
class ClassSpec:
    """A failure class of the catalogue (rules/classes.yaml): its words, its fix and what it explains."""

    id: str
    title: str
    evidence: str
    fix: str
    explains: tuple[str, ...] = ()
    node_level: bool = False  # a node condition, a Slurm drain (rules/classes.yaml)
    held_until_boot: bool = False  # active until the node boots again

    @classmethod
    def from_model(cls, c: Any) -> "ClassSpec":
        return cls(c.id, c.title, c.evidence, c.fix, tuple(c.explains), c.node_level, c.held_until_boot)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ClassSpec":
        return cls(d["id"], d["title"], d["evidence"], d["fix"], tuple(d["explains"]), bool(d["node_level"]),
                   bool(d["held_until_boot"]))


@lazy_dataclass(frozen=True)
class StageSpec:
    """One launch stage of ``rules/stages.yaml``, as the stall watchdog uses it (validated on load)."""

    id: str
    label: str
    rank: int  # launches move to equal or higher ranks only
    patterns: tuple[str, ...]
    resets: bool = False  # a fresh start: taken whatever the current stage
    quiet_ok: bool = False  # silence here is normal; no stall report
    hint: str = ""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "StageSpec":
        return cls(str(d["id"]), str(d["label"]), int(d["rank"]), tuple(str(p) for p in d["patterns"]),
                   bool(d.get("resets", False)), bool(d.get("quiet_ok", False)), str(d.get("hint", "")))
