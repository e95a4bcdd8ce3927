"""Findings to diagnoses: group by class, find root causes, order them.

This is the one place that builds the root-cause tree, for both kinds of
finding: a rule firing on log lines (:class:`~qwen_triage.engine.matcher.Finding`,
from ``scan`` and the live commands) and a preflight check's verdict
(:class:`~qwen_triage.engine.check_finding.CheckFinding`, from ``plan``, ``check-model``, ``doctor`` and the
runner's own checks). Both kinds may meet in one correlator, so a missing
shard found before launch explains the load error found in the log.

A class that `explains` another present class is its root cause: the explained
class is listed inside it as a symptom. Explanation is followed through
chains (a GPU off the bus explains an NCCL init failure, which explains the
timeouts), so a symptom lands under the top of its chain. Roots are ordered by
what a sentence rule found before what only a structure rule (``floor``) found, then severity, then
first occurrence. `info` findings are observations only. A fallback rule's finding (``fallback: true``: a
line healthy runs on other hosts print too) is a diagnosis only in a report that holds no other one; beside
any other diagnosis it is an observation. A relay rule may be a fallback too: alone in a report, its line
stands for its class (the one sign left of a failure whose own line the log lacks); beside a diagnosis it is
that diagnosis' relay, nothing more.

A relay rule's finding (``relay: true``: a line that only passes on a failure printed
before it) is neither: it is attached to the diagnosis whose evidence comes last
before it in the same input (else to the first), and with no diagnosis at all the
scanner lists it among the errors no rule explains (:meth:`Correlator.relays`), so a
failing log is never left silent by a wrapper line.

The two kinds differ in what they carry, so a group speaks for them
differently: a log finding brings a rule whose templates are filled from the
facts of the whole group (the most severe match speaks), while a check finding
arrives already worded, so its summary, fixes and references are merged as
they are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from qwen_triage.engine.finding import Finding
from qwen_triage.engine.records import LineRecord
from qwen_triage.engine.unrecognised import indent_of, is_exception_line
from qwen_triage.redact import redact_text, redact_tree
from qwen_triage.report.model import Diagnosis, Evidence, FixOut, Observation, Relayed, Symptom
from qwen_triage.rulepack.severity import Severity, Status
from qwen_triage.rulepack.spec import ClassSpec
from qwen_triage.rulepack.templates import OPTIONAL_PART, PLACEHOLDER

if TYPE_CHECKING:
    from qwen_triage.engine.check_finding import CheckFinding

MAX_EVIDENCE = 5
WRAPPED_LINES = 8  # a structure finding wraps a sentence finding this close below it that is its detail
MAX_SUMMARIES = 3  # worded summaries joined into one before "(and N more)"


def fill(template: str, facts: dict[str, Any]) -> str:
    """Fill ``{name}`` from facts. Plain substitution: no attribute access or format specs.

    ``[[…]]`` is an optional part: kept (without its brackets) when every fact it names has a value, dropped
    whole when one has none, so a report never says "tensor '?'" where a line did not say which tensor
    (``rules lint`` holds every fact some match can leave unset to such a part). A fact unset outside one
    (a group that is optional inside its pattern) takes its word with it: no report prints an empty fact.
    """

    def optional(m: re.Match[str]) -> str:
        return "" if any(_unset(facts.get(n)) for n in PLACEHOLDER.findall(m[1])) else m[1]

    def word(m: re.Match[str]) -> str:
        # a fact left unset outside an optional part (a group optional inside its pattern): its word goes, with
        # what is fused to it (`#{seq}`, `({op})`, `{key}={derived}`) but not the punctuation that ends it,
        # rather than a '?' in a report
        if not any(_unset(facts.get(n)) for n in PLACEHOLDER.findall(m["word"])):
            return m[0]
        return _unclosed(m["word"]) + m["end"] if m["lead"] or not m["end"] else m["end"]

    def sub(m: re.Match[str]) -> str:
        return redact_text(str(facts.get(m[1])))

    if "[[" in template:
        template = OPTIONAL_PART.sub(optional, template)
    template = _FACT_WORD.sub(word, template)
    return PLACEHOLDER.sub(sub, template)


_CLOSERS = {")": "(", "]": "[", "`": "`", "'": "'", '"': '"'}


def _unclosed(word: str) -> str:
    """The closing marks that end ``word`` but were opened before it (`ethtool -S {iface}`): kept, so what
    remains of the sentence stays balanced."""
    kept = ""
    while word and word[-1] in _CLOSERS:
        c, word = word[-1], word[:-1]
        opener = _CLOSERS[c]
        if (word.count(c) % 2 == 0) if opener == c else word.count(opener) <= word.count(c):
            kept = c + kept
        else:
            break
    return kept


# a word holding a fact: what precedes it (a space, or the start), the word, the punctuation that ends it
_FACT_WORD = re.compile(r"(?P<lead> ?)(?P<word>[^\s]*?\{[A-Za-z_][A-Za-z0-9_]*\}[^\s]*?)(?P<end>[.,;:!]*(?=\s|$))")


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _fill_any(value: Any, facts: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return fill(value, facts)
    if isinstance(value, dict):
        return {k: _fill_any(v, facts) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_any(v, facts) for v in value]
    return value


def evidence_of(rec: LineRecord) -> Evidence:
    """A line of evidence for the report: secrets masked here, once, for every format."""
    return Evidence(path=rec.path, line=rec.line, text=redact_text(rec.text), truncated=rec.truncated)


def _redacted(e: Evidence) -> Evidence:
    text = redact_text(e.text)
    return e if text == e.text else replace(e, text=text)


@dataclass
class Group:
    """Everything found for one class (or, for observations, one rule)."""

    key: str
    first: Finding | CheckFinding
    severity: Severity
    seq: int  # order of the first finding, for ranking
    best: Finding | None = None  # the log finding that speaks: most severe, then most facts
    last_line: tuple[int, int] | None = None
    count: int = 0
    evidence: list[LineRecord] = field(default_factory=list)  # log lines, at most MAX_EVIDENCE
    evidence_seen: set[tuple[int, int]] = field(default_factory=set)  # of the listed lines only
    last_evidence: tuple[int, int] | None = None
    evidence_total: int = 0
    facts: dict[str, Any] = field(default_factory=dict)
    rules: dict[str, None] = field(default_factory=dict)
    checks: list[CheckFinding] = field(default_factory=list)
    floor: bool = True  # only structure rules (rules' `floor`) found it: it ranks after what sentence rules found
    located: bool = True  # only the message catalogue found it (engine.locate): it ranks after any rule's
    check_evidence: dict[tuple[str, str], Evidence] = field(default_factory=dict)  # every distinct one

    def add(self, f: Finding | CheckFinding) -> None:
        if f.severity.rank < self.severity.rank:
            self.severity = f.severity
        if not (isinstance(f, Finding) and f.rule.rule.floor):
            self.floor = False
        if isinstance(f, Finding) or f.because is None:
            self.located = False
        if isinstance(f, Finding):
            self._add_match(f)
        else:
            self._add_check(f)

    def _add_check(self, f: CheckFinding) -> None:
        self.count += f.count
        self.checks.append(f)
        self.rules.setdefault(f.rule, None)
        for k, v in f.facts.items():
            self.facts.setdefault(k, v)
        for e in f.evidence:
            self.check_evidence.setdefault((e.path, e.text), e)

    def _add_match(self, f: Finding) -> None:
        # Several rules of one class firing on one line count once: lines of
        # evidence are what a reader means by "seen N times".
        here = (f.records[-1].source_index, f.records[-1].line)
        if here != self.last_line:
            self.count += 1
            self.last_line = here
        best = self.best
        # the most severe speaks, a sentence rule before a structure rule, then the one with most facts
        if best is None or (f.severity.rank, f.rule.rule.floor, -len(f.facts)) < (
                best.severity.rank, best.rule.rule.floor, -len(best.facts)):
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

    # -- what the group says ---------------------------------------------------

    def speaker(self) -> tuple[str, str, str]:
        """Class, rule id and title of the finding that speaks for the group."""
        if self.best is not None:
            rule = self.best.rule.rule
            return rule.class_, rule.id, rule.title
        first = self.checks[0]
        return first.class_id, first.rule, first.title

    def all_facts(self) -> dict[str, Any]:
        facts = {**self.facts, **(self.best.facts if self.best else {})}
        if len(self.checks) > 1:
            # Per-check facts would otherwise be lost to the merge.
            facts["findings"] = [c.facts for c in self.checks]
        return facts

    def summary(self, facts: dict[str, Any]) -> str:
        texts: list[str] = []
        if self.best is not None:
            rule = self.best.rule.rule
            texts.append(fill(rule.explain or rule.title, facts))
        # a line the catalogue placed in a class a rule diagnosed is more evidence of that diagnosis, not a sentence of it
        spoken = [c for c in self.checks if self.located or c.because is None]
        texts = list(dict.fromkeys([*texts, *(redact_text(c.summary) for c in spoken)]))
        text = " ".join(texts[:MAX_SUMMARIES])
        if len(texts) > MAX_SUMMARIES:
            text += f" (and {len(texts) - MAX_SUMMARIES} more)"
        return text

    def shown_evidence(self) -> tuple[list[Evidence], int]:
        """The evidence listed, and how many more lines there were."""
        listed = [evidence_of(r) for r in self.evidence] + [_redacted(e) for e in self.check_evidence.values()]
        total = self.evidence_total + len(self.check_evidence)
        shown = listed[:MAX_EVIDENCE]
        return shown, max(total - len(shown), 0)

    def references(self) -> list[str]:
        refs = list(self.best.rule.rule.references) if self.best else []
        return list(dict.fromkeys([*refs, *(r for c in self.checks for r in c.references)]))

    def fixes(self, facts: dict[str, Any]) -> list[FixOut]:
        out = []
        if self.best is not None:
            out = [
                FixOut(
                    step=fill(step.step, facts),
                    action=_fill_any(step.action, facts) if step.action else None,
                )
                for step in self.best.rule.rule.fix
            ]
        seen = {json.dumps([s.step, s.action], sort_keys=True) for s in out}
        for c in self.checks:
            for step in c.fix:
                key = json.dumps([step.step, step.action], sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    out.append(FixOut(step=redact_text(step.step), action=redact_tree(step.action)))
        return out


class Correlator:
    """Groups findings of both kinds and orders them into diagnoses and observations."""

    def __init__(self, classes: dict[str, ClassSpec]):
        self.classes = classes
        self.groups: dict[str, Group] = {}  # class id -> group (severity above info)
        self.observed: dict[str, Group] = {}  # rule id -> group (info)
        self.relayed: dict[str, Group] = {}  # relay rule id -> group: lines that pass another failure on
        self.fallbacks: dict[str, Group] = {}  # class id -> group: the cause only when no other group exists
        self._seq = 0  # the latest order seen: check findings are numbered after it

    def add(self, f: Finding | CheckFinding) -> bool:
        """Record a finding; True when it starts a new diagnosis or observation."""
        if isinstance(f, Finding):
            self._seq = max(self._seq, f.seq)
            seq, class_id, rule_id = f.seq, f.rule.rule.class_, f.rule.rule.id
        else:
            self._seq += 1
            seq, class_id, rule_id = self._seq, f.class_id, f.rule
        # an experimental rule (`status: experimental`) is reported, never taken for a cause: an observation
        info = f.severity is Severity.info or (isinstance(f, Finding) and f.rule.rule.status is Status.experimental)
        relay = isinstance(f, Finding) and f.rule.rule.relay
        if self._standing(f):
            self._add_standing_relay(f, seq, class_id)
        fallback = not info and isinstance(f, Finding) and f.rule.rule.fallback
        table = self.relayed if relay else self.observed if info else self.fallbacks if fallback else self.groups
        # observations: one per rule, and per row of a rule's table (its title says which)
        key = (f"{rule_id}\0{f.rule.rule.title}" if isinstance(f, Finding) else rule_id) if info else class_id
        group = table.get(key)
        new = group is None
        if group is None:
            group = table[key] = Group(key=key, first=f, severity=f.severity, seq=seq)
        group.add(f)
        return new

    def _add_standing_relay(self, f: Finding | CheckFinding, seq: int, class_id: str) -> None:
        """A relay rule that is also a fallback (``relay: true`` and ``fallback: true``): its line passes on a failure
        printed before it, and when the log shows no failure at all (a report no other rule fills) it is the one sign
        of its class. Kept as a fallback too, at warning; beside any diagnosis it is only that diagnosis' relay."""
        group = self.fallbacks.get(class_id)
        if group is None:
            group = self.fallbacks[class_id] = Group(key=class_id, first=f, severity=Severity.warning, seq=seq)
        group.add(f)

    @staticmethod
    def _standing(f: Finding | CheckFinding) -> bool:
        """A fallback relay's finding (``relay: true`` and ``fallback: true``)."""
        return isinstance(f, Finding) and f.rule.rule.relay and f.rule.rule.fallback

    @classmethod
    def _stands(cls, g: Group) -> bool:
        """A group a fallback relay started: in the relays, one whose rule stands for its class when nothing else
        is found; in the fallbacks, one that is no observation beside a diagnosis (its lines are that diagnosis'
        relays)."""
        return cls._standing(g.first)

    def extend(self, findings: Iterable[Finding | CheckFinding]) -> Correlator:
        """Add every finding; returns the correlator, for a one-line report."""
        for f in findings:
            self.add(f)
        return self

    # -- ordering ------------------------------------------------------------

    @staticmethod
    def _rank(g: Group) -> tuple[bool, bool, int, int]:
        """What a rule found before what only the message catalogue placed (engine.locate), what a sentence rule
        found before what only a structure rule found (a raising site, a code family: the family's floor, which
        fills a report no sentence rule would fill and never outranks one), then severity, then first
        occurrence."""
        return (g.located, g.floor, g.severity.rank, g.seq)

    def diagnosed(self) -> dict[str, Group]:
        """The groups that are diagnoses: every class a rule found, or, when none did, what fallback rules found."""
        return self.groups or self.fallbacks

    def roots(self) -> list[tuple[Group, list[Group]]]:
        present = self.diagnosed()
        explainers: dict[str, list[str]] = {c: [] for c in present}
        for cid in present:
            cls = self.classes.get(cid)
            for target in cls.explains if cls else ():
                # what only the catalogue placed never makes a rule's diagnosis its symptom
                if target in present and target != cid and (present[target].located or not present[cid].located):
                    explainers[target].append(cid)

        def top(cid: str, seen: frozenset[str]) -> str:
            options = [e for e in explainers[cid] if e not in seen]
            if not options:
                return cid
            best = min(options, key=lambda e: self._rank(present[e]))
            return top(best, seen | {cid})

        symptoms: dict[str, list[Group]] = {c: [] for c in present}
        root_ids = []
        # a floor line over a line whose class it explains is that line's cause, not its wrapper (ggml's
        # assertion over Ollama's "runner terminated"): else each would wait on the other and the report lose both
        wrapped = {w: t for w, t in self._wrappers().items() if top(t, frozenset()) != w}
        for cid in present:
            if cid in wrapped:
                continue  # the same failure said again by its exception's wrapper: part of that diagnosis
            root = top(cid, frozenset())
            if root == cid:
                root_ids.append(cid)
            else:
                symptoms[root].append(present[cid])
        # no finding is lost: one that is neither a root, nor a root's symptom, nor wrapped into one (a chain that
        # ends in a wrapped group) is a root of its own
        shown = {*root_ids, *(g.key for c in root_ids for g in symptoms[c])}
        for cid in present:
            if cid not in shown and wrapped.get(cid) not in shown:
                root_ids.append(cid)
                shown |= {cid, *(g.key for g in symptoms[cid])}
        ordered = sorted(root_ids, key=lambda c: self._rank(present[c]))
        return [(present[c], sorted(symptoms[c], key=self._rank)) for c in ordered]

    def _wrappers(self) -> dict[str, str]:
        """Structure-only groups whose lines wrap what a sentence rule read (a pydantic ``ValidationError`` line
        over the ``Value error, …`` detail a vLLM rule diagnosed): class -> the class it wraps. Such a floor
        finding only says again what the sentence diagnosis says: it is part of that diagnosis, neither a
        second problem nor a symptom."""
        spoken = {(rec.source_index, rec.line): (cid, indent_of(rec.message), is_exception_line(rec.message))
                  for cid, g in self.diagnosed().items() if not g.floor for rec in g.evidence}

        def detail_of(r: LineRecord) -> str | None:
            """The sentence diagnosis of an indented detail line just under ``r`` (its own line excluded)."""
            for d in range(1, WRAPPED_LINES + 1):
                hit = spoken.get((r.source_index, r.line + d))
                if hit is not None and (hit[1] > indent_of(r.message) or not hit[2]):
                    return hit[0]  # indented under it, or its message's next line: not an exception of its own
            return None

        out: dict[str, str] = {}
        for cid, g in self.diagnosed().items():
            if not g.floor or not g.evidence:
                continue
            under = [detail_of(r) for r in g.evidence]
            if all(under) and under[0] != cid:
                out[cid] = under[0]  # type: ignore[assignment]
        return out

    # -- output --------------------------------------------------------------

    @staticmethod
    def _observation_fields(g: Group) -> dict[str, Any]:
        class_, rule, title = g.speaker()
        facts = redact_tree(g.all_facts())  # the facts reported; templates filled from them mask on their own
        evidence, more = g.shown_evidence()
        return {
            "class_": class_,
            "rule": rule,
            "title": redact_text(title),
            "severity": g.severity,
            "summary": g.summary(facts),
            "facts": facts,
            "evidence": evidence,
            "more_evidence": more,
            "count": g.count,
            "references": g.references(),
        }

    @staticmethod
    def _symptom(g: Group) -> Symptom:
        _, rule, title = g.speaker()
        return Symptom(
            class_=g.key,
            rule=rule,
            title=title,
            severity=g.severity,
            count=g.count,
            evidence=g.shown_evidence()[0][:2],
        )

    def diagnoses(self) -> list[Diagnosis]:
        out = []
        roots = self.roots()
        relays = self._relays_by_root([g for g, _ in roots])
        for i, (g, syms) in enumerate(roots):
            fields = self._observation_fields(g)
            fix = g.fixes(fields["facts"])
            if not fix and (cls := self.classes.get(fields["class_"])):
                fix = [FixOut(step=cls.fix)]
            placed = next((c.printed_by for c in g.checks if c.printed_by is not None), None) if g.located else None
            out.append(
                Diagnosis(**fields, rules=list(g.rules), symptoms=[self._symptom(s) for s in syms],
                          relayed=relays[i], fix=fix, because=g.checks[0].because if g.located else None,
                          printed_by=placed)
            )
        return out

    def relays(self) -> list[Group]:
        """Relay findings in order of appearance: with no diagnosis to hold them, what the scanner lists."""
        return sorted(self.relayed.values(), key=lambda g: g.seq)

    def _relays_by_root(self, roots: list[Group]) -> list[list[Relayed]]:
        """Each relay line goes to the root whose evidence comes last before it in the same input (the failure
        it passes on was printed before it), else to the first root; one entry per relay rule and root."""
        out: list[list[Relayed]] = [[] for _ in roots]
        if not roots:
            return out
        for r in self.relays():
            if not self.groups and self._stands(r):
                continue  # it is the diagnosis itself (a fallback relay alone in the report)
            _, rule, title = r.speaker()
            held: dict[int, list[LineRecord]] = {}
            for rec in r.evidence:
                held.setdefault(self._root_before(roots, rec), []).append(rec)
            if not held:
                held[0] = []
            unlisted = r.count - len(r.evidence)  # lines beyond the kept evidence go with the last ones
            last = self._root_before(roots, r.evidence[-1]) if r.evidence else 0
            for i, recs in held.items():
                out[i].append(Relayed(rule=rule, title=redact_text(title), count=len(recs) + (unlisted if i == last else 0),
                                      evidence=[evidence_of(rec) for rec in recs]))
        return out

    @staticmethod
    def _root_before(roots: list[Group], rec: LineRecord) -> int:
        """The index of the root with the latest evidence line at or before ``rec`` in its input; else 0."""
        best, best_line = 0, -1
        for i, g in enumerate(roots):
            lines = [e.line for e in g.evidence if e.source_index == rec.source_index and e.line <= rec.line]
            if lines and max(lines) > best_line:
                best, best_line = i, max(lines)
        return best

    def diagnosed_records(self) -> list[LineRecord]:
        """The evidence lines of every diagnosis (observations are not causes): the lines an
        unrecognised exception may carry, which makes it part of that diagnosis
        (:meth:`qwen_triage.engine.unrecognised.Item.carries`) rather than an error no rule explains."""
        return [rec for g in self.diagnosed().values() for rec in g.evidence]

    def fired_rules(self) -> set[str]:
        """The ids of every rule that fired, diagnosis, observation or relay: an unrecognised line that was one part
        of an `all` rule is that rule's when it completed (Collector.ordered)."""
        return {r for table in (self.groups, self.observed, self.relayed, self.fallbacks) for g in table.values()
                for r in g.rules}

    def relayed_records(self) -> list[LineRecord]:
        """The lines relay rules took (their kept evidence): an unrecognised item that carries one is part of the
        relay, wherever the relay is listed."""
        return [rec for g in self.relayed.values() for rec in g.evidence]

    def observations(self) -> list[Observation]:
        shown = [(g, g.severity) for g in self.observed.values()]
        # fallbacks beside a diagnosis are observations, whatever the rule's severity
        # (a fallback relay's group is not one: beside a diagnosis its lines are that diagnosis' relays)
        shown += [(g, Severity.info) for g in (self.fallbacks.values() if self.groups else ()) if not self._stands(g)]
        return [Observation(**{**self._observation_fields(g), "severity": severity})
                for g, severity in sorted(shown, key=lambda pair: pair[0].seq)]
