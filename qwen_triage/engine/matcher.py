"""Compiled rules and the streaming matcher.

The pack is compiled once: every distinct pattern gets an id, the prefilter is
built over all of them, and each pattern knows which rules use it and how
(`any`, `all`, `unless`). Blocks of lines go through the prefilter; only the
candidate lines are decoded, normalised and confirmed with ``regex`` (under a
timeout), and the confirmed hits drive the rules. Findings come out as soon as
they are certain: at once for plain rules, once the veto window has passed for
rules with `unless`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import regex

from qwen_triage.engine.normalize import decode_line, normalize
from qwen_triage.rulepack.pack import LoadedRule, RulePack, compile_pattern
from qwen_triage.engine.prefilter import Prefilter, build_prefilter
from qwen_triage.engine.records import LineRecord
from qwen_triage.engine.sources import Block
from qwen_triage.rulepack.schema import Rule, Severity

CONFIRM_TIMEOUT = 0.25  # seconds for one confirm call on one line

def _to_bytes(text: str) -> int | str:
    """"24 GiB", "500MB", "16g" -> bytes (a bare number is bytes); the text when it is no size."""
    from qwen_triage.units import SizeError, parse_size

    try:
        return parse_size(text, bare=1)
    except SizeError:
        return text


def convert_fact(kind: str, value: str) -> object:
    """Typed fact from matched text; keeps the text when it does not convert."""
    try:
        if kind == "int":
            return int(value.replace(",", ""))
        if kind == "float":
            return float(value)
        if kind == "hex":
            return int(value, 16)
        if kind == "bytes":
            return _to_bytes(value)
    except ValueError:
        return value
    return value


class LazyRegexes:
    """Confirmation patterns, each compiled the first time a candidate line needs it.

    A typical log makes only a handful of patterns candidates; compiling all
    three hundred up front cost more than scanning a small log.
    """

    def __init__(self, patterns: list[str]):
        self._patterns = patterns
        self._compiled: list[regex.Pattern[str] | None] = [None] * len(patterns)

    def __len__(self) -> int:
        return len(self._patterns)

    def __getitem__(self, pid: int) -> regex.Pattern[str]:
        compiled = self._compiled[pid]
        if compiled is None:
            compiled = self._compiled[pid] = compile_pattern(self._patterns[pid])
        return compiled


@dataclass
class CompiledRule:
    index: int
    loaded: LoadedRule
    any_ids: tuple[int, ...]
    all_ids: tuple[int, ...]
    unless_ids: tuple[int, ...]
    where: tuple[tuple[str, regex.Pattern[str]], ...]

    @property
    def rule(self) -> Rule:
        return self.loaded.rule


@dataclass
class CompiledPack:
    pack: RulePack
    patterns: list[str]
    regexes: LazyRegexes
    rules: list[CompiledRule]
    users: list[list[tuple[int, str]]]  # pattern id -> [(rule index, role)]
    prefilter: Prefilter

    @classmethod
    def build(cls, pack: RulePack, engine: str = "auto", cache_dir: Path | None = None) -> "CompiledPack":
        ids: dict[str, int] = {}
        patterns: list[str] = []

        def pid(p: str) -> int:
            if p not in ids:
                ids[p] = len(patterns)
                patterns.append(p)
            return ids[p]

        rules = []
        for i, lr in enumerate(pack.rules):
            m = lr.rule.match
            rules.append(
                CompiledRule(
                    index=i,
                    loaded=lr,
                    any_ids=tuple(pid(p) for p in m.any),
                    all_ids=tuple(pid(p) for p in m.all),
                    unless_ids=tuple(pid(p) for p in m.unless),
                    where=tuple((k, compile_pattern(v)) for k, v in m.where.items()),
                )
            )
        users: list[list[tuple[int, str]]] = [[] for _ in patterns]
        for r in rules:
            for role, group in (("any", r.any_ids), ("all", r.all_ids), ("unless", r.unless_ids)):
                for p in dict.fromkeys(group):
                    users[p].append((r.index, role))
        regexes = LazyRegexes(patterns)
        return cls(pack, patterns, regexes, rules, users, build_prefilter(patterns, engine, cache_dir))


@dataclass(slots=True)
class Finding:
    """One rule firing: its evidence records and the facts pulled from them."""

    rule: CompiledRule
    records: list[LineRecord]
    facts: dict[str, object]
    seq: int  # order of completion across all inputs

    @property
    def severity(self) -> Severity:
        return self.rule.rule.severity

    @property
    def first(self) -> LineRecord:
        return self.records[0]


@dataclass
class DisabledRule:
    rule_id: str
    pattern: str
    where: str  # path:line of the line it timed out on


@dataclass
class _Pending:
    finding: Finding
    until: int  # line number after which the veto window has passed


@dataclass
class MatchStats:
    lines: int = 0
    bytes: int = 0
    candidates: int = 0
    confirmed: int = 0
    truncated: int = 0


class Matcher:
    """Feeds blocks (or single lines) through the compiled pack; yields findings."""

    def __init__(self, compiled: CompiledPack, timeout: float = CONFIRM_TIMEOUT):
        self.c = compiled
        self.timeout = timeout
        self.seq = 0
        self.stats = MatchStats()
        self.disabled_patterns: set[int] = set()
        self.disabled_rules: dict[int, DisabledRule] = {}
        # per (rule, source): last hit of each `all` pattern; last veto line
        self._all_state: dict[tuple[int, int], dict[int, tuple[LineRecord, dict[str, object]]]] = defaultdict(dict)
        self._last_veto: dict[tuple[int, int], int] = {}
        self._pending: dict[int, list[_Pending]] = defaultdict(list)  # source -> pending

    # -- input ---------------------------------------------------------------

    def feed_block(self, block: Block, source_name: str, source_index: int = 0) -> Iterator[Finding]:
        data = block.data
        self.stats.bytes += len(data)
        nlines = block.nlines
        self.stats.lines += nlines if block.meta is None else len({m.line for m in block.meta})
        self.stats.truncated += len(block.truncated)
        cands = self.c.prefilter.candidates(data)
        index = 0
        prev = 0
        for start in sorted(cands):
            index += data.count(b"\n", prev, start)
            prev = start
            end = data.find(b"\n", start)
            raw = data[start : end if end >= 0 else len(data)]
            line_no = block.origin_line(index)
            meta = block.meta[index] if block.meta is not None else None
            rec = normalize(
                decode_line(raw),
                source_name,
                line_no,
                source_index=source_index,
                truncated=line_no in block.truncated,
                preset=meta.apply if meta is not None else None,
            )
            yield from self._expire(source_index, line_no)
            yield from self._on_line(rec, cands[start])
        last_line = block.origin_line(max(nlines - 1, 0)) if nlines else block.first_line
        yield from self._expire(source_index, last_line)

    def finish(self, source_index: int | None = None) -> Iterator[Finding]:
        """End of a source (or all): pending findings whose veto never came are final."""
        keys = [source_index] if source_index is not None else list(self._pending)
        for key in keys:
            for p in sorted(self._pending.pop(key, []), key=lambda p: p.finding.seq):
                if not self._vetoed(p.finding):
                    yield p.finding

    # -- rules ---------------------------------------------------------------

    def _confirm(self, pid: int, rec: LineRecord) -> regex.Match[str] | None:
        try:
            return self.c.regexes[pid].search(rec.message, timeout=self.timeout)
        except TimeoutError:
            self.disabled_patterns.add(pid)
            for ri, _role in self.c.users[pid]:
                if ri not in self.disabled_rules:
                    self.disabled_rules[ri] = DisabledRule(
                        self.c.rules[ri].rule.id, self.c.patterns[pid], f"{rec.path}:{rec.line}"
                    )
            return None

    def _where_ok(self, rule: CompiledRule, rec: LineRecord) -> bool:
        for name, pattern in rule.where:
            value = rec.field(name)
            if value is None or not pattern.fullmatch(value):
                return False
        return True

    def _facts(self, rule: CompiledRule, m: regex.Match[str]) -> dict[str, object]:
        facts: dict[str, object] = {}
        kinds = rule.rule.extract
        for name, value in m.groupdict().items():
            if value is None or name not in kinds:
                continue
            facts[name] = convert_fact(kinds[name], value)
        return facts

    def _on_line(self, rec: LineRecord, pids: set[int]) -> Iterator[Finding]:
        self.stats.candidates += 1
        hits: dict[int, regex.Match[str]] = {}
        for pid in sorted(pids):
            if pid in self.disabled_patterns:
                continue
            m = self._confirm(pid, rec)
            if m is not None:
                hits[pid] = m
        if not hits:
            return
        self.stats.confirmed += 1
        src = rec.source_index
        fired: set[int] = set()
        # vetoes first, so a line that both matches and vetoes is vetoed
        for pid in hits:
            for ri, role in self.c.users[pid]:
                if role == "unless":
                    self._last_veto[(ri, src)] = rec.line
        for pid, m in hits.items():
            for ri, role in self.c.users[pid]:
                if ri in self.disabled_rules or ri in fired or role == "unless":
                    continue
                rule = self.c.rules[ri]
                if not self._where_ok(rule, rec):
                    continue
                if role == "any":
                    fired.add(ri)
                    yield from self._fire(rule, [rec], self._facts(rule, m))
                else:  # all
                    state = self._all_state[(ri, src)]
                    state[pid] = (rec, self._facts(rule, m))
                    window = rule.rule.match.window
                    for other in list(state):
                        if rec.line - state[other][0].line > window:
                            del state[other]
                    if len(state) == len(set(rule.all_ids)):
                        fired.add(ri)
                        parts = sorted(state.values(), key=lambda rf: rf[0].line)
                        facts: dict[str, object] = {}
                        for _r, f in parts:
                            for k, v in f.items():
                                facts.setdefault(k, v)
                        state.clear()
                        yield from self._fire(rule, [r for r, _ in parts], facts)

    def _fire(self, rule: CompiledRule, records: list[LineRecord], facts: dict[str, object]) -> Iterator[Finding]:
        self.seq += 1
        finding = Finding(rule=rule, records=records, facts=facts, seq=self.seq)
        if not rule.unless_ids:
            yield finding
            return
        if self._vetoed(finding):
            return
        last = records[-1].line
        self._pending[records[-1].source_index].append(_Pending(finding, last + rule.rule.match.window))

    def _vetoed(self, f: Finding) -> bool:
        veto = self._last_veto.get((f.rule.index, f.first.source_index))
        if veto is None:
            return False
        window = f.rule.rule.match.window
        return f.first.line - window <= veto <= f.records[-1].line + window

    def _expire(self, source_index: int, line_no: int) -> Iterator[Finding]:
        pending = self._pending.get(source_index)
        if not pending:
            return
        keep = []
        for p in pending:
            if self._vetoed(p.finding):
                continue
            if line_no > p.until:
                yield p.finding
            else:
                keep.append(p)
        self._pending[source_index] = keep
