"""The rule pack compiled for matching: pattern ids, who uses each, the prefilter over all of them.

Compiled once per pack and shared by every matcher (engine.matcher) of a run: each
distinct pattern gets an id, the prefilter is built over all of them, and each
pattern knows which rules use it and how (`any`, `all`, `unless`). What the
matcher asks of it per line (which patterns only give context, which only mark a
traceback frame) is worked out here once, not per line.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from qwen_triage.engine.hang import HANG_PATTERN, RAS_PATTERN
from qwen_triage.engine.multiline import HINTS_PATTERN, STARTS_PATTERN
from qwen_triage.engine.prefilter import Prefilter, build_prefilter
from qwen_triage.engine.unrecognised import SIGNALS
from qwen_triage.lazyre import lazy_with
from qwen_triage.rulepack.pack import LoadedRule, RulePack, compile_pattern
from qwen_triage.rulepack.severity import Status
from qwen_triage.rulepack.spec import MatchSpec, RuleSpec

if TYPE_CHECKING:  # annotations only: `regex` is imported where a pattern is compiled (compile_pattern)
    import regex

    from qwen_triage.engine.stage_ladder import StageLadder

CONFIRM_TIMEOUT = 0.25  # seconds for one confirm call on one line


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


class GuardedPattern:
    """A pattern that is not a rule's (a known-benign template) run as rules' patterns are run.

    Each search has the confirm timeout; a pattern that times out once is disabled for the
    rest of the scan (it matches nothing, so its lines are listed rather than dropped), and
    says so in ``disabled_at``: a stranger's ``benign.yaml`` cannot stall a scan.
    """

    __slots__ = ("pattern", "disabled_at")

    def __init__(self, pattern: regex.Pattern[str]):
        self.pattern = pattern
        self.disabled_at: str | None = None

    def search(self, text: str) -> regex.Match[str] | None:
        if self.disabled_at is not None:
            return None
        try:
            return self.pattern.search(text, timeout=CONFIRM_TIMEOUT)
        except TimeoutError:
            self.disabled_at = f"a {len(text)}-character line"
            return None


@dataclass
class CompiledRule:
    """A rule with its patterns as ids into the pack's one pattern list (what the prefilter reports)."""

    index: int
    loaded: LoadedRule
    any_ids: tuple[int, ...]
    all_ids: tuple[int, ...]
    unless_ids: tuple[int, ...]
    where: tuple[tuple[str, regex.Pattern[str]], ...]
    sources: frozenset[str] = frozenset({"any"})  # the rule's `sources:`, enforced by engine.origin

    @property
    def rule(self) -> RuleSpec:
        return self.loaded.rule


