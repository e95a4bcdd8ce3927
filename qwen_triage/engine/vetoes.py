"""Veto windows: findings of rules with `unless`, held until no veto line can come any more.

A finding of such a rule is certain only once its window has passed without a
veto line (or, for a veto before it, once it is known none came). Until then it
waits here, per input; a veto line closes the findings it falls near, and the
findings whose window has passed come out in the order they completed.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import field
from typing import Callable, Iterator, Sequence

from qwen_triage.engine.compiled import CompiledRule
from qwen_triage.engine.finding import Finding
from qwen_triage.engine.multiline import RECORD_LINES
from qwen_triage.lazydata import lazy_dataclass


@lazy_dataclass
class _Pending:
    """A finding held back until its rule's veto window has passed."""

    finding: Finding
    until: int  # line number after which the veto window has passed
    closed: bool = False  # vetoed or already given out


@lazy_dataclass
class _PendingSet:
    """Findings of one source waiting out their veto windows.

    A heap by the line their window ends on, so each line costs the findings
    whose window ended, not all of them (an `unless` with a huge window used to
    make every candidate line walk every pending finding: quadratic). Per rule,
    the open ones, so a veto looks only at its own rule's findings.
    """

    heap: list[tuple[int, int, _Pending]] = field(default_factory=list)
    by_rule: dict[int, list[_Pending]] = field(default_factory=dict)
    limits: dict[int, int] = field(default_factory=dict)  # by_rule sizes that trigger a compaction

    def add(self, rule: int, p: _Pending) -> None:
        heapq.heappush(self.heap, (p.until, p.finding.seq, p))
        open_ = self.by_rule.setdefault(rule, [])
        open_.append(p)
        if len(open_) > self.limits.get(rule, 64):  # drop closed ones, amortised O(1) a finding
            open_[:] = [q for q in open_ if not q.closed]
            self.limits[rule] = max(64, 2 * len(open_))


class VetoWindows:
    """Each rule's last veto line per input, and the findings waiting out their windows.

    ``settle(rule, source)``: called before a rule's last veto is read, so veto lines
    the matcher kept raw (engine.deferred) are counted first.
    """

    def __init__(self, settle: Callable[[CompiledRule, int], None]):
        self.settle = settle
        self.last: dict[tuple[int, int], int] = {}  # (rule, source) -> the last veto line
        self.pending: dict[int, _PendingSet] = defaultdict(_PendingSet)  # source -> findings waiting

    def veto(self, rule_index: int, source_index: int, line_no: int) -> None:
        """A veto line of the rule: the rule's pending findings it falls near are dropped now."""
        self.last[(rule_index, source_index)] = line_no
        pending = self.pending.get(source_index)
        open_ = pending.by_rule.get(rule_index) if pending is not None else None
        if not open_:
            return
        keep = []
        for p in open_:
            if not p.closed and self.vetoed(p.finding):
                p.closed = True
            if not p.closed:
                keep.append(p)
        open_[:] = keep

    def waiting(self, rule_index: int, source_index: int) -> bool:
        """Whether the rule has findings on this input that a veto line could still close."""
        pending = self.pending.get(source_index)
        return pending is not None and any(not q.closed for q in pending.by_rule.get(rule_index, ()))

    def hold(self, finding: Finding) -> None:
        """A new finding of a rule with `unless`: dropped when already vetoed, else it waits out its window."""
        if self.vetoed(finding):
            return
        last = finding.records[-1]
        until = last.line + finding.rule.rule.match.window
        self.pending[last.source_index].add(finding.rule.index, _Pending(finding, until))

    def vetoed(self, f: Finding) -> bool:
        self.settle(f.rule, f.first.source_index)
        veto = self.last.get((f.rule.index, f.first.source_index))
        if veto is None:
            return False
        match = f.rule.rule.match
        earliest = f.first.line if match.unless_after else f.first.line - match.window
        return earliest <= veto <= f.records[-1].line + match.window

    def state(self, origin: int, rules: Sequence[CompiledRule], seq: int) -> tuple[object, ...]:
        """What of the veto windows can still change a finding from line ``origin`` on, as plain data with lines
        counted from ``origin`` (engine.split compares two scans' so): each rule's last veto line while a finding
        still to come could fall near it (:meth:`vetoed`: a window before its first line, which is at most a
        window — its other parts, a storm's lines — or a multi-line record held for its next lines before
        ``origin``), and the findings waiting out their windows, each with how many findings completed after it
        (``seq``: the firing's count now)."""
        def reach(rule: int) -> int:
            window = rules[rule].rule.match.window
            return window + max(window, RECORD_LINES)

        last = sorted((key, line - origin) for key, line in self.last.items() if line >= origin - reach(key[0]))
        waiting = sorted(((src, seq - p.finding.seq, p.until - origin, p.finding.state(origin))
                          for src, pending in self.pending.items() for _until, _seq, p in pending.heap
                          if not p.closed), key=lambda w: (w[0], w[1]))
        return tuple(last), tuple(waiting)

    def due(self, source_index: int, line_no: int) -> bool:
        """Whether some finding's veto window has passed by ``line_no`` (cheap: no generator per line)."""
        pending = self.pending.get(source_index)
        return bool(pending is not None and pending.heap and pending.heap[0][0] < line_no)

    def expire(self, source_index: int, line_no: int) -> Iterator[Finding]:
        """Findings whose veto window has passed by ``line_no``, in the order they completed."""
        pending = self.pending.get(source_index)
        if not pending or not pending.heap:
            return
        due = []
        heap = pending.heap
        while heap and heap[0][0] < line_no:
            p = heapq.heappop(heap)[2]
            if not p.closed and not self.vetoed(p.finding):
                due.append(p)
            p.closed = True
        for p in sorted(due, key=lambda p: p.finding.seq):
            yield p.finding

    def finish(self, source_index: int | None = None) -> Iterator[Finding]:
        """End of a source (or all): pending findings whose veto never came are final."""
        keys = [source_index] if source_index is not None else list(self.pending)
        for key in keys:
            pending = self.pending.pop(key, None)
            if pending is None:
                continue
            for _until, _seq, p in sorted(pending.heap, key=lambda e: e[1]):
                if not p.closed and not self.vetoed(p.finding):
                    yield p.finding
