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

import heapq
import functools
import re
from collections import defaultdict, deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator

import regex

from qwen_triage.engine.normalize import decode_line, normalize
from qwen_triage.rulepack.pack import LoadedRule, RulePack, compile_pattern
from qwen_triage.engine.prefilter import Prefilter, build_prefilter
from qwen_triage.engine.records import LineRecord
from qwen_triage.engine.multiline import HINTS_PATTERN, Assembly, continuing_family, family_of, may_span, may_span_raw
from qwen_triage.engine.unrecognised import SIGNALS, Collector, frame_file, is_exception_line, library_of
from qwen_triage.engine.origin import accepts
from qwen_triage.engine.sources import Block, LineMeta
from qwen_triage.rulepack.severity import Severity
from qwen_triage.rulepack.spec import RuleSpec

CONFIRM_TIMEOUT = 0.25  # seconds for one confirm call on one line
DEFER_MAX = 32  # deferred context lines kept per rule and input before they are settled
DEFER_MAX_LINE = 4096  # bytes: a longer context line is matched at once, not kept
STAGE_LOOKBACK = 256 * 1024  # bytes before a heartbeat searched for the stage it repeats in

def _to_bytes(text: str) -> int | str:
    """"24 GiB", "500MB", "16g" -> bytes (a bare number is bytes); the text when it is no size."""
    from qwen_triage.units import SizeError, parse_size

    try:
        return parse_size(text, bare=1)
    except SizeError:
        return text


def convert_fact(kind: str, value: str) -> object:
    """Typed fact from matched text; keeps the text when it does not convert.

    Numbers are bounded (:func:`qwen_triage.units.bounded_int`): a 400-digit
    "int" from a hostile line stays text instead of a huge or failing int().
    """
    from qwen_triage.units import bounded_int

    try:
        if kind == "int":
            number = bounded_int(value)
            return value if number is None else number
        if kind == "float":
            return float(value) if len(value) <= 64 else value
        if kind == "hex":
            number = bounded_int(value, 16, max_digits=32)
            return value if number is None else number
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
    pack: RulePack
    patterns: list[str]
    regexes: LazyRegexes
    rules: list[CompiledRule]
    users: list[list[tuple[int, str]]]  # pattern id -> [(rule index, role)]
    prefilter: Prefilter
    # pattern id -> what else it signals (engine.unrecognised): "frame", "exception", "error",
    # or "heartbeat"; a pattern can also be a rule's
    signals: dict[int, tuple[str, ...]]

    @functools.cached_property
    def context_uses(self) -> dict[int, tuple[tuple[int, tuple[int, ...] | None, int, int], ...]]:
        """Per context-only pattern, its uses: (rule index, the rule's other `all` parts or None for
        an `unless`, how many lines back a deferred line stays of use, the rule's window)."""
        out = {}
        for pid in self.context_only:
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
        matcher may defer it (:class:`_Deferred`) until some rule asks about it.
        """
        multiline = {p for r in self.rules if r.rule.match.multiline for p in (*r.any_ids, *r.all_ids)}
        return frozenset(
            pid for pid, users in enumerate(self.users)
            if users and pid not in self.signals and pid not in multiline
            and all(role != "any" for _ri, role in users)
        )

    @functools.cached_property
    def stage_re(self) -> re.Pattern[bytes] | None:
        """Every launch stage's patterns in one alternation, a named group per stage (raw bytes)."""
        stages = [st for st in self.pack.stages if st["patterns"]]
        if not stages:
            return None
        return re.compile("|".join(f"(?P<{st['id']}>{'|'.join(st['patterns'])})" for st in stages).encode())

    def benign_patterns(self) -> tuple["GuardedPattern", ...]:
        """The known-benign templates, compiled (a handful; compiled per scan, each under a timeout)."""
        return tuple(GuardedPattern(compile_pattern(p)) for p in self.pack.benign)

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
                    sources=frozenset(lr.rule.sources) or frozenset({"any"}),
                )
            )
        signals: dict[int, tuple[str, ...]] = {}
        kinds = [(kind, p) for kind, p in SIGNALS.items()]
        kinds += [("heartbeat", p) for p in pack.heartbeats]
        kinds.append(("span", HINTS_PATTERN))  # lines that may belong to a multi-line record
        for kind, p in kinds:
            key = pid(p)
            signals[key] = (*signals.get(key, ()), kind)
        users: list[list[tuple[int, str]]] = [[] for _ in patterns]
        for r in rules:
            for role, group in (("any", r.any_ids), ("all", r.all_ids), ("unless", r.unless_ids)):
                for p in dict.fromkeys(group):
                    users[p].append((r.index, role))
        regexes = LazyRegexes(patterns)
        multiline = frozenset(p for r in rules if r.rule.match.multiline for p in (*r.any_ids, *r.all_ids))
        prefilter = build_prefilter(patterns, engine, cache_dir, multiline)
        return cls(pack, patterns, regexes, rules, users, prefilter, signals)


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
    closed: bool = False  # vetoed or already given out


