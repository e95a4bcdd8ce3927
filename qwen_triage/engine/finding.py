"""A rule firing on log lines: the matcher's output, the correlator's input."""

from __future__ import annotations

from dataclasses import dataclass

from qwen_triage.engine.compiled import CompiledRule
from qwen_triage.engine.records import LineRecord
from qwen_triage.rulepack.severity import Severity


@dataclass(slots=True)
class Finding:
    """One rule firing: its evidence records and the facts pulled from them."""

    rule: CompiledRule
    records: list[LineRecord]
    facts: dict[str, object]
    seq: int  # order of completion across all inputs

    def state(self, origin: int = 0) -> tuple[object, ...]:
        """The finding as plain data, its lines counted from ``origin`` (engine.split compares two scans' held
        findings): its rule, its records, its facts."""
        return self.rule.index, tuple(r.state(origin) for r in self.records), facts_state(self.facts)

    @property
    def severity(self) -> Severity:
        return self.rule.rule.severity

    @property
    def first(self) -> LineRecord:
        return self.records[0]


def facts_state(facts: dict[str, object]) -> tuple[tuple[str, str], ...]:
    """Facts as plain data, whatever their types: each name with its value's repr, by name."""
    return tuple(sorted((name, repr(value)) for name, value in facts.items()))
