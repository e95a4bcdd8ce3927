"""Context lines kept raw: candidates that only an `all` part or an `unless` veto could use.

In a healthy log most candidate lines are context: NCCL's channel lines that an
`all` rule needs only next to a rarer line, Ollama's GPU inventory that vetoes
a rule which never fires, traceback frames with no exception after them.
Decoding, normalising and confirming each of them cost most of a scan; kept raw
(per rule and input, a few dozen at most), only the few a rule asks about are
ever settled, and settling leaves exactly what matching them at once would have.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Iterator

from qwen_triage.engine.block_records import normalized
from qwen_triage.engine.compiled import CompiledPack, CompiledRule
from qwen_triage.engine.confirm import Confirmer
from qwen_triage.engine.facts import facts_of
from qwen_triage.engine.records import LineRecord
from qwen_triage.engine.sources import Block, LineMeta
from qwen_triage.engine.unrecognised import TRACE_GAP, frame_file
from qwen_triage.engine.vetoes import VetoWindows

if TYPE_CHECKING:  # annotations only: `regex` is imported where a pattern is compiled
    import regex

DEFER_MAX = 32  # deferred context lines kept per rule and input before they are settled
DEFER_MAX_LINE = 4096  # bytes: a longer context line is matched at once, not kept

AllState = dict[tuple[int, int], dict[int, tuple[LineRecord, dict[str, object]]]]


@dataclass(slots=True)
class _Deferred:
    """A candidate line of context-only patterns, kept raw until a rule asks about it."""

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
            self.rec = normalized(self.raw, self.source_name, self.line, self.source_index, self.truncated,
                                  self.meta)
        return self.rec


@dataclass(slots=True)
class _Kept:
    """One rule's deferred lines in one input: (pattern id, line) oldest first, and each pattern's newest line."""

    lines: deque[tuple[int, _Deferred]] = field(default_factory=deque)
    newest: dict[int, int] = field(default_factory=dict)


class DeferredContext:
    """The kept context lines of every rule and input, and the traceback frames kept the same way.

    ``all_state`` (per (rule, source): the latest hit of each `all` part) and ``vetoes``
    are the matcher's: settling writes into them what matching at once would have.
    """

    def __init__(self, compiled: CompiledPack, confirmer: Confirmer, vetoes: VetoWindows, all_state: AllState):
        self.c = compiled
        self.confirmer = confirmer
        self.vetoes = vetoes
        self.all_state = all_state
        self.kept: dict[tuple[int, int], _Kept] = {}  # per (rule, source), oldest first
        # source -> file and line of the latest traceback frame seen (one TRACE_GAP lines before an exception line
        # is another traceback's: engine.matcher)
        self.last_frame: dict[int, tuple[str, int]] = {}
        # source -> frame lines kept raw, newest last: only the newest real one before an exception counts
        self.frames: dict[int, deque[_Deferred]] = {}
        # the last block's quiet context lines, settled when the matcher next reads its state (settle_block)
        self.unsettled: list[tuple[list[tuple[int, int, int, set[int]]], Block, str, int]] = []

    def defer(self, pids: set[int], raw: bytes, block: Block, index: int, line_no: int, source_name: str,
              source_index: int) -> bool:
        """Keep a context-only candidate line raw when no rule needs it now; False: match it now.

        A rule needs it now when it has findings waiting out their veto window (an
        `unless` line may close them) or when every other `all` part of the rule has
        a hit or a kept line within the window (this line may complete it).

        Called for most candidate lines of a healthy log, so lookups are hoisted out of
        the loops and the common answer (nothing near: keep it) costs a few dict probes.
        """
        uses = self.c.context_uses
        kept_by_rule = self.kept
        pending = self.vetoes.pending.get(source_index)
        waiting = pending.by_rule if pending is not None else None
        all_state = self.all_state
        for pid in pids:
            for ri, others, _reach, window in uses[pid]:
                if others is None:  # an `unless` use: findings a veto may still close?
                    open_ = waiting.get(ri) if waiting else None
                    if open_ and any(not q.closed for q in open_):
                        return False
                    continue
                key = (ri, source_index)
                state = all_state.get(key)
                kept = kept_by_rule.get(key)
                if (state or kept) and self._all_may_complete(others, window, state, kept, line_no, pids):
                    return False
                if not state and not kept and all(other in pids for other in others):
                    return False  # every other part is on this very line
        meta = block.meta[index] if block.meta is not None else None
        entry = _Deferred(raw, line_no, meta, line_no in block.truncated, source_name, source_index)
        for pid in pids:
            for ri, _others, reach, _window in uses[pid]:
                key = (ri, source_index)
                kept = kept_by_rule.get(key)
                if kept is None:
                    kept = kept_by_rule[key] = _Kept()
                lines = kept.lines
                lines.append((pid, entry))
                kept.newest[pid] = line_no
                while line_no - lines[0][1].line > reach:  # out of reach of any later line
                    lines.popleft()
                if len(lines) > DEFER_MAX:
                    self.settle(self.c.rules[ri], source_index)
        return True

    @staticmethod
    def _all_may_complete(others: tuple[int, ...], window: int, state: dict | None, kept: _Kept | None,
                          line_no: int, here: set[int]) -> bool:
        """Whether a hit on ``line_no`` could complete an `all` rule: its ``others`` parts are all near (on
        this line, among its pattern ids ``here``, or a hit in ``state`` or a kept line within the window)."""
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

    def keep_frame(self, raw: bytes, block: Block, index: int, line_no: int, source_name: str,
                   source_index: int) -> None:
        """A traceback frame line, kept raw: it names the library only if an exception line follows."""
        frames = self.frames.get(source_index)
        if frames is None:
            frames = self.frames[source_index] = deque()
        frames.append(_Deferred.of(block, index, line_no, raw, source_name, source_index))
        if len(frames) > DEFER_MAX:
            self.settle_frames(source_index)

    def settle_frames(self, source_index: int) -> None:
        """The newest kept frame line that really is one becomes the latest frame seen; the rest go."""
        frames = self.frames.pop(source_index, None)
        for entry in reversed(frames or ()):
            frame = frame_file(entry.record().message)
            if frame is not None:
                self.last_frame[source_index] = (frame, entry.line)
                return

    def frame_state(self, origin: int) -> tuple[tuple[int, str, int], ...]:
        """The frame each input's next exception line could be raised in (the newest kept line that really is a
        frame, else the latest seen: :meth:`settle_frames`), while one from line ``origin`` on could still take it,
        as plain data with its line counted from ``origin`` (engine.split compares two scans' so)."""
        out = []
        for src in sorted(set(self.last_frame) | set(self.frames)):
            seen = next(((f, entry.line) for entry in reversed(self.frames.get(src, ()))
                         if (f := frame_file(entry.record().message)) is not None), self.last_frame.get(src))
            if seen is not None and seen[1] >= origin - TRACE_GAP:
                out.append((src, seen[0], seen[1] - origin))
        return tuple(out)

    def _hit(self, entry: _Deferred, pid: int) -> regex.Match[str] | None:
        """Settle one kept line for one pattern: normalised once, confirmed once per pattern."""
        if entry.hits is None:
            entry.hits = {}
        elif pid in entry.hits:
            return entry.hits[pid]
        m = None if pid in self.confirmer.disabled_patterns else self.confirmer.confirm(pid, entry.record())
        entry.hits[pid] = m
        return m

    def settle(self, rule: CompiledRule, source_index: int) -> None:
        """Turn a rule's kept lines into what matching them at once would have left: its last veto, its `all` hits.

        Only the newest confirmed line of each pattern counts (a later hit replaces an
        earlier one), so they are settled newest first and the rest dropped unread.
        """
        kept = self.kept.pop((rule.index, source_index), None)
        if kept is not None:
            self._settle_newest_first(rule, source_index, reversed(kept.lines))

    def _settle_newest_first(self, rule: CompiledRule, source_index: int,
                             lines: Iterable[tuple[int, _Deferred]]) -> None:
        """The rule's last veto and newest `all` hits from ``lines`` ((pattern id, line), newest first): each
        pattern's newest confirmed line only, the rest unread."""
        key = (rule.index, source_index)
        unless = set(rule.unless_ids)
        todo = set(rule.all_ids) | unless
        state = self.all_state[key] if rule.all_ids else None
        last_veto = self.vetoes.last
        for pid, entry in lines:
            if pid not in todo:
                continue
            m = self._hit(entry, pid)
            if m is None:
                continue
            if pid in unless:
                last_veto[key] = max(last_veto.get(key, 0), entry.line)
                todo -= unless
            elif state is not None and self.confirmer.where_ok(rule, entry.record(), m):
                if pid not in state or state[pid][0].line < entry.line:
                    state[pid] = (entry.record(), facts_of(rule.rule, m))
                todo.discard(pid)
            if not todo:
                break

    # -- context in bulk ----------------------------------------------------------------------------
    #
    # In a healthy log the rules most context lines serve cannot fire anywhere near them: a veto with
    # no finding waiting for it, an `all` part whose other parts are nowhere in sight. For such a block
    # defer() would keep every one of those lines and settle only the newest, so the matcher skips the
    # per-line work (matcher.feed_block) and settles the block's newest lines once, at its end.

    def quiet_patterns(self, present: set[int], source_index: int) -> set[int]:
        """The context patterns of a block of ``source_index`` whose candidate lines hold the patterns ``present``
        that serve only rules which can neither fire nor wait on a veto in it: defer() would keep their lines."""
        silent: dict[int, bool] = {}
        out = set()
        for pid in present & self.c.context_or_ready:
            for ri, _role in self.c.users[pid]:
                if ri not in silent:
                    silent[ri] = self._silent(self.c.rules[ri], present, source_index)
                if not silent[ri]:
                    break
            else:
                out.add(pid)
        return out

    def _silent(self, rule: CompiledRule, present: set[int], source_index: int) -> bool:
        """No finding of ``rule`` waits out its veto window now, and none can come in this block: none of its
        `any` patterns is on a line of it, and some `all` part is neither on one nor held (a hit or a kept
        line): a part that is nowhere cannot be near."""
        if self.vetoes.waiting(rule.index, source_index) or not present.isdisjoint(rule.any_ids):
            return False
        if not rule.all_ids:
            return True
        key = (rule.index, source_index)
        state = self.all_state.get(key)
        kept = self.kept.get(key)
        return any(q not in present and not (state and q in state) and not (kept and q in kept.newest)
                   for q in rule.all_ids)

    def settle_block(self, lines: list[tuple[int, int, int, set[int]]], block: Block, source_name: str,
                     source_index: int) -> None:
        """The quiet context lines of a block ((line number, index, offset, pattern ids), in order), settled
        together: what defer() keeping them and settle() reading them later would leave.

        Not now: their rules cannot fire in this block, so nothing reads what settling writes before the
        matcher's next call (:meth:`settle_unsettled`), and an input that ends there drops them unread
        (:meth:`drop_source`): a small healthy log confirms nothing.
        """
        if lines:
            self.unsettled.append((lines, block, source_name, source_index))

    def settle_unsettled(self) -> None:
        """Settle the quiet lines :meth:`settle_block` put off: the matcher is about to read its state."""
        while self.unsettled:
            self._settle_block(*self.unsettled.pop(0))

    def _settle_block(self, lines: list[tuple[int, int, int, set[int]]], block: Block, source_name: str,
                      source_index: int) -> None:
        """Each rule's newest lines among ``lines``: only those within the rule's reach of the last one can still
        matter to it (later findings lie beyond them)."""
        rules: dict[int, set[int]] = {}
        for pid in set().union(*(pids for _line, _index, _start, pids in lines)):
            for ri, _role in self.c.users[pid]:
                rules.setdefault(ri, set()).add(pid)
        last = lines[-1][0]
        entries: dict[int, _Deferred] = {}  # one normalised record per line, whichever rule reads it
        data = block.data

        def newest_first(pids: set[int], reach: int) -> Iterator[tuple[int, _Deferred]]:
            for line_no, index, start, line_pids in reversed(lines):
                if last - line_no > reach:
                    return
                here = pids & line_pids
                if not here:
                    continue
                entry = entries.get(index)
                if entry is None:
                    end = data.find(b"\n", start)
                    raw = data[start : end if end >= 0 else len(data)]
                    entry = entries[index] = _Deferred.of(block, index, line_no, raw, source_name, source_index)
                for pid in here:
                    yield pid, entry

        uses = self.c.context_uses
        for ri, pids in rules.items():
            reach = max(r for pid in pids for rj, _o, r, _w in uses[pid] if rj == ri)
            self._settle_newest_first(self.c.rules[ri], source_index, newest_first(pids, reach))

    def settle_source(self, source_index: int | None = None) -> None:
        """Settle every rule's kept lines of one input (or all): a live input goes on after a settle."""
        for ri, src in [k for k in self.kept if source_index is None or k[1] == source_index]:
            self.settle(self.c.rules[ri], src)

    def drop_source(self, source_index: int | None = None) -> None:
        """Forget the kept lines of an input that ended (or all): nothing will ask about them."""
        for key in [k for k in self.kept if source_index is None or k[1] == source_index]:
            del self.kept[key]
        for src in [s for s in self.frames if source_index is None or s == source_index]:
            del self.frames[src]
        self.unsettled = [u for u in self.unsettled if source_index is not None and u[3] != source_index]