@dataclass
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


@dataclass(slots=True)
class _Deferred:
    """A candidate line of context-only patterns, kept raw until a rule asks about it.

    In a healthy log most candidate lines are context: NCCL's channel lines that an
    `all` rule needs only next to a rarer line, Ollama's GPU inventory that vetoes
    a rule which never fires. Decoding, normalising and confirming each of them cost
    most of a scan; kept raw, only the few a rule asks about are ever settled.
    """

    raw: bytes
    line: int
    meta: LineMeta | None
    truncated: bool
    source_name: str
    source_index: int
    rec: LineRecord | None = None
    hits: dict[int, regex.Match[str] | None] | None = None  # pattern id -> confirmed match, once asked

    @classmethod
    def of(cls, block: Block, index: int, line_no: int, raw: bytes, source_name: str,
           source_index: int) -> "_Deferred":
        meta = block.meta[index] if block.meta is not None else None
        return cls(raw, line_no, meta, line_no in block.truncated, source_name, source_index)

    def record(self) -> LineRecord:
        """The line normalised, once."""
        if self.rec is None:
            self.rec = _normalized(self.raw, self.source_name, self.line, self.source_index, self.truncated,
                                   self.meta)
        return self.rec


def _normalized(raw: bytes, source_name: str, line_no: int, source_index: int, truncated: bool,
                meta: LineMeta | None) -> LineRecord:
    return normalize(decode_line(raw), source_name, line_no, source_index=source_index, truncated=truncated,
                     preset=meta.apply if meta is not None else None)


@dataclass(slots=True)
class _Kept:
    """One rule's deferred lines in one input: (pattern id, line) oldest first, and each pattern's newest line."""

    lines: deque[tuple[int, _Deferred]] = field(default_factory=deque)
    newest: dict[int, int] = field(default_factory=dict)


@dataclass
class MatchStats:
    lines: int = 0
    bytes: int = 0
    candidates: int = 0
    confirmed: int = 0
    truncated: int = 0


def _next_line(data: bytes, start: int) -> int:
    end = data.find(b"\n", start)
    return end + 1 if end >= 0 else len(data)


