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

    @property
    def severity(self) -> Severity:
        return self.rule.rule.severity

    @property
    def first(self) -> LineRecord:
        return self.records[0]
