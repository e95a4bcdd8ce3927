"""The streaming matcher: blocks of lines in, findings out as soon as they are certain.

Blocks go through the compiled pack's prefilter (engine.compiled); only the
candidate lines are decoded, normalised and confirmed with ``regex`` under a
timeout (engine.confirm), and the confirmed hits drive the rules (engine.firing).
Findings come out at once for plain rules, once the veto window has passed for
rules with `unless` (engine.vetoes). Candidates that only give context are kept
raw until a rule asks (engine.deferred); a line of a multi-line record is
confirmed as part of the whole record (engine.block_records, engine.multiline).
This module is the loop that ties them together, line by line.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Protocol

from qwen_triage.engine.block_records import assemble, may_be_quoted_source, quoted_source, record_of, record_start
from qwen_triage.engine.compiled import CONFIRM_TIMEOUT, CompiledPack, CompiledRule
from qwen_triage.engine.confirm import Confirmer, DisabledRule
from qwen_triage.engine.deferred import DEFER_MAX, DEFER_MAX_LINE, DeferredContext
from qwen_triage.engine.facts import convert_fact, facts_of
from qwen_triage.engine.finding import Finding
from qwen_triage.engine.firing import Firing
from qwen_triage.engine.multiline import Assembly, family_of, may_span, may_span_raw
from qwen_triage.engine.origin import accepts
from qwen_triage.engine.records import SOURCE, LineRecord
from qwen_triage.engine.sources import Block
from qwen_triage.engine.unrecognised import TRACE_GAP, frame_file, is_exception_line, library_of
from qwen_triage.engine.vetoes import VetoWindows
from qwen_triage.rulepack.severity import Severity

if TYPE_CHECKING:  # annotations only: `regex` is imported where a pattern is compiled
    import regex

# Names other modules have long imported from here.
__all__ = ["CONFIRM_TIMEOUT", "DEFER_MAX", "CompiledPack", "CompiledRule", "DisabledRule", "Finding", "MatchStats",
           "Matcher", "convert_fact"]

STAGE_LOOKBACK = 256 * 1024  # bytes before a heartbeat searched for the stage it repeats in
# A traceback's source lines are indented by four: such a context line near a frame is matched at once, where
# it is known whether it is quoted code (block_records.quoted_source), as it would be with nothing kept
SOURCE_INDENT = b"    "


class Signals(Protocol):
    """Where the matcher sends the lines that may say something failed: engine.unrecognised's Collector, or a
    part's worker that records them for the scan to replay (engine.split)."""

    def signal(self, rec: LineRecord, parts_of: frozenset[str] | None = None) -> None:
        """A candidate line no rule took (a traceback's frame line too: where a cut traceback was raised), or only
        ``parts_of``: the `all` rules it is one part of (listed only where none of them completes)."""

    def explained(self, rec: LineRecord) -> None:
        """A candidate line a rule took."""

    def heartbeat(self, rec: LineRecord, stage_before: Callable[[], str | None]) -> None:
        """A line a stuck launch repeats; ``stage_before`` looks up the stage it repeats in."""

    def beating(self, source_index: int) -> bool:
        """Whether that input may be in a run of heartbeats (a ready line then matters: it ends the run)."""

    def ready(self, rec: LineRecord) -> None:
        """A line of a stage where the server is up (a shard ready, a worker healthy): a run of heartbeats ends."""


class Ranks(Protocol):
    """Where the matcher sends the records that carry a rank or a hang signal: engine.hang's HangTracker, or a
    part's worker that records them (engine.split)."""

    def observe(self, rec: LineRecord) -> None:
        """One such record."""

    def ras_line(self, rec: LineRecord) -> None:
        """A line of an NCCL RAS text report."""


Held = tuple[LineRecord, set[int], Assembly]
"""a multi-line record awaiting more lines from the next block: its record, pattern ids and assembly"""


@dataclass
class MatchStats:
    """What a matcher has read so far: the report's figures."""

    lines: int = 0
    bytes: int = 0
    candidates: int = 0  # lines the prefilter pointed at, kept ones included
    confirmed: int = 0
    truncated: int = 0