class Matcher:
    """Feeds blocks (or single lines) through the compiled pack; yields findings."""

    def __init__(self, compiled: CompiledPack, timeout: float = CONFIRM_TIMEOUT, collector: Collector | None = None,
                 defer: bool = True):
        self.c = compiled
        # context-only lines kept raw until a rule asks (False: every candidate is matched at once; same findings)
        self._context_only = compiled.context_only if defer else frozenset()
        self._frame_only = compiled.frame_only if defer else frozenset()
        self.collector = collector  # error lines no rule matched go here
        self.timeout = timeout
        self.seq = 0
        self.stats = MatchStats()
        self.disabled_patterns: set[int] = set()
        self.disabled_rules: dict[int, DisabledRule] = {}
        # per (rule, source): last hit of each `all` pattern; last veto line
        self._all_state: dict[tuple[int, int], dict[int, tuple[LineRecord, dict[str, object]]]] = defaultdict(dict)
        self._last_veto: dict[tuple[int, int], int] = {}
        self._pending: dict[int, _PendingSet] = defaultdict(_PendingSet)  # source -> pending
        # per (rule, source): the lines of a `count` rule within its window
        self._counted: dict[tuple[int, int], deque[tuple[LineRecord, dict[str, object]]]] = {}
        self._row_rules: dict[tuple[int, int], CompiledRule] = {}  # (rule, table row) -> the rule as that row
        self._held: dict[int, tuple[LineRecord, set[int], Assembly]] = {}  # source -> a record awaiting more lines
        self._last_frame: dict[int, str] = {}  # source -> file of the latest traceback frame seen
        # source -> frame lines kept raw, newest last: only the newest real one before an exception counts
        self._frames: dict[int, deque[_Deferred]] = {}
        self._context: tuple[bytes, int] = (b"", 0)  # the block being matched and the current line's offset
        # per (rule, source): context lines not yet settled, oldest first, as (pattern id, line)
        self._deferred: dict[tuple[int, int], _Kept] = {}

    # -- input ---------------------------------------------------------------

    def feed_block(self, block: Block, source_name: str, source_index: int = 0) -> Iterator[Finding]:
        data = block.data
        self.stats.bytes += len(data)
        self.stats.truncated += len(block.truncated)
        cands = self.c.prefilter.candidates(data)
        # Candidate lines by the line their record starts on: a continuation line of a
        # multi-line record (the literal a rule keys on can sit on any of its lines)
        # is confirmed as part of the whole record, once.
        records: dict[int, tuple[int, set[int]]] = {}  # start offset -> (line index, pattern ids)
        recs: dict[int, LineRecord] = {}  # start offset -> the candidate's record, normalised once
        spanning: set[int] = set()  # candidates that may belong to a multi-line record
        cited: dict[int, LineRecord] = {}  # record start offset -> the candidate line its evidence cites
        deferrable: dict[int, bytes] = {}  # start offset -> raw line of a context-only candidate
        context_only = self._context_only
        span_only = self.c.span_only
        frame_only = self._frame_only
        block_may_span = may_span_raw(data)  # most blocks hold no tab, NUL or ESC at all: no line needs a look
        held = self._held.pop(source_index, None)
        consumed = 0
        if held is not None:
            consumed = self._assemble(held[2], block, 0, 0, source_name, source_index)
        index = 0
        prev = 0
        for start in sorted(cands):
            index += data.count(b"\n", prev, start)
            prev = start
            if index < consumed and held is not None:
                held[1].update(cands[start])  # a continuation of the record held from the last block
                continue
            line_pids = cands[start]
            if line_pids == span_only:
                continue  # a hint word and nothing else: no pattern points at this line
            end = data.find(b"\n", start)
            raw = data[start : end if end >= 0 else len(data)]
            if (line_pids <= context_only or line_pids == frame_only) and len(raw) <= DEFER_MAX_LINE \
                    and not (block_may_span and may_span_raw(raw)):
                deferrable[start] = raw  # normalised later, if ever
                records[start] = (index, line_pids)  # no earlier line merges into a line after it
                continue
            rec = recs[start] = self._record(block, index, raw, source_name, source_index)
            at = None
            if may_span(rec.message):
                spanning.add(start)
                at = self._record_start(block, start, index, rec.message, source_name, source_index)
            key, key_index = at if at is not None else (start, index)
            deferrable.pop(key, None)  # a record start is matched whole, now
            _, pids = records.setdefault(key, (key_index, set()))
            pids.update(cands[start])
            cited.setdefault(key, rec)  # evidence cites the record's first line a pattern pointed at
        if block.counted < 0:
            block.counted = index + data.count(b"\n", prev)  # the count went this far already
        nlines = block.nlines
        self.stats.lines += nlines if block.meta is None else len({m.line for m in block.meta})
        if held is not None:
            rec, pids, assembly = held
            rec.message = assembly.message
            rec.raised_by = rec.raised_by or assembly.raised_by
            if assembly.done or consumed < nlines:
                yield from self._on_line(rec, pids)
            else:
                self._held[source_index] = held  # every line of this block continued it: wait on
        for start in sorted(records):
            index, pids = records[start]
            raw = deferrable.get(start)
            if raw is not None:
                line_no = block.origin_line(index)
                if self._due(source_index, line_no):
                    yield from self._expire(source_index, line_no)
                if pids == frame_only:
                    self._keep_frame(raw, block, index, line_no, source_name, source_index)
                    continue
                if self._defer(pids, raw, block, index, line_no, source_name, source_index):
                    continue
            end = data.find(b"\n", start)
            rec = recs.get(start) or self._record(block, index, data[start : end if end >= 0 else len(data)],
                                                  source_name, source_index)
            yield from self._expire(source_index, rec.line)
            family = family_of(rec.message) if start in spanning or start not in recs and may_span(rec.message) else None
            if family is not None:
                assembly = Assembly(family, rec.message)
                self._assemble(assembly, block, index + 1, end + 1 if end >= 0 else len(data), source_name, source_index)
                shown = cited.get(start, rec)
                rec.line, rec.text, rec.truncated = shown.line, shown.text, shown.truncated
                rec.head_len = len(rec.message)
                rec.message = assembly.message
                rec.raised_by = rec.raised_by or assembly.raised_by
                if not assembly.done:  # the record may go on in the next block: wait for it
                    self._held[source_index] = (rec, pids, assembly)
                    continue
            self._context = (data, start)
            yield from self._on_line(rec, pids)
        self._context = (b"", 0)
        last_line = block.origin_line(max(nlines - 1, 0)) if nlines else block.first_line
        yield from self._expire(source_index, last_line)

    def _record_start(self, block: Block, start: int, index: int, message: str, source_name: str,
                      source_index: int) -> tuple[int, int] | None:
        """For a line that continues a multi-line record: where that record starts in this block.

        The earliest line within the family's reach whose record, assembled forward,
        takes this line in (an NVRM line can both start a message and continue one).
        """
        data = block.data
        family = continuing_family(message)
        if family is None:
            return None
        found = None
        pos, i = start, index
        for _ in range(family.max_lines):
            if pos == 0:
                break
            prev_start = data.rfind(b"\n", 0, pos - 1) + 1
            i -= 1
            head = self._record(block, i, data[prev_start : pos - 1], source_name, source_index).message
            pos = prev_start
            if family.starts.search(head):
                assembly = Assembly(family, head)
                taken = self._assemble(assembly, block, i + 1, _next_line(data, prev_start), source_name,
                                       source_index, stop_at=index)
                if taken >= index - i:
                    found = (prev_start, i)
                elif family.name != "nvrm":
                    break
            elif family.name == "nvrm" and not family.continues.search(head):
                break
        return found

    # -- deferred context lines ---------------------------------------------

    def _defer(self, pids: set[int], raw: bytes, block: Block, index: int, line_no: int, source_name: str,
               source_index: int) -> bool:
        """Keep a context-only candidate line raw when no rule needs it now; False: match it now.

        A rule needs it now when it has findings waiting out their veto window (an
        `unless` line may close them) or when every other `all` part of the rule has
        a hit or a kept line within the window (this line may complete it).
        """
        uses = self.c.context_uses
        pending = self._pending.get(source_index)
        for pid in pids:
            for ri, others, _reach, window in uses[pid]:
                if others is None:  # an `unless` use
                    if pending is not None and any(not q.closed for q in pending.by_rule.get(ri, ())):
                        return False
                elif self._all_may_complete(ri, others, window, source_index, line_no, pids):
                    return False
        self.stats.candidates += 1
        entry = _Deferred.of(block, index, line_no, raw, source_name, source_index)
        deferred = self._deferred
        for pid in pids:
            for ri, _others, reach, _window in uses[pid]:
                kept = deferred.get((ri, source_index))
                if kept is None:
                    kept = deferred[(ri, source_index)] = _Kept()
                lines = kept.lines
                lines.append((pid, entry))
                kept.newest[pid] = line_no
                while line_no - lines[0][1].line > reach:  # out of reach of any later line
                    lines.popleft()
                if len(lines) > DEFER_MAX:
                    self._settle(self.c.rules[ri], source_index)
        return True

    def _all_may_complete(self, ri: int, others: tuple[int, ...], window: int, source_index: int, line_no: int,
                          here: set[int]) -> bool:
        """Whether a hit on ``line_no`` could complete rule ``ri``'s `all`: its ``others`` parts are all near
        (on this line, among its pattern ids ``here``, or on a line within the window)."""
        state = self._all_state.get((ri, source_index))
        kept = self._deferred.get((ri, source_index))
        for other in others:
            if other in here:
                continue
            hit = state.get(other) if state is not None else None
            if hit is not None and line_no - hit[0].line <= window:
                continue
            newest = kept.newest.get(other) if kept is not None else None
            if newest is not None and line_no - newest <= window:
                continue
            return False
        return True

    def _keep_frame(self, raw: bytes, block: Block, index: int, line_no: int, source_name: str,
                    source_index: int) -> None:
        """A traceback frame line, kept raw: it names the library only if an exception line follows."""
        self.stats.candidates += 1
        frames = self._frames.get(source_index)
        if frames is None:
            frames = self._frames[source_index] = deque()
        frames.append(_Deferred.of(block, index, line_no, raw, source_name, source_index))
        if len(frames) > DEFER_MAX:
            self._settle_frames(source_index)

    def _settle_frames(self, source_index: int) -> None:
        """The newest kept frame line that really is one becomes the latest frame seen; the rest go."""
        frames = self._frames.pop(source_index, None)
        for entry in reversed(frames or ()):
            frame = frame_file(entry.record().message)
            if frame is not None:
                self._last_frame[source_index] = frame
                return

    def _deferred_hit(self, entry: _Deferred, pid: int) -> regex.Match[str] | None:
        """Settle one kept line for one pattern: normalised once, confirmed once per pattern."""
        if entry.hits is None:
            entry.hits = {}
        elif pid in entry.hits:
            return entry.hits[pid]
        m = None if pid in self.disabled_patterns else self._confirm(pid, entry.record())
        entry.hits[pid] = m
        return m

    def _settle(self, rule: CompiledRule, source_index: int) -> None:
        """Turn a rule's kept lines into what matching them at once would have left: its last veto, its `all` hits.

        Only the newest confirmed line of each pattern counts (a later hit replaces an
        earlier one), so they are settled newest first and the rest dropped unread.
        """
        kept = self._deferred.pop((rule.index, source_index), None)
        if kept is None:
            return
        key = (rule.index, source_index)
        unless = set(rule.unless_ids)
        todo = set(rule.all_ids) | unless
        state = self._all_state[key] if rule.all_ids else None
        for pid, entry in reversed(kept.lines):
            if pid not in todo:
                continue
            m = self._deferred_hit(entry, pid)
            if m is None:
                continue
            if pid in unless:
                self._last_veto[key] = max(self._last_veto.get(key, 0), entry.line)
                todo -= unless
            elif state is not None and self._where_ok(rule, entry.record(), m):
                if pid not in state or state[pid][0].line < entry.line:
                    state[pid] = (entry.record(), self._facts(rule, m))
                todo.discard(pid)
            if not todo:
                break

    def _record(self, block: Block, index: int, raw: bytes, source_name: str, source_index: int) -> LineRecord:
        line_no = block.origin_line(index)
        meta = block.meta[index] if block.meta is not None else None
        return _normalized(raw, source_name, line_no, source_index, line_no in block.truncated, meta)

    def _assemble(self, assembly: Assembly, block: Block, index: int, pos: int, source_name: str,
                  source_index: int, stop_at: int | None = None) -> int:
        """Offer the lines from byte ``pos`` (line ``index``) until the record is complete; lines taken."""
        data = block.data
        taken = 0
        while pos < len(data) and not assembly.done and (stop_at is None or index <= stop_at):
            end = data.find(b"\n", pos)
            raw = data[pos : end if end >= 0 else len(data)]
            message = self._record(block, index, raw, source_name, source_index).message
            if not assembly.offer(message):
                break
            taken += 1
            index += 1
            pos = end + 1 if end >= 0 else len(data)
        return taken

    def release_held(self, source_index: int | None = None) -> Iterator[Finding]:
        """Records still waiting for continuation lines are complete now (end of input, or a quiet input)."""
        keys = [source_index] if source_index is not None else list(self._held)
        for key in keys:
            held = self._held.pop(key, None)
            if held is not None:
                held[2].done = True
                yield from self._on_line(held[0], held[1])

    def finish(self, source_index: int | None = None) -> Iterator[Finding]:
        """End of a source (or all): held records complete; pending findings whose veto never came are final."""
        yield from self.release_held(source_index)
        keys = [source_index] if source_index is not None else list(self._pending)
        for key in keys:
            pending = self._pending.pop(key, None)
            if pending is None:
                continue
            for _until, _seq, p in sorted(pending.heap, key=lambda e: e[1]):
                if not p.closed and not self._vetoed(p.finding):
                    yield p.finding
        # A live input goes on after a settle: what kept lines leave (a veto, an `all` part) is kept as
        # matching them at once would have left it (each rule's newest ones only, so this is cheap).
        for ri, src in [k for k in self._deferred if source_index is None or k[1] == source_index]:
            self._settle(self.c.rules[ri], src)

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

    def _where_ok(self, rule: CompiledRule, rec: LineRecord, m: regex.Match[str] | None = None) -> bool:
        """The rule's `sources:` and `where` constraints on this record, matched as ``m``.

        Sources first (:func:`qwen_triage.engine.origin.accepts`: the system's own records
        only for rules that name them, a kernel match anchored where the kernel's message
        starts). A `where` constraint runs under the same timeout as a pattern; one that
        times out disables its rule (with a note naming it), as a pattern that times out does.
        """
        if m is not None and not accepts(rule.sources, rec, m.start(), m.end()):
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
        signals: list[str] = []
        for pid in sorted(pids):
            kinds = self.c.signals.get(pid)
            if kinds is not None:
                for kind in kinds:
                    if kind == "span":
                        continue
                    if kind == "heartbeat":
                        if self.collector is not None and self.c.regexes[pid].search(rec.message, timeout=self.timeout):
                            self.collector.heartbeat(rec, self._stage_before)
                    else:
                        signals.append(kind)
                if not self.c.users[pid]:
                    continue
            if pid in self.disabled_patterns:
                continue
            m = self._confirm(pid, rec)
            if m is not None:
                hits[pid] = m
        if "frame" in signals:
            frame = frame_file(rec.message)
            if frame is not None:
                self._last_frame[rec.source_index] = frame
                self._frames.pop(rec.source_index, None)  # kept ones are older
        elif rec.raised_by is None and (self._last_frame or self._frames) and is_exception_line(rec.message):
            self._settle_frames(rec.source_index)
            frame = self._last_frame.pop(rec.source_index, None)
            rec.raised_by = library_of(frame) if frame else None
        if signals and "frame" not in signals and self.collector is not None:
            if self._explained(hits, rec):
                self.collector.explained(rec)  # it may end a traceback the collector follows
            else:
                self.collector.signal(rec)
        if not hits:
            return
        self.stats.confirmed += 1
        src = rec.source_index
        fired: set[int] = set()
        # vetoes first, so a line that both matches and vetoes is vetoed
        for pid in hits:
            for ri, role in self.c.users[pid]:
                if role == "unless":
                    self._settle(self.c.rules[ri], src)
                    self._last_veto[(ri, src)] = rec.line
                    self._close_vetoed(ri, src)
        for pid, m in hits.items():
            for ri, role in self.c.users[pid]:
                if ri in self.disabled_rules or ri in fired or role == "unless":
                    continue
                rule = self.c.rules[ri]
                if not self._where_ok(rule, rec, m):
                    continue
                if role == "any" and rule.rule.match.count > 1:
                    fired.add(ri)
                    yield from self._count(rule, rec, self._facts(rule, m))
                elif role == "any":
                    fired.add(ri)
                    yield from self._fire(rule, [rec], self._facts(rule, m))
                else:  # all
                    self._settle(rule, src)
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

    def _stage_before(self) -> str | None:
        """The launch stage of the last stage line before the current one in this block (a hang's context).

        Looked up only when a heartbeat run starts: stage lines are common (NCCL INFO),
        and keeping them out of the prefilter keeps the scan fast.
        """
        data, start = self._context
        pattern = self.c.stage_re
        if pattern is None or not data:
            return None
        window = data[max(0, start - STAGE_LOOKBACK) : start]
        stages = {st["id"]: st for st in self.c.pack.stages}
        current: dict | None = None
        for m in pattern.finditer(window):  # launches move forward only, unless a stage is a fresh start
            stage = stages.get(m.lastgroup or "")
            if stage is not None and (current is None or stage.get("resets") or stage["rank"] >= current["rank"]):
                current = stage
        return current["id"] if current is not None else None

    def _explained(self, hits: dict[int, regex.Match[str]], rec: LineRecord) -> bool:
        """Whether a rule takes this line as evidence (a veto or a `where` that fails does not count)."""
        for pid in hits:
            for ri, role in self.c.users[pid]:
                if role != "unless" and ri not in self.disabled_rules and self._where_ok(self.c.rules[ri], rec, hits[pid]):
                    return True
        return False

    def _count(self, rule: CompiledRule, rec: LineRecord, facts: dict[str, object]) -> Iterator[Finding]:
        """A storm rule: fires when ``count`` matching lines fall within ``window`` lines, then counts anew."""
        match = rule.rule.match
        seen = self._counted.setdefault((rule.index, rec.source_index), deque(maxlen=match.count))
        seen.append((rec, facts))
        while seen and rec.line - seen[0][0].line >= match.window:
            seen.popleft()
        if len(seen) < match.count:
            return
        records = [r for r, _ in seen]
        merged: dict[str, object] = {}
        for _r, f in seen:
            for k, v in f.items():
                merged.setdefault(k, v)
        merged["lines_in_window"] = len(records)
        seen.clear()
        shown = records[:3] + records[-1:] if len(records) > 4 else records
        yield from self._fire(rule, shown, merged)

    def _as_row(self, rule: CompiledRule, facts: dict[str, object]) -> CompiledRule | None:
        """The rule as its table row for this finding's code (None: a code the table drops)."""
        table = rule.rule.table
        if table is None:
            return rule
        value = facts.get(table.key)
        row = table.row_for(value) if value is not None else None
        if row is None:
            return None if table.otherwise == "ignore" else rule
        key = (rule.index, table.rows.index(row))
        variant = self._row_rules.get(key)
        if variant is None:
            loaded = replace(rule.loaded, rule=rule.rule.for_row(row))
            variant = self._row_rules[key] = replace(rule, loaded=loaded)
        return variant

    def _fire(self, rule: CompiledRule, records: list[LineRecord], facts: dict[str, object]) -> Iterator[Finding]:
        as_row = self._as_row(rule, facts)
        if as_row is None:
            return
        rule = as_row
        self.seq += 1
        finding = Finding(rule=rule, records=records, facts=facts, seq=self.seq)
        if not rule.unless_ids:
            yield finding
            return
        if self._vetoed(finding):
            return
        last = records[-1].line
        self._pending[records[-1].source_index].add(rule.index, _Pending(finding, last + rule.rule.match.window))

    def _vetoed(self, f: Finding) -> bool:
        self._settle(f.rule, f.first.source_index)
        veto = self._last_veto.get((f.rule.index, f.first.source_index))
        if veto is None:
            return False
        match = f.rule.rule.match
        earliest = f.first.line if match.unless_after else f.first.line - match.window
        return earliest <= veto <= f.records[-1].line + match.window

    def _close_vetoed(self, rule_index: int, source_index: int) -> None:
        """A veto line arrived: the rule's pending findings it falls near are dropped now."""
        pending = self._pending.get(source_index)
        open_ = pending.by_rule.get(rule_index) if pending is not None else None
        if not open_:
            return
        keep = []
        for p in open_:
            if not p.closed and self._vetoed(p.finding):
                p.closed = True
            if not p.closed:
                keep.append(p)
        open_[:] = keep

    def _due(self, source_index: int, line_no: int) -> bool:
        """Whether some finding's veto window has passed by ``line_no`` (cheap: no generator per line)."""
        pending = self._pending.get(source_index)
        return bool(pending is not None and pending.heap and pending.heap[0][0] < line_no)

    def _expire(self, source_index: int, line_no: int) -> Iterator[Finding]:
        """Findings whose veto window has passed by ``line_no``, in the order they completed."""
        pending = self._pending.get(source_index)
        if not pending or not pending.heap:
            return
        due = []
        heap = pending.heap
        while heap and heap[0][0] < line_no:
            p = heapq.heappop(heap)[2]
            if not p.closed and not self._vetoed(p.finding):
                due.append(p)
            p.closed = True
        for p in sorted(due, key=lambda p: p.finding.seq):
            yield p.finding
