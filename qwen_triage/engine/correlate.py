"""Findings to diagnoses: group by class, find root causes, order them.

A class that `explains` another present class is its root cause: the explained
class is listed inside it as a symptom. Explanation is followed through
chains (a GPU off the bus explains an NCCL init failure, which explains the
timeouts), so a symptom lands under the top of its chain. Roots are ordered by
severity, then first occurrence. `info` findings are observations only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from qwen_triage.engine.matcher import Finding
from qwen_triage.engine.records import LineRecord
from qwen_triage.report.model import Diagnosis, Evidence, FixOut, Observation, Symptom
from qwen_triage.rulepack.schema import FailureClass, Severity

MAX_EVIDENCE = 5
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def render(template: str, facts: dict[str, Any]) -> str:
    """Fill ``{name}`` from facts. Plain substitution: no attribute access or format specs."""

    def sub(m: re.Match[str]) -> str:
        value = facts.get(m[1])
        return "?" if value is None else str(value)

    return _PLACEHOLDER.sub(sub, template)


def _render_any(value: Any, facts: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return render(value, facts)
    if isinstance(value, dict):
        return {k: _render_any(v, facts) for k, v in value.items()}
    if isinstance(value, list):
        return [_render_any(v, facts) for v in value]
    return value


def evidence_of(rec: LineRecord) -> Evidence:
    return Evidence(path=rec.path, line=rec.line, text=rec.text, truncated=rec.truncated)


@dataclass
class Group:
    """Everything found for one class (or, for observations, one rule)."""

    key: str
    first: Finding
    severity: Severity
    best: Finding | None = None  # speaks for the group: most severe, then most facts
    last_line: tuple[int, int] | None = None
    count: int = 0
    evidence: list[LineRecord] = field(default_factory=list)
    evidence_seen: set[tuple[int, int]] = field(default_factory=set)  # of the listed lines only
    last_evidence: tuple[int, int] | None = None
    evidence_total: int = 0
    facts: dict[str, Any] = field(default_factory=dict)
    rules: dict[str, None] = field(default_factory=dict)

    def add(self, f: Finding) -> None:
        # Several rules of one class firing on one line count once: lines of
        # evidence are what a reader means by "seen N times".
        here = (f.records[-1].source_index, f.records[-1].line)
        if here != self.last_line:
            self.count += 1
            self.last_line = here
        if f.severity.rank < self.severity.rank:
            self.severity = f.severity
        best = self.best
        if best is None or (f.severity.rank, -len(f.facts)) < (best.severity.rank, -len(best.facts)):
            self.best = f
        self.rules.setdefault(f.rule.rule.id, None)
        for k, v in f.facts.items():
            self.facts.setdefault(k, v)
        for rec in f.records:
            key = (rec.source_index, rec.line)
            if key in self.evidence_seen or key == self.last_evidence:
                continue
            self.last_evidence = key
            self.evidence_total += 1
            if len(self.evidence) < MAX_EVIDENCE:
                self.evidence.append(rec)
                self.evidence_seen.add(key)


class Correlator:
    def __init__(self, classes: dict[str, FailureClass]):
        self.classes = classes
        self.groups: dict[str, Group] = {}  # class id -> group (severity above info)
        self.observed: dict[str, Group] = {}  # rule id -> group (info)

    def add(self, f: Finding) -> bool:
        """Record a finding; True when it starts a new diagnosis or observation."""
        info = f.severity is Severity.info
        table = self.observed if info else self.groups
        key = f.rule.rule.id if info else f.rule.rule.class_
        group = table.get(key)
        new = group is None
        if group is None:
            group = table[key] = Group(key=key, first=f, severity=f.severity)
        group.add(f)
        return new

    # -- ordering ------------------------------------------------------------

    def _rank(self, g: Group) -> tuple[int, int]:
        return (g.severity.rank, g.first.seq)

    def roots(self) -> list[tuple[Group, list[Group]]]:
        present = self.groups
        explainers: dict[str, list[str]] = {c: [] for c in present}
        for cid in present:
            cls = self.classes.get(cid)
            for target in cls.explains if cls else ():
                if target in present and target != cid:
                    explainers[target].append(cid)

        def top(cid: str, seen: frozenset[str]) -> str:
            options = [e for e in explainers[cid] if e not in seen]
            if not options:
                return cid
            best = min(options, key=lambda e: self._rank(present[e]))
            return top(best, seen | {cid})

        symptoms: dict[str, list[Group]] = {c: [] for c in present}
        root_ids = []
        for cid in present:
            root = top(cid, frozenset())
            if root == cid:
                root_ids.append(cid)
            else:
                symptoms[root].append(present[cid])
        ordered = sorted(root_ids, key=lambda c: self._rank(present[c]))
        return [(present[c], sorted(symptoms[c], key=self._rank)) for c in ordered]

    # -- output --------------------------------------------------------------

    @staticmethod
    def _facts(g: Group) -> dict[str, Any]:
        return {**g.facts, **(g.best.facts if g.best else {})}

    def _observation_fields(self, g: Group) -> dict[str, Any]:
        rule = (g.best or g.first).rule.rule
        template = rule.explain or rule.title
        refs = list(dict.fromkeys(rule.references))
        facts = self._facts(g)
        return {
            "class_": rule.class_,
            "rule": rule.id,
            "title": rule.title,
            "severity": g.severity,
            "summary": render(template, facts),
            "facts": facts,
            "evidence": [evidence_of(r) for r in g.evidence],
            "more_evidence": max(g.evidence_total - len(g.evidence), 0),
            "count": g.count,
            "references": refs,
        }

    def diagnoses(self) -> list[Diagnosis]:
        out = []
        for g, syms in self.roots():
            rule = (g.best or g.first).rule.rule
            facts = self._facts(g)
            fix = [
                FixOut(
                    step=render(step.step, facts),
                    action=_render_any(step.action.model_dump(mode="json"), facts) if step.action else None,
                )
                for step in rule.fix
            ]
            if not fix and (cls := self.classes.get(rule.class_)):
                fix = [FixOut(step=cls.fix)]
            out.append(
                Diagnosis(
                    **self._observation_fields(g),
                    rules=list(g.rules),
                    symptoms=[
                        Symptom(
                            class_=s.key,
                            rule=(s.best or s.first).rule.rule.id,
                            title=(s.best or s.first).rule.rule.title,
                            severity=s.severity,
                            count=s.count,
                            evidence=[evidence_of(r) for r in s.evidence[:2]],
                        )
                        for s in syms
                    ],
                    fix=fix,
                )
            )
        return out

    def observations(self) -> list[Observation]:
        groups = sorted(self.observed.values(), key=lambda g: g.first.seq)
        return [Observation(**self._observation_fields(g)) for g in groups]
