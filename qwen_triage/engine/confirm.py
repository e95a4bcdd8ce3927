"""Confirmation: a candidate line's patterns and `where` constraints run with ``regex``, under a timeout.

The prefilter only says which patterns may match a line; here the pattern runs for
real on the normalised message. A hostile line must not stall a scan, so each call
has a timeout, and a pattern (or a `where`) that times out once disables its rules
for the rest of the scan: the report names them (:class:`DisabledRule`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwen_triage.engine.compiled import CONFIRM_TIMEOUT, CompiledPack, CompiledRule
from qwen_triage.engine.origin import accepts
from qwen_triage.engine.records import LineRecord
from qwen_triage.engine.unrecognised import exception_of, raised_at
from qwen_triage.lazydata import lazy_dataclass

if TYPE_CHECKING:  # annotations only: `regex` is imported where a pattern is compiled
    import regex


@lazy_dataclass
class DisabledRule:
    """A rule switched off for the rest of a scan because its pattern ran past its time on a line."""

    rule_id: str
    pattern: str
    where: str  # path:line of the line it timed out on


class Confirmer:
    """Runs the pack's patterns and `where` constraints on records; remembers what timed out."""

    def __init__(self, compiled: CompiledPack, timeout: float = CONFIRM_TIMEOUT):
        self.c = compiled
        self.timeout = timeout
        self.disabled_patterns: set[int] = set()
        self.disabled_rules: dict[int, DisabledRule] = {}

    def confirm(self, pid: int, rec: LineRecord) -> regex.Match[str] | None:
        """Pattern ``pid`` searched in the record's message (None: no match, or it timed out)."""
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

    def where_ok(self, rule: CompiledRule, rec: LineRecord, m: regex.Match[str] | None = None) -> bool:
        """The rule's `sources:` and `where` constraints on this record, matched as ``m``.

        Sources first (:func:`qwen_triage.engine.origin.accepts`: the system's own records
        only for rules that name them, a kernel match anchored where the kernel's message
        starts). A `where` constraint runs under the same timeout as a pattern; one that
        times out disables its rule (with a note naming it), as a pattern that times out does.
        """
        if m is not None and not accepts(rule.sources, rec, m.start(), m.end()):
            return False
        spec = rule.rule.match
        if spec.raised_module and not self._raised_ok(spec.raised_module, spec.raised_exception, rec):
            return False
        for name, pattern in rule.where:
            value = rec.field(name)
            if value is None:
                return False
            try:
                if not pattern.fullmatch(value, timeout=self.timeout):
                    return False
            except TimeoutError:
                if rule.index not in self.disabled_rules:
                    self.disabled_rules[rule.index] = DisabledRule(
                        rule.rule.id, f"where {name}: {pattern.pattern}", f"{rec.path}:{rec.line}"
                    )
                return False
        return True

    @staticmethod
    def _raised_ok(modules: tuple[str, ...], exceptions: tuple[str, ...], rec: LineRecord) -> bool:
        """A `raised:` condition: the record is a traceback's exception raised under ``modules`` (two string
        tests on the frame the traceback was assembled with), of one of ``exceptions`` when they are given."""
        if not raised_at(rec.raised_in, modules):
            return False
        return not exceptions or exception_of(rec.message) in exceptions
