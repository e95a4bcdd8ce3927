"""How a rule's confirmed hits become findings: at once, as a storm, as `all` parts, as a table row.

A plain `any` rule fires on its hit; a `count` rule (a storm) fires when enough hits
fall within its window; an `all` rule fires when each of its parts has a hit within
the window. A rule with a `table` fires as the row its code picks (or not at all).
Findings of rules with `unless` then wait out their veto windows (engine.vetoes).
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import replace
from typing import Iterator, Sequence

from qwen_triage.engine.compiled import CompiledRule
from qwen_triage.engine.facts import merge_facts
from qwen_triage.engine.finding import Finding, facts_state
from qwen_triage.engine.records import LineRecord
from qwen_triage.engine.vetoes import VetoWindows

Hit = tuple[LineRecord, dict[str, object]]  # an evidence line and the facts its match gave
MAX_COUNTED = 4096  # storm windows kept at once (rule, input, `count_by` value): hostile input cannot grow it


class Firing:
    """Per rule and input, the hits that may still complete a finding; gives findings out in order."""

    def __init__(self, vetoes: VetoWindows):
        self.vetoes = vetoes
        self.seq = 0  # findings completed, across all inputs
        self.all_state: dict[tuple[int, int], dict[int, Hit]] = defaultdict(dict)  # per (rule, source): `all` hits
        # per (rule, source, value of its `count_by` fact): a `count` rule's window
        self._counted: dict[tuple[int, int, str | None], deque[Hit]] = {}
        self._row_rules: dict[tuple[int, int], CompiledRule] = {}  # (rule, table row) -> the rule as that row

    def all_part(self, rule: CompiledRule, pid: int, rec: LineRecord, facts: dict[str, object]) -> list[Hit] | None:
        """One `all` part of the rule hit on ``rec``; every part's hit, oldest first, once all lie within the
        window (the rule completes: :meth:`fire_parts`), else None."""
        state = self.all_state[(rule.index, rec.source_index)]
        state[pid] = (rec, facts)
        window = rule.rule.match.window
        for other in list(state):
            if rec.line - state[other][0].line > window:
                del state[other]
        if len(state) < len(set(rule.all_ids)):
            return None
        parts = sorted(state.values(), key=lambda rf: rf[0].line)
        state.clear()
        return parts

    def fire_parts(self, rule: CompiledRule, parts: list[Hit]) -> Iterator[Finding]:
        """A finding of the hits that completed an `all` rule: the first line naming a fact gives it."""
        yield from self.fire(rule, [r for r, _ in parts], merge_facts(f for _r, f in parts))

    def count(self, rule: CompiledRule, rec: LineRecord, facts: dict[str, object]) -> Iterator[Finding]:
        """A storm rule: fires when ``count`` matching lines fall within ``window`` lines, then counts anew;
        with ``count_by``, lines count only with those of the same value of that fact (one link's flaps)."""
        match = rule.rule.match
        by = None if match.count_by is None else str(facts.get(match.count_by))
        key = (rule.index, rec.source_index, by)
        if key not in self._counted and len(self._counted) >= MAX_COUNTED:
            self._counted.pop(next(iter(self._counted)))  # bounded: the oldest storm candidate goes first
        seen = self._counted.setdefault(key, deque(maxlen=match.count))
        seen.append((rec, facts))
        while seen and rec.line - seen[0][0].line >= match.window:
            seen.popleft()
        if len(seen) < match.count:
            return
        records = [r for r, _ in seen]
        merged = merge_facts(f for _r, f in seen)
        merged["lines_in_window"] = len(records)
        seen.clear()
        shown = records[:3] + records[-1:] if len(records) > 4 else records
        yield from self.fire(rule, shown, merged)

    def _as_row(self, rule: CompiledRule, facts: dict[str, object]) -> CompiledRule | None:
        """The rule as its table row for this finding's code (None: a code the table drops)."""
        table = rule.rule.table
        if table is None:
            return rule
        value = facts.get(table.key)
        row = table.row_for(value) if value is not None else None
        if row is None:
            return None if table.otherwise == "ignore" else rule
        for name, fact in row.facts.items():  # a code table's row names the code, whatever form was printed
            facts.setdefault(name, fact)
        return self.row_rule(rule, table.rows.index(row))

    def row_rule(self, rule: CompiledRule, row_index: int) -> CompiledRule:
        """The rule as row ``row_index`` of its table: made once, then the same object."""
        key = (rule.index, row_index)
        variant = self._row_rules.get(key)
        if variant is None:
            assert rule.rule.table is not None, f"{rule.rule.id} has no table"
            loaded = replace(rule.loaded, rule=rule.rule.for_row(rule.rule.table.rows[row_index]))
            variant = self._row_rules[key] = replace(rule, loaded=loaded)
        return variant

    def row_of(self, rule: CompiledRule) -> int | None:
        """Which table row ``rule`` is when :meth:`row_rule` made it; None for a rule as loaded."""
        for (_index, row_index), variant in self._row_rules.items():
            if variant is rule:
                return row_index
        return None

    def state(self, origin: int, rules: Sequence[CompiledRule]) -> tuple[object, ...]:
        """What of this firing can still change a finding from line ``origin`` on, as plain data with lines
        counted from ``origin`` (engine.split compares two scans' so): each `all` part's hit still within its
        rule's window and each storm's hits still within its window (a later hit drops older ones unread:
        :meth:`all_part`, :meth:`count`), and whether the storm table is near its bound (then which storm
        :meth:`count` evicts depends on everything before)."""
        parts = sorted(((key, pid, rec.state(origin), facts_state(facts))
                        for key, hits in self.all_state.items() for pid, (rec, facts) in hits.items()
                        if rec.line >= origin - rules[key[0]].rule.match.window), key=lambda p: (p[0], p[1]))
        storms = []
        for (ri, src, by), seen in self._counted.items():
            live = tuple((rec.state(origin), facts_state(facts)) for rec, facts in seen
                         if origin - rec.line < rules[ri].rule.match.window)
            if live:
                storms.append(((ri, src, by is None, by or ""), live))
        storms.sort(key=lambda s: s[0])
        return tuple(parts), tuple(storms), len(self._counted) >= MAX_COUNTED // 2

    def fire(self, rule: CompiledRule, records: list[LineRecord], facts: dict[str, object]) -> Iterator[Finding]:
        """A finding of the rule (as its table row): given out now, or held while a veto may still come."""
        as_row = self._as_row(rule, facts)
        if as_row is None:
            return
        self.seq += 1
        finding = Finding(rule=as_row, records=records, facts=facts, seq=self.seq)
        if not as_row.unless_ids:
            yield finding
            return
        self.vetoes.hold(finding)