class Matcher:
    """Feeds blocks (or single lines) through the compiled pack; yields findings."""

    def __init__(self, compiled: CompiledPack, timeout: float = CONFIRM_TIMEOUT, collector: Signals | None = None,
                 defer: bool = True, hang: Ranks | None = None):
        self.c = compiled
        # context-only lines kept raw until a rule asks (False: every candidate is matched at once; same findings)
        self._context_only = compiled.context_only if defer else frozenset()
        self._context_or_ready = compiled.context_or_ready if defer else frozenset()
        self._frame_only = compiled.frame_only if defer else frozenset()
        self.collector = collector  # error lines no rule matched go here
        self.hang = hang  # what each rank of a distributed job did last (engine.hang)
        self.timeout = timeout
        self.stats = MatchStats()
        self.confirmer = Confirmer(compiled, timeout)
        self.vetoes = VetoWindows(settle=lambda rule, source_index: self.context.settle(rule, source_index))
        self.firing = Firing(self.vetoes)
        self.context = DeferredContext(compiled, self.confirmer, self.vetoes, self.firing.all_state)
        self._held: dict[int, Held] = {}  # source -> a record awaiting more lines
        self._position: tuple[bytes, int] = (b"", 0)  # the block being matched and the current line's offset

    @property
    def disabled_rules(self) -> dict[int, DisabledRule]:
        """Rules a pattern or `where` of which timed out: they match nothing more in this scan."""
        return self.confirmer.disabled_rules

    # -- input ---------------------------------------------------------------

    def feed_block(self, block: Block, source_name: str, source_index: int = 0) -> Iterator[Finding]:
        """One block of whole lines of an input: the findings it completes, in order."""
        data = block.data
        self.stats.bytes += len(data)
        self.stats.truncated += len(block.truncated)
        self.context.settle_unsettled()
        held = self._held.pop(source_index, None)
        consumed = 0
        if held is not None:
            consumed = assemble(held[2], block, 0, 0, source_name, source_index)
        records, recs, spanning, cited, deferrable, quiet_lines = self._gather(block, held, consumed, source_name,
                                                                               source_index)
        nlines = block.nlines
        self.stats.lines += nlines if block.meta is None else len({m.line for m in block.meta})
        if held is not None:
            rec, pids, assembly = held
            rec.message = assembly.message
            rec.raised_by = rec.raised_by or assembly.raised_by
            rec.raised_in = rec.raised_in or assembly.raised_in
            if assembly.done or consumed < nlines:
                yield from self._on_line(rec, self._joined_pids(rec, pids, assembly))
            else:
                self._held[source_index] = held  # every line of this block continued it: wait on
        # the quiet context lines: (line number, index, offset, pattern ids), in order; only their veto-window
        # expiries happen where they stand (engine.deferred, "context in bulk")
        quiet_list = [(block.origin_line(i), i, start, pids) for start, (i, pids) in quiet_lines.items()]
        self.stats.candidates += len(quiet_list)
        yield from self._match_records(block, records, recs, deferrable, spanning, cited, source_name, source_index,
                                       quiet_list)
        self._position = (b"", 0)
        if quiet_list:
            self.context.settle_block(quiet_list, block, source_name, source_index)
        last_line = block.origin_line(max(nlines - 1, 0)) if nlines else block.first_line
        yield from self.vetoes.expire(source_index, last_line)

    def _gather(self, block: Block, held: Held | None, consumed: int, source_name: str, source_index: int) -> tuple[
            dict[int, tuple[int, set[int]]], dict[int, LineRecord], set[int], dict[int, LineRecord], dict[int, bytes],
            dict[int, tuple[int, set[int]]]]:
        """The block's candidate lines (the prefilter's), gathered by the record they belong to: ``records`` (start
        offset -> (line index, pattern ids)), ``recs`` (the lines normalised now), ``spanning`` (lines that may
        belong to a multi-line record), ``cited`` (the line a record's evidence cites), ``deferrable`` (context-only
        lines kept raw) and ``quiet_lines`` (context lines settled with the block). The first ``consumed`` lines
        continue the ``held`` record."""
        data = block.data
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
        quiet: set[int] | None = None  # the block's context patterns no rule can use in it (engine.deferred)
        quiet_lines: dict[int, tuple[int, set[int]]] = {}  # start offset -> (line index, pattern ids)
        block_may_span = may_span_raw(data)  # most blocks hold no tab, NUL or ESC at all: no line needs a look
        # a serving-stage line matters only after heartbeats (it ends their run): before any, it is what it was
        beating = self.collector is not None and self.collector.beating(source_index)
        beat_pids, ready_pids, ready_pure = self.c.heartbeat_pids, self.c.ready_pids, self.c.ready_pure
        index = 0
        prev = 0
        for start in sorted(cands):
            index += data.count(b"\n", prev, start)
            prev = start
            if index < consumed and held is not None and not held[2].family.forward:
                held[1].update(cands[start])  # a continuation of the record held from the last block
                continue
            line_pids = cands[start]
            if line_pids == span_only:
                continue  # a hint word and nothing else: no pattern points at this line
            deferred_pids = context_only
            if not beating:
                if line_pids & beat_pids:
                    beating = True
                elif line_pids & ready_pids:
                    line_pids = line_pids - ready_pure
                    if not line_pids:
                        continue
                    deferred_pids = self._context_or_ready
            end = data.find(b"\n", start)
            if end < 0:
                end = len(data)
            if (line_pids <= deferred_pids or line_pids == frame_only) and end - start <= DEFER_MAX_LINE \
                    and not (block_may_span and may_span_raw(data[start:end])) \
                    and not (line_pids != frame_only and data.find(SOURCE_INDENT, start, end) >= 0
                             and may_be_quoted_source(data, start)):
                if line_pids != frame_only:
                    if quiet is None:  # every pattern on a candidate line of the block (and the held record)
                        quiet = self.context.quiet_patterns(set().union(*cands.values(), held[1] if held else ()),
                                                            source_index)
                    if line_pids <= quiet:
                        quiet_lines[start] = (index, line_pids)  # settled with the block's others, at its end
                        continue
                deferrable[start] = data[start:end]  # normalised later, if ever
                records[start] = (index, line_pids)  # no earlier line merges into a line after it
                continue
            rec = recs[start] = record_of(block, index, data[start:end], source_name, source_index)
            at = None
            if may_span(rec.message):
                spanning.add(start)
                at = record_start(block, start, index, rec.message, source_name, source_index)
            key, key_index = at if at is not None else (start, index)
            deferrable.pop(key, None)  # a record start is matched whole, now
            if key in quiet_lines:
                records[key] = quiet_lines.pop(key)
            _, pids = records.setdefault(key, (key_index, set()))
            pids.update(line_pids)
            cited.setdefault(key, rec)  # evidence cites the record's first line a pattern pointed at
        if block.counted < 0:
            block.counted = index + data.count(b"\n", prev)  # the count went this far already
        return records, recs, spanning, cited, deferrable, quiet_lines

    def _match_records(self, block: Block, records: dict[int, tuple[int, set[int]]], recs: dict[int, LineRecord],
                       deferrable: dict[int, bytes], spanning: set[int], cited: dict[int, LineRecord],
                       source_name: str, source_index: int,
                       quiet: list[tuple[int, int, int, set[int]]]) -> Iterator[Finding]:
        """The block's candidate records, in order: a context-only line kept raw when its rules can wait
        (``deferrable``), any other normalised (once: ``recs``), a multi-line record assembled (held for the next
        block when it may go on), each matched against its patterns' rules (``records``: start offset -> (line
        index, pattern ids)). A veto's window is closed as the lines pass it, the ``quiet`` ones' too (context
        lines settled with their block: (line number, index, offset, pattern ids))."""
        data = block.data
        vetoes, defer, frame_only = self.vetoes, self.context.defer, self._frame_only
        quiet_starts = [q[2] for q in quiet]
        quiet_nos = [q[0] for q in quiet]
        passed = 0  # quiet lines before the record at hand
        for start in sorted(records):
            if quiet:
                upto = bisect_left(quiet_starts, start, passed)
                yield from self._expire_among(source_index, quiet_nos, passed, upto)
                passed = upto
            index, pids = records[start]
            raw = deferrable.get(start)
            if raw is not None:
                line_no = block.origin_line(index)
                if vetoes.due(source_index, line_no):
                    yield from vetoes.expire(source_index, line_no)
                if pids == frame_only:
                    self.stats.candidates += 1
                    self.context.keep_frame(raw, block, index, line_no, source_name, source_index)
                    continue
                if defer(pids, raw, block, index, line_no, source_name, source_index):
                    self.stats.candidates += 1
                    continue
            end = data.find(b"\n", start)
            rec = recs.get(start)
            if rec is None:
                raw = data[start : end if end >= 0 else len(data)] if raw is None else raw
                rec = record_of(block, index, raw, source_name, source_index)
            if rec.quoted is None and quoted_source(block, start, index, rec.message, source_name, source_index):
                rec.quoted = SOURCE  # a traceback's quoted code: no origin of its own (engine.origin)
            yield from vetoes.expire(source_index, rec.line)
            family = family_of(rec.message) if start in spanning or start not in recs and may_span(rec.message) else None
            if family is not None:
                assembly = Assembly(family, rec.message)
                assemble(assembly, block, index + 1, end + 1 if end >= 0 else len(data), source_name, source_index)
                shown = cited.get(start, rec)
                rec.line, rec.text, rec.truncated = shown.line, shown.text, shown.truncated
                rec.head_len = len(rec.message)
                rec.message = assembly.message
                rec.raised_by = rec.raised_by or assembly.raised_by
                rec.raised_in = rec.raised_in or assembly.raised_in
                if not assembly.done:  # the record may go on in the next block: wait for it
                    self._held[source_index] = (rec, pids, assembly)
                    continue
                pids = self._joined_pids(rec, pids, assembly)
            self._position = (data, start)
            yield from self._on_line(rec, pids)
        if quiet:
            yield from self._expire_among(source_index, quiet_nos, passed, len(quiet_nos))

    def _expire_among(self, source_index: int, line_nos: list[int], lo: int, hi: int) -> Iterator[Finding]:
        """The veto-window expiries a pass over the lines ``line_nos[lo:hi]`` would give, one at each line where
        some finding's window has passed: found by bisection, not line by line."""
        pending = self.vetoes.pending.get(source_index)
        while lo < hi and pending is not None and pending.heap:
            k = bisect_right(line_nos, pending.heap[0][0], lo, hi)
            if k >= hi:
                return
            yield from self.vetoes.expire(source_index, line_nos[k])
            lo = k + 1

    def _joined_pids(self, rec: LineRecord, pids: set[int], assembly: Assembly) -> set[int]:
        """The patterns a completed record is matched against: its lines' own, and for a family that cuts text
        anywhere (a table cell, engine.multiline) those the joined message holds where no raw line held it whole."""
        if not assembly.family.rescan or not assembly.taken:
            return pids
        return pids | self.c.prefilter.candidates(rec.message.encode("utf-8", "replace")).get(0, set())

    def release_held(self, source_index: int | None = None, prompt_only: bool = False) -> Iterator[Finding]:
        """Records still waiting for continuation lines are complete now (end of input, or a quiet input).
        ``prompt_only``: only records of a family written in one go (engine.multiline: a kernel message), after a
        short pause; the others wait for the long one."""
        keys = [source_index] if source_index is not None else list(self._held)
        for key in keys:
            if prompt_only and (key not in self._held or not self._held[key][2].family.prompt):
                continue
            held = self._held.pop(key, None)
            if held is not None:
                self.context.settle_unsettled()
                held[2].done = True
                yield from self._on_line(held[0], self._joined_pids(*held))

    def finish(self, source_index: int | None = None, ended: bool = False) -> Iterator[Finding]:
        """End of a source (or all): held records complete; pending findings whose veto never came are final.

        ``ended``: the source is read to its end and never fed again (a saved file), so its kept context
        lines are dropped unread: no rule can ask about them any more, and a healthy log's scan then
        confirms nothing at all (nor imports the `regex` module to do it).
        """
        yield from self.release_held(source_index)
        yield from self.vetoes.finish(source_index)
        if ended:
            self.context.drop_source(source_index)
            return
        # A live input goes on after a settle: what kept lines leave (a veto, an `all` part) is kept as
        # matching them at once would have left it (each rule's newest ones only, so this is cheap).
        self.context.settle_unsettled()
        self.context.settle_source(source_index)

    def boundary_state(self, origin: int) -> tuple[object, ...]:
        """Everything of this matcher that can still change what it finds from line ``origin`` on (the next line
        it will be given), as plain data with lines counted from ``origin``: two matchers that began reading an
        input at different places (engine.split: a part's worker starts a little before its part) find the same
        from there on when their states are equal. The records held for continuation lines, the `all`, storm and
        veto windows (engine.firing, engine.vetoes), the frame an exception line would take, what timed out.
        Nothing older than the longest window or gap is kept alive: the state is bounded by what the input says
        near that line (a frame 2000 lines before an exception line is not its traceback's).

        Kept context lines are settled first, as a live input's are when it pauses (:meth:`finish`): settling
        leaves what matching them at once would have, so it changes nothing found, and then what they would
        leave is compared too.
        """
        self.context.settle_unsettled()
        self.context.settle_source()
        held = tuple((src, rec.state(origin), tuple(sorted(pids)),
                      (assembly.family.name, assembly.message, assembly.taken, assembly.done, assembly.raised_by,
                       assembly.raised_in))
                     for src, (rec, pids, assembly) in sorted(self._held.items()))
        rules = self.c.rules
        return (held, self.firing.state(origin, rules), self.vetoes.state(origin, rules, self.firing.seq),
                self.context.frame_state(origin), tuple(sorted(self.confirmer.disabled_patterns)),
                tuple(sorted(self.confirmer.disabled_rules)))

    # -- rules ---------------------------------------------------------------

    def _on_line(self, rec: LineRecord, pids: set[int]) -> Iterator[Finding]:
        self.stats.candidates += 1
        confirmer, context = self.confirmer, self.context
        hits: dict[int, regex.Match[str]] = {}
        signals: list[str] = []
        hang = ras = False
        for pid in sorted(pids):
            kinds = self.c.signals.get(pid)
            if kinds is not None:
                for kind in kinds:
                    if kind in ("span", "starts"):
                        continue
                    if kind == "hang":
                        hang = True
                        continue
                    if kind == "ras":
                        ras = True
                        continue
                    if kind == "heartbeat":  # on the line as printed, as the stage patterns are
                        if self.collector is not None and self.c.regexes[pid].search(rec.text, timeout=self.timeout):
                            self.collector.heartbeat(rec, self._stage_before)
                    elif kind == "ready":  # confirmed only after heartbeats: a healthy log's own ready line costs nothing
                        if self.collector is not None and self.collector.beating(rec.source_index) \
                                and self.c.regexes[pid].search(rec.text, timeout=self.timeout):
                            self.collector.ready(rec)
                    else:
                        signals.append(kind)
                if not self.c.users[pid]:
                    continue
            if pid in confirmer.disabled_patterns:
                continue
            m = confirmer.confirm(pid, rec)
            if m is not None:
                hits[pid] = m
        if self.hang is not None and (hang or rec.rank is not None or rec.local_rank is not None):
            self.hang.observe(rec)
        if self.hang is not None and ras:
            self.hang.ras_line(rec)
        if "frame" in signals:
            frame = frame_file(rec.message)
            if frame is not None:
                context.last_frame[rec.source_index] = (frame, rec.line)
                context.frames.pop(rec.source_index, None)  # kept ones are older
                if self.collector is not None:
                    self.collector.signal(rec)  # where a traceback the log cuts short was raised
        elif rec.raised_by is None and (context.last_frame or context.frames) and is_exception_line(rec.message):
            context.settle_frames(rec.source_index)
            seen = context.last_frame.pop(rec.source_index, None)
            # a frame further back than a traceback's lines lie apart (unrecognised.TRACE_GAP) is another's
            frame = seen[0] if seen is not None and rec.line - seen[1] <= TRACE_GAP else None
            rec.raised_by = library_of(frame) if frame else None
            rec.raised_in = frame
        if signals and "frame" not in signals and self.collector is not None:
            explained, parts_of = self._takers(hits, rec)
            if explained:
                self.collector.explained(rec)  # it may end a traceback the collector follows
            else:
                self.collector.signal(rec, parts_of)
        if not hits:
            return
        self.stats.confirmed += 1
        yield from self._fire(rec, hits)

    def _fire(self, rec: LineRecord, hits: dict[int, regex.Match[str]]) -> Iterator[Finding]:
        """The rules of a record's confirmed patterns: vetoes first (a line that both matches and vetoes is
        vetoed), then each rule once — at once, as a storm's count, or as a part of an `all` rule —, and the
        structure rules (floors) only when no rule that speaks fired."""
        confirmer, context, firing = self.confirmer, self.context, self.firing
        src = rec.source_index
        fired: set[int] = set()
        floors_yield = True  # until a rule that is not a structure rule matches this record
        floors: list[tuple[CompiledRule, regex.Match[str]]] = []  # structure rules, fired only if no other rule is
        # vetoes first, so a line that both matches and vetoes is vetoed
        for pid in hits:
            for ri, role in self.c.users[pid]:
                if role == "unless" and (rec.quoted is None or accepts(self.c.rules[ri].sources, rec,
                                                                        hits[pid].start(), hits[pid].end())):
                    context.settle(self.c.rules[ri], src)
                    self.vetoes.veto(ri, src, rec.line)
        for pid, m in hits.items():
            for ri, role in self.c.users[pid]:
                if ri in confirmer.disabled_rules or ri in fired or role == "unless":
                    continue
                rule = self.c.rules[ri]
                if not confirmer.where_ok(rule, rec, m):
                    continue
                if rule.rule.floor and role == "any" and rule.rule.match.count == 1:
                    fired.add(ri)
                    floors.append((rule, m))
                    continue
                # a sentence rule that fires here (a storm or an `all` rule only once complete) outranks the floor
                speaks = rule.rule.severity is not Severity.info
                if role == "any" and rule.rule.match.count > 1:
                    fired.add(ri)
                    for finding in firing.count(rule, rec, facts_of(rule.rule, m)):
                        floors_yield = floors_yield and not speaks
                        yield finding
                elif role == "any":
                    fired.add(ri)
                    floors_yield = floors_yield and not speaks
                    yield from firing.fire(rule, [rec], facts_of(rule.rule, m))
                else:  # all
                    context.settle(rule, src)
                    parts = firing.all_part(rule, pid, rec, facts_of(rule.rule, m))
                    if parts is not None:
                        fired.add(ri)
                        floors_yield = floors_yield and not speaks
                        yield from firing.fire_parts(rule, parts)
        if floors and floors_yield:
            for rule, m in floors:
                yield from firing.fire(rule, [rec], facts_of(rule.rule, m))

    def _stage_before(self) -> str | None:
        """The launch stage of the last stage line before the current one in this block (a hang's context).

        Looked up only when a heartbeat run starts: stage lines are common (NCCL INFO),
        and keeping them out of the prefilter keeps the scan fast.
        """
        data, start = self._position
        ladder = self.c.stage_ladder
        if ladder is None or not data:
            return None
        return ladder.last(data[max(0, start - STAGE_LOOKBACK) : start])

    def _takers(self, hits: dict[int, regex.Match[str]], rec: LineRecord) -> tuple[bool, frozenset[str] | None]:
        """Whether a rule takes this line as evidence (a veto or a `where` that fails does not count); if only as one
        part of `all` rules, the ids of those rules instead: such a rule may never complete (its other part is not
        in the log), and the line is then an error no rule explains (Collector.ordered decides at the end)."""
        parts_of: set[str] | None = None  # made only for a line that is an `all` part (the matcher's per-line path)
        for pid in hits:
            for ri, role in self.c.users[pid]:
                if role != "unless" and ri not in self.confirmer.disabled_rules \
                        and self.confirmer.where_ok(self.c.rules[ri], rec, hits[pid]) \
                        and self._table_keeps(self.c.rules[ri], hits[pid]):
                    if role != "all":
                        return True, None
                    if parts_of is None:
                        parts_of = set()
                    parts_of.add(self.c.rules[ri].rule.id)
        return False, frozenset(parts_of) if parts_of else None

    @staticmethod
    def _table_keeps(rule: CompiledRule, m: regex.Match[str]) -> bool:
        """Whether the rule's table gives a finding for the code this match captured: a table that drops codes it
        does not list (`otherwise: ignore`, a family of code-table rows) does not explain an error line with
        another code (``[Errno 101] Network is unreachable`` stays an error no rule explains)."""
        table = rule.rule.table
        if table is None or table.otherwise != "ignore":
            return True
        value = facts_of(rule.rule, m).get(table.key)
        return value is not None and table.row_for(value) is not None
