"""One `qwen-triage check` run: read what is new in each source, match it, merge with the state.

Each source gets its own engine :class:`~qwen_triage.engine.scanner.Scanner` for the
run, so every diagnosis knows which source it came from (the `source` label of
the metrics, the reason of a drain). What a run finds is merged into the active
diagnoses of the state: the first and last time each was seen, and how often.
Then the hold decides what is still active (see :mod:`qwen_triage.fleet.state`).

A run is bounded: at most ``max_bytes`` per source and a wall-clock deadline; what
is left is read by the next run, from where this one stopped.

Limits: a rule whose `all:` lines fall on either side of two runs, or whose
`unless:` veto arrives in the next run, is decided on the lines of one run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any, Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field

from qwen_triage.deadline import pause
from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.finding import Finding
from qwen_triage.engine.origin import node_evidence
from qwen_triage.engine.scanner import Scanner
from qwen_triage.fleet.policy import NodePolicy, acts_on_node
from qwen_triage.fleet.state import ActiveDiagnosis, State, diagnosis_key
from qwen_triage.inputs.base import Reader
from qwen_triage.inputs.source import Source

DEFAULT_HOLD = 3600.0
DEFAULT_MAX_BYTES = 64 << 20
DEFAULT_TIMEOUT = 4.0  # seconds for the whole run, start-up to answer: inside node-problem-detector's 5 s plugin timeout
SEVERITY_RANK = {"critical": 0, "error": 1, "warning": 2, "info": 3}

Status = Literal["ok", "problem", "unknown"]


class SourceResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    via: str
    lines: int = Field(description="lines read this run")
    bytes: int = Field(description="bytes read this run")
    more: bool = Field(default=False, description="stopped at --max-bytes or the deadline; the rest is read next run")
    error: str | None = None
    notes: list[str] = Field(default_factory=list)


class CheckResult(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    status: Status
    checked_at: float
    seconds: float
    boot_id: str
    active: list[ActiveDiagnosis] = Field(default_factory=list, description="most severe first")
    new: list[str] = Field(default_factory=list, description="`class\\tsource` keys raised by this run")
    cleared: list[ActiveDiagnosis] = Field(default_factory=list, description="diagnoses this run let go")
    sources: list[SourceResult] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    lines_read_total: dict[str, int] = Field(default_factory=dict, description="per source, since the state began")
    check_errors_total: int = 0
    # what the channels act on, never written out: the pack's node policy, and whether this result was answered
    # from the stored state because another check held the lock (that one writes the metrics)
    policy: NodePolicy = Field(default_factory=NodePolicy, exclude=True)
    stored: bool = Field(default=False, exclude=True)

    def select(self, patterns: Iterable[str]) -> "CheckResult":
        """The same result with only the active diagnoses whose class matches one of ``patterns`` (globs)."""
        pats = list(patterns)
        if not pats:
            return self
        active = [d for d in self.active if any(fnmatchcase(d.class_, p) for p in pats)]
        status: Status = "problem" if active else ("unknown" if self.status == "unknown" else "ok")
        return self.model_copy(update={"active": active, "status": status})


@dataclass
class CheckConfig:
    hold: float = DEFAULT_HOLD
    max_bytes: int = DEFAULT_MAX_BYTES
    timeout: float = DEFAULT_TIMEOUT


MAX_COUNTED_LINES = 100_000  # distinct evidence lines remembered per class and run; beyond, each finding counts


@dataclass
class _Seen:
    """What one run saw of one class in one source."""

    first: float
    last: float
    count: int = 0
    rules: dict[str, None] = field(default_factory=dict)
    lines: set[int] = field(default_factory=set)

    def evidence(self, line_numbers: Iterable[int]) -> None:
        """Count the evidence lines not counted yet: two rules (or a table row and a phrase) firing on
        one Xid line are one line of evidence, not two."""
        new = [n for n in line_numbers if n not in self.lines]
        if not new:
            return
        self.count += 1
        if len(self.lines) < MAX_COUNTED_LINES:
            self.lines.update(new)


def _evidence_time(f: Finding, now: float) -> float:
    """When the evidence was logged, where the source says so reliably (journal entries); else now."""
    rec = f.records[-1]
    if rec.timestamp and rec.logged_by_journal:
        try:
            ts = datetime.fromisoformat(rec.timestamp)
        except ValueError:
            return now
        if ts.tzinfo is not None:
            return min(ts.timestamp(), now)
    return now


def _scalar_facts(facts: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in facts.items() if isinstance(v, (str, int, float, bool)) or v is None}


def scan_reader(
    reader: Reader, prev_state: Any, compiled: CompiledPack, budget: int, deadline: float, boot_id: str, now: float
) -> list[ActiveDiagnosis]:
    """Read one source's new lines through the engine; the diagnoses they support."""
    seen: dict[str, _Seen] = {}
    ignored: dict[str, int] = {}
    policy = NodePolicy.of(compiled.pack.classes)

    def admit(f: Finding) -> bool:
        cls = f.rule.rule.class_
        if policy.about_node(cls) and not all(node_evidence(r) for r in f.records):
            # a server's log quoting an Xid (a user's prompt) is the server's text: node-level
            # classes come only from the kernel's (systemd's, the fabric manager's) own records
            ignored[cls] = ignored.get(cls, 0) + 1
            return False
        t = _evidence_time(f, now)
        s = seen.get(cls)
        if s is None:
            s = seen[cls] = _Seen(first=t, last=t)
        s.first, s.last = min(s.first, t), max(s.last, t)
        s.evidence(r.line for r in f.records)
        s.rules.setdefault(f.rule.rule.id, None)
        return True

    scanner = Scanner(compiled, admit=admit)
    source = Source(name=reader.label)
    scanner.add_source(source)
    for chunk in reader.read(prev_state, budget, deadline, boot_id):
        for _ in scanner.feed_chunk(source, chunk.data, chunk.first_line, chunk.kind):
            pass
    for _ in scanner.flush():
        pass
    for cls, n in sorted(ignored.items()):
        reader.notes.append(f"{reader.label}: {n} finding(s) of {cls} not taken: node-level classes come only "
                            f"from the kernel's own records (read with --kernel), not from an application's log")
    report = scanner.report()
    out: list[ActiveDiagnosis] = []

    def entry(cls: str, rule: str, severity: str, summary: str, title: str, facts: dict[str, Any],
              symptom_of: str | None) -> None:
        s = seen.get(cls) or _Seen(first=now, last=now, count=1)
        out.append(
            ActiveDiagnosis(
                class_=cls, rule=rule, severity=severity, source=reader.label, summary=summary, title=title,
                facts=_scalar_facts(facts), first_seen=s.first, last_seen=s.last, count=s.count, boot_id=boot_id,
                until_boot=policy.until_boot(cls) and acts_on_node(severity), symptom_of=symptom_of,
            )
        )

    for d in report.diagnoses:
        entry(d.class_, d.rule, d.severity.value, d.summary, d.title, d.facts, None)
        for sym in d.symptoms:
            entry(sym.class_, sym.rule, sym.severity.value, sym.title, sym.title, {}, d.class_)
    return out