@dataclass
class CompiledPack:
    """A rule pack ready to match: its patterns numbered once, who uses each, and the prefilter over them all."""

    pack: RulePack
    patterns: list[str]
    regexes: LazyRegexes
    rules: list[CompiledRule]
    users: list[list[tuple[int, str]]]  # pattern id -> [(rule index, role)]
    prefilter: Prefilter
    # pattern id -> what else it signals (engine.unrecognised): "frame", "exception", "error",
    # "heartbeat", "ready" (a serving stage's line), "hang" (engine.hang) or "ras" (engine.ras); a pattern can also
    # be a rule's
    signals: dict[int, tuple[str, ...]]

    @functools.cached_property
    def context_uses(self) -> dict[int, tuple[tuple[int, tuple[int, ...] | None, int, int], ...]]:
        """Per context-only pattern, its uses: (rule index, the rule's other `all` parts or None for
        an `unless`, how many lines back a deferred line stays of use, the rule's window)."""
        out = {}
        for pid in self.context_or_ready:
            uses = []
            for ri, role in self.users[pid]:
                rule = self.rules[ri]
                window = rule.rule.match.window
                # an `all` part must lie within the window of a later hit; a veto within the window
                # of a finding's first line, itself within the window of the line that completes it
                others = tuple(q for q in dict.fromkeys(rule.all_ids) if q != pid) if role == "all" else None
                uses.append((ri, others, 2 * window, window))
            out[pid] = tuple(uses)
        return out

    @functools.cached_property
    def frame_only(self) -> frozenset[int]:
        """The pattern ids of a line that is only a Python traceback frame: context for the exception after it."""
        return frozenset(pid for pid, kinds in self.signals.items() if kinds == ("frame",) and not self.users[pid])

    @functools.cached_property
    def span_only(self) -> frozenset[int]:
        """The pattern ids of a line that only carries a multi-line hint word (see :data:`HINTS_PATTERN`)."""
        return frozenset(pid for pid, kinds in self.signals.items() if kinds == ("span",))

    @functools.cached_property
    def context_only(self) -> frozenset[int]:
        """Patterns that only give context: each use is an `all` part or an `unless` veto, and they signal nothing.

        A line that is a candidate for these alone cannot fire a rule by itself, so the
        matcher may keep it raw (engine.deferred) until some rule asks about it.
        """
        return frozenset(pid for pid in range(len(self.users)) if pid not in self.signals and self._used_as_context(pid))

    @functools.cached_property
    def _multiline_pids(self) -> frozenset[int]:
        return frozenset(p for r in self.rules if r.rule.match.multiline for p in (*r.any_ids, *r.all_ids))

    def _used_as_context(self, pid: int) -> bool:
        """Some rule uses the pattern, every use is an `all` part or an `unless` veto, and no multi-line rule's."""
        users = self.users[pid]
        return bool(users) and pid not in self._multiline_pids and all(role != "any" for _ri, role in users)

    @functools.cached_property
    def heartbeat_pids(self) -> frozenset[int]:
        """Patterns of lines a stuck launch repeats (rules/stages.yaml `heartbeats`)."""
        return frozenset(pid for pid, kinds in self.signals.items() if "heartbeat" in kinds)

    @functools.cached_property
    def ready_pids(self) -> frozenset[int]:
        """Patterns whose only signal is ``ready`` (a serving stage's line)."""
        return frozenset(pid for pid, kinds in self.signals.items() if kinds == ("ready",))

    @functools.cached_property
    def ready_pure(self) -> frozenset[int]:
        """Serving-stage patterns no rule uses: of no interest to a line before any heartbeat."""
        return frozenset(pid for pid in self.ready_pids if not self.users[pid])

    @functools.cached_property
    def ready_context(self) -> frozenset[int]:
        """Serving-stage patterns that are otherwise only context (a veto, an `all` part): before any heartbeat such
        a line may be kept raw like any context-only line (engine.matcher), as it was before it signalled."""
        return frozenset(pid for pid in self.ready_pids if self._used_as_context(pid))

    @functools.cached_property
    def context_or_ready(self) -> frozenset[int]:
        """:attr:`context_only` with :attr:`ready_context`: the patterns whose lines may be kept raw."""
        return self.context_only | self.ready_context

    @functools.cached_property
    def stage_re(self) -> re.Pattern[bytes] | None:
        """Every launch stage's patterns in one alternation, a named group per stage (raw bytes)."""
        stages = [st for st in self.pack.stages if st["patterns"]]
        if not stages:
            return None
        return re.compile("|".join(f"(?P<{st['id']}>{'|'.join(st['patterns'])})" for st in stages).encode())

    @functools.cached_property
    def stage_ladder(self) -> "StageLadder | None":
        """The launch stages as one reader (engine.stage_ladder): how far a stretch of log got."""
        from qwen_triage.engine.stage_ladder import StageLadder

        pattern = self.stage_re
        return None if pattern is None else StageLadder(pattern, {st["id"]: st for st in self.pack.stages})

    def benign_patterns(self) -> tuple["GuardedPattern", ...]:
        """The known-benign templates (a handful, each under a timeout), compiled when a line is first
        checked against them: a log with no error line never compiles one."""
        return tuple(GuardedPattern(lazy_with(compile_pattern, p)) for p in self.pack.benign)

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
            # a deprecated rule is kept (lint, the catalogue, its index) but reads nothing: no pattern of it is used
            m = lr.rule.match if lr.rule.status is not Status.deprecated else MatchSpec()
            rules.append(
                CompiledRule(
                    index=i,
                    loaded=lr,
                    any_ids=tuple(pid(p) for p in m.any),
                    all_ids=tuple(pid(p) for p in m.all),
                    unless_ids=tuple(pid(p) for p in m.unless),
                    where=tuple((k, lazy_with(compile_pattern, v)) for k, v in m.where.items()),
                    sources=frozenset(lr.rule.sources) or frozenset({"any"}),
                )
            )
        signals: dict[int, tuple[str, ...]] = {}
        kinds = [(kind, p) for kind, p in SIGNALS.items()]
        kinds += [("heartbeat", p) for p in pack.heartbeats]
        # the serving stage's lines: after a run of heartbeats, one says the launch went on (engine.unrecognised)
        kinds += [("ready", p) for s in pack.stages if s.get("quiet_ok") for p in s.get("patterns", ())]
        kinds.append(("span", HINTS_PATTERN))  # lines that may belong to a multi-line record
        kinds.append(("starts", STARTS_PATTERN))  # lines that start one whatever rules find on them
        kinds.append(("hang", HANG_PATTERN))  # lines that tell a hung job's ranks apart (engine.hang)
        kinds.append(("ras", RAS_PATTERN))  # the lines of an NCCL RAS report (engine.ras, read by engine.hang)
        for kind, p in kinds:
            key = pid(p)
            signals[key] = (*signals.get(key, ()), kind)
        users: list[list[tuple[int, str]]] = [[] for _ in patterns]
        for r in rules:
            for role, group in (("any", r.any_ids), ("all", r.all_ids), ("unless", r.unless_ids)):
                for pattern_id in dict.fromkeys(group):
                    users[pattern_id].append((r.index, role))
        regexes = LazyRegexes(patterns)
        multiline = frozenset(p for r in rules if r.rule.match.multiline for p in (*r.any_ids, *r.all_ids))
        prefilter = build_prefilter(patterns, engine, cache_dir, multiline)
        return cls(pack, patterns, regexes, rules, users, prefilter, signals)
