"""Preflight findings, turned into the same diagnoses and observations as ``scan``.

Checks emit :class:`Finding` objects; :func:`to_report` groups them by class
(one diagnosis per class, like the scan correlator), files info-level ones as
observations, and nests a class under the class that ``explains`` it, so a
missing shard and the layer count it breaks read as one root cause.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from qwen_triage.report.model import Diagnosis, Evidence, FixOut, Observation, Symptom
from qwen_triage.rulepack.schema import FailureClass, Severity

# Same bound as the scan correlator, so reports look alike.
MAX_EVIDENCE = 5
MAX_SUMMARIES = 3


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid")

    class_id: str
    rule: str
    title: str
    severity: Severity
    summary: str
    facts: dict[str, Any] = Field(default_factory=dict)
    evidence: list[Evidence] = Field(default_factory=list)
    fix: list[FixOut] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)


def ev(path: str | Path, text: str) -> Evidence:
    """Evidence from a probe or a file header: there is no line, so line is 0."""
    return Evidence(path=str(path), line=0, text=text)


def act(cls: type[BaseModel], **fields: Any) -> BaseModel:
    """Build an action model without repeating its ``type`` literal."""
    literal = cls.model_fields["type"].annotation.__args__[0]  # type: ignore[union-attr]
    return cls(type=literal, **fields)


def fix(step: str, action: BaseModel | None = None) -> FixOut:
    return FixOut(step=step, action=action.model_dump(mode="json") if action is not None else None)


def load_classes() -> dict[str, FailureClass]:
    # Only the class catalogue: loading the whole rule pack would compile
    # every pattern, which preflight never uses.
    from qwen_triage.rulepack.pack import CLASSES_FILE, bundled_rules_dir
    from qwen_triage.rulepack.pack import load_classes as _load

    return _load(bundled_rules_dir() / CLASSES_FILE)


class _Group:
    def __init__(self, first: Finding, seq: int):
        self.first = first
        self.seq = seq
        self.severity = first.severity
        self.items: list[Finding] = []

    def add(self, f: Finding) -> None:
        self.items.append(f)
        if f.severity.rank < self.severity.rank:
            self.severity = f.severity

    def rank(self) -> tuple[int, int]:
        return (self.severity.rank, self.seq)

    def evidence(self) -> tuple[list[Evidence], int]:
        seen: set[tuple[str, str]] = set()
        out: list[Evidence] = []
        for f in self.items:
            for e in f.evidence:
                if (e.path, e.text) not in seen:
                    seen.add((e.path, e.text))
                    out.append(e)
        return out[:MAX_EVIDENCE], max(len(out) - MAX_EVIDENCE, 0)

    def facts(self) -> dict[str, Any]:
        facts: dict[str, Any] = {}
        for f in self.items:
            for k, v in f.facts.items():
                facts.setdefault(k, v)
        if len(self.items) > 1:
            # Per-finding facts would otherwise be lost to setdefault.
            facts["findings"] = [f.facts for f in self.items]
        return facts

    def summary(self) -> str:
        texts = list(dict.fromkeys(f.summary for f in self.items))
        text = " ".join(texts[:MAX_SUMMARIES])
        if len(texts) > MAX_SUMMARIES:
            text += f" (and {len(texts) - MAX_SUMMARIES} more)"
        return text

    def fixes(self) -> list[FixOut]:
        seen: set[str] = set()
        out = []
        for f in self.items:
            for step in f.fix:
                key = json.dumps([step.step, step.action], sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    out.append(step)
        return out

    def fields(self) -> dict[str, Any]:
        evidence, more = self.evidence()
        return {
            "class_": self.first.class_id,
            "rule": self.first.rule,
            "title": self.first.title,
            "severity": self.severity,
            "summary": self.summary(),
            "facts": self.facts(),
            "evidence": evidence,
            "more_evidence": more,
            "count": len(self.items),
            "references": list(dict.fromkeys(r for f in self.items for r in f.references)),
        }


def _roots(groups: dict[str, _Group], classes: dict[str, FailureClass]) -> list[tuple[_Group, list[_Group]]]:
    explainers: dict[str, list[str]] = {c: [] for c in groups}
    for cid in groups:
        cls = classes.get(cid)
        for target in cls.explains if cls else ():
            if target in groups and target != cid:
                explainers[target].append(cid)

    def top(cid: str, seen: frozenset[str]) -> str:
        options = [e for e in explainers[cid] if e not in seen]
        if not options:
            return cid
        return top(min(options, key=lambda e: groups[e].rank()), seen | {cid})

    symptoms: dict[str, list[_Group]] = {c: [] for c in groups}
    roots = []
    for cid in groups:
        root = top(cid, frozenset())
        if root == cid:
            roots.append(cid)
        else:
            symptoms[root].append(groups[cid])
    roots.sort(key=lambda c: groups[c].rank())
    return [(groups[c], sorted(symptoms[c], key=_Group.rank)) for c in roots]


def to_report(
    findings: Iterable[Finding], classes: dict[str, FailureClass] | None = None
) -> tuple[list[Diagnosis], list[Observation]]:
    """Group findings into diagnoses (one per class) and observations (one per rule)."""
    classes = load_classes() if classes is None else classes
    groups: dict[str, _Group] = {}
    observed: dict[str, _Group] = {}
    for seq, f in enumerate(findings):
        info = f.severity is Severity.info
        table, key = (observed, f.rule) if info else (groups, f.class_id)
        group = table.get(key)
        if group is None:
            group = table[key] = _Group(f, seq)
        group.add(f)

    diagnoses = []
    for g, syms in _roots(groups, classes):
        fixes = g.fixes()
        if not fixes and (cls := classes.get(g.first.class_id)):
            fixes = [FixOut(step=cls.fix)]
        diagnoses.append(
            Diagnosis(
                **g.fields(),
                rules=list(dict.fromkeys(f.rule for f in g.items)),
                symptoms=[
                    Symptom(
                        class_=s.first.class_id,
                        rule=s.first.rule,
                        title=s.first.title,
                        severity=s.severity,
                        count=len(s.items),
                        evidence=s.evidence()[0][:2],
                    )
                    for s in syms
                ],
                fix=fixes,
            )
        )
    observations = [Observation(**g.fields()) for g in sorted(observed.values(), key=lambda g: g.seq)]
    return diagnoses, observations


def exit_code(diagnoses: list[Diagnosis]) -> int:
    """0 when nothing above info was found, 1 otherwise (2 is for bad input, decided by the CLI)."""
    return 1 if diagnoses else 0