def merge(state: State, found: list[ActiveDiagnosis]) -> list[str]:
    """Fold this run's diagnoses into the state's active set; the keys that were not active before."""
    new = []
    for d in found:
        key = diagnosis_key(d.class_, d.source)
        old = state.active.get(key)
        if old is None:
            state.active[key] = d
            new.append(key)
            continue
        old.first_seen = min(old.first_seen, d.first_seen)
        old.last_seen = max(old.last_seen, d.last_seen)
        old.count += d.count
        old.boot_id = d.boot_id or old.boot_id
        old.until_boot = old.until_boot or d.until_boot  # an error of the class holds it, a later warning does not undo that
        old.symptom_of = d.symptom_of
        if SEVERITY_RANK.get(d.severity, 9) <= SEVERITY_RANK.get(old.severity, 9):
            old.rule, old.severity, old.summary, old.title, old.facts = d.rule, d.severity, d.summary, d.title, d.facts
    return new


def order(active: Iterable[ActiveDiagnosis]) -> list[ActiveDiagnosis]:
    """Most severe first; root causes before their symptoms; then the oldest."""
    return sorted(active, key=lambda d: (SEVERITY_RANK.get(d.severity, 9), d.symptom_of is not None,
                                         d.first_seen, d.class_, d.source))


def run_check(
    readers: list[Reader],
    state: State,
    compiled: CompiledPack,
    config: CheckConfig,
    boot_id: str,
    now: float | None = None,
    started: float | None = None,
    deadline: float | None = None,
) -> CheckResult:
    """One check over ``readers``; ``state`` is updated in place (the caller saves it).

    ``deadline`` (``time.monotonic()``): when reading stops, the caller's whole-run deadline less what it keeps
    for the answer; a source not started by then is not read (the next run reads it) and the status is unknown
    unless something is active. Without it, ``config.timeout`` from ``started``, never below half a second.
    """
    t0 = time.perf_counter() if started is None else started
    now = time.time() if now is None else now
    if deadline is None:
        deadline = time.monotonic() + max(0.5, config.timeout - (time.perf_counter() - t0))
    found: list[ActiveDiagnosis] = []
    results: list[SourceResult] = []
    errors: list[str] = []
    for reader in readers:
        pause("read")
        if time.monotonic() >= deadline:
            errors.append(f"{reader.label}: not read, the check's --timeout came first (read next run)")
            results.append(SourceResult(name=reader.label, via=reader.via, lines=0, bytes=0, more=True,
                                        error=errors[-1]))
            continue
        prev = state.sources.get(reader.key)
        try:
            found += scan_reader(reader, prev, compiled, config.max_bytes, deadline, boot_id, now)
        except OSError as exc:
            reader.error = reader.error or f"{reader.label}: {exc}"
        if reader.state is not None:
            state.sources[reader.key] = reader.state
        if reader.error:
            errors.append(reader.error)
        results.append(SourceResult(name=reader.label, via=reader.via, lines=reader.lines, bytes=reader.bytes,
                                    more=reader.more, error=reader.error, notes=reader.notes))
    new = merge(state, found)
    cleared = state.expire(now, config.hold, boot_id)
    cleared_keys = {c.key for c in cleared}
    new = [k for k in new if k not in cleared_keys]
    state.boot_id = boot_id
    state.last_check = now
    state.checks_total += 1
    if errors:
        state.check_errors_total += len(errors)
    active = order(state.active.values())
    if active:
        status: Status = "problem"
    elif errors or not readers:
        status = "unknown"
    else:
        status = "ok"
    wanted = {r.key for r in readers}
    return CheckResult(
        policy=NodePolicy.of(compiled.pack.classes),
        status=status,
        checked_at=now,
        seconds=round(time.perf_counter() - t0, 4),
        boot_id=boot_id,
        active=active,
        new=new,
        cleared=cleared,
        sources=results,
        errors=errors,
        notes=[n for r in readers for n in r.notes],
        lines_read_total={
            _label(k, readers): s.lines_total for k, s in state.sources.items() if k in wanted
        },
        check_errors_total=state.check_errors_total,
    )


def _label(key: str, readers: list[Reader]) -> str:
    return next((r.label for r in readers if r.key == key), key)


def stored_result(state: State, config: CheckConfig, boot_id: str, note: str, now: float | None = None) -> CheckResult:
    """What the stored state says, without reading any source (another check holds the lock right now).

    The state file is replaced atomically, so reading it unlocked sees one whole version; nothing is saved.
    """
    now = time.time() if now is None else now
    state.expire(now, config.hold, boot_id)
    active = order(state.active.values())
    return CheckResult(status="problem" if active else "ok", checked_at=now, seconds=0.0, boot_id=boot_id,
                       active=active, notes=[note], check_errors_total=state.check_errors_total,
                       lines_read_total={k.split(":", 1)[-1] if k.startswith("file:") else k: s.lines_total
                                         for k, s in state.sources.items()})
