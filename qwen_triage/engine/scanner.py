"""The scan pipeline: sources -> blocks -> matcher -> correlator -> report."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from qwen_triage.engine.block_records import record_of
from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.finding import Finding
from qwen_triage.engine.hang import HangTracker, join_cause, to_report
from qwen_triage.engine.matcher import Matcher
from qwen_triage.engine.sources import Block, chunk_blocks, decode, source_blocks
from qwen_triage.engine.unrecognised import Collector, Item, template_of
from qwen_triage.inputs.source import CHUNK, FLIGHT, MAX_LINE, RAS_JSON, TEXT, Source
from qwen_triage.redact import redact_text
from qwen_triage.report.summary import Figures
from qwen_triage.rulepack.pack import RulePack, load_pack
from qwen_triage.rulepack.paths import extra_rule_dirs

if TYPE_CHECKING:
    from qwen_triage.engine.check_finding import CheckFinding
    from qwen_triage.engine.correlate import Correlator
    from qwen_triage.engine.locate import Located
    from qwen_triage.engine.records import LineRecord
    from qwen_triage.report.model import Diagnosis, Hang, Observation, PrintedBy, Report
    from qwen_triage.rulepack.catalogue_index import CatalogueIndex

MAX_UNRECOGNISED = 50  # templates listed in a report; the rest are counted in a note
# an input's last lines with words the collector is given: a traceback's frame, its code and its carets, and one more
TAIL_LINES = 4


def cache_dir() -> Path:
    from qwen_triage.rulepack.cache import user_cache_path

    return user_cache_path()


def compile_pack(
    rule_dirs: Iterable[str] = (), engine: str = "auto", pack: RulePack | None = None, deadline: float | None = None
) -> CompiledPack:
    """``deadline`` (``time.perf_counter()``): loading stops there with rulepack.pack.LoadDeadline, and a
    detached child (engine.detached) finishes the load and the Hyperscan database for the next run."""
    if pack is None:
        from qwen_triage.rulepack.pack import LoadDeadline

        dirs = extra_rule_dirs(list(rule_dirs))
        try:
            pack = load_pack(dirs, cache_dir=cache_dir(), deadline=deadline)
        except LoadDeadline:
            from qwen_triage.engine.detached import start_pack_load

            start_pack_load(cache_dir(), dirs, bundled=True)
            raise
    return CompiledPack.build(pack, engine=engine, cache_dir=cache_dir())


def load_compiled(rule_dirs: Iterable[str] = (), engine: str = "auto") -> CompiledPack:
    """:func:`compile_pack` for a command: a broken pack stops it with status 2 (:class:`Failure`)."""
    from qwen_triage.exits import Failure
    from qwen_triage.rulepack.errors import RuleFileError

    try:
        return compile_pack(rule_dirs, engine=engine)
    except (RuleFileError, FileNotFoundError, ImportError) as exc:
        raise Failure(str(exc)) from exc


class Scanner:
    """One triage session over one or more inputs, giving one report.

    Every way of reading comes in through :meth:`feed` (a whole file through :meth:`scan_source`, a reader's
    chunks through :meth:`feed_chunk`, a live stream's lines directly), which decodes by the input's kind and
    matches; the matcher and the correlator are this class's own. ``admit`` sees every finding first and may
    keep it from the report (``check`` takes node-level classes only from the system's own records).

    ``catalogue``: where the lines no rule explains are looked up (engine.locate); the bundled one when None.
    """

    def __init__(self, compiled: CompiledPack, max_line: int = MAX_LINE,
                 admit: Callable[[Finding], bool] | None = None, catalogue: CatalogueIndex | None = None,
                 chunk: int = CHUNK):
        self.compiled = compiled
        self.chunk = chunk  # bytes a file is read by: its blocks end at the last line end before each multiple
        self.catalogue = catalogue
        self._located: dict[str, Located | None] = {}  # template -> where the catalogue placed it (None: nowhere)
        self.unrecognised = Collector(benign=compiled.benign_patterns(), stages={s["id"]: s for s in compiled.pack.stages})
        self.hang = HangTracker(lambda: compiled.stage_ladder)
        self.matcher = Matcher(compiled, collector=self.unrecognised, hang=self.hang)
        self._correlator: Correlator | None = None  # made by the first finding: a clean log never needs one
        self.max_line = max_line
        self.sources: list[Source] = []
        self.started = time.perf_counter()
        self.admit = admit

    @property
    def correlator(self) -> Correlator:
        """The one correlator of this session (engine.correlate), made when first asked for."""
        if self._correlator is None:
            from qwen_triage.engine.correlate import Correlator

            self._correlator = Correlator(self.compiled.pack.classes)
        return self._correlator

    def _take(self, findings: Iterable[Finding]) -> Iterator[Finding]:
        """Feed findings to the correlator; yield those that open a new diagnosis."""
        for f in findings:
            if (self.admit is None or self.admit(f)) and self.correlator.add(f):
                yield f

    def take(self, findings: Iterable[Finding]) -> Iterator[Finding]:
        """Findings a matcher of another process found in this session's input (engine.split), taken as this
        session's own; yields those that open a new diagnosis."""
        return self._take(findings)

    def scan_source(self, source: Source, on_block: Callable[[Source], None] | None = None) -> Iterator[Finding]:
        source.index = len(self.sources)
        self.sources.append(source)
        last: Block | None = None
        for block in source_blocks(source, max_line=self.max_line, chunk=self.chunk):
            if source.kind == FLIGHT:
                self._flight(source, block.data)
                continue
            if source.kind == RAS_JSON:
                self._ras_json(source, block.data)
                continue
            yield from self.feed(source, block, source.kind, raw_bytes=0)
            last = block
            if on_block is not None:
                on_block(source)
        yield from self._take(self.matcher.finish(source.index, ended=True))  # a source is read once
        if last is not None:
            self.input_ended(source, last)

    def input_ended(self, source: Source, last: Block) -> None:
        """An input has been read whole; ``last`` is its last block. A per-rank file's last line is its rank's,
        whatever it says (the hang analysis); a text input's last line with words is its last words, listed where
        nothing else is said (unrecognised.Collector.last_words)."""
        self.hang.file_ended(source.name, last)
        if source.kind != TEXT:
            return
        data = last.data.rstrip()
        tail: list[LineRecord] = []  # its last lines with words, the last first
        end, index = len(data), data.count(b"\n")  # the block's last line, and its index in the block
        while end > 0 and len(tail) < TAIL_LINES:
            start = data.rfind(b"\n", 0, end) + 1
            if data[start:end].strip():
                tail.append(record_of(last, index, data[start:end], source.name, source.index))
            end, index = start - 1, index - 1
        if tail:
            self.unrecognised.ended(tail[0], tail[1:])

    def _flight(self, source: Source, data: bytes) -> None:
        """A Flight Recorder dump (engine.flight): its rank's place goes to the hang analysis, or a note says why
        it could not be read."""
        from qwen_triage.engine import flight

        source.bytes_read += len(data)
        rank = flight.rank_of(source.name)
        try:
            if rank is None:
                raise flight.DumpError("no rank ends its file name (TORCH_FR_DUMP_TEMP_FILE<rank>)")
            self.hang.flight(flight.state_of(flight.load(data), rank), source.name)
        except flight.DumpError as exc:
            source.notes.append(f"{source.name}: a Flight Recorder dump not read: {exc}")

    def _ras_json(self, source: Source, data: bytes) -> None:
        """An NCCL RAS report in JSON (engine.ras): the ranks it places go to the hang analysis, or a note says why
        it could not be read."""
        from qwen_triage.engine import ras

        source.bytes_read += len(data)
        try:
            self.hang.ras_json(data, source.name)
        except ras.RasError as exc:
            source.notes.append(f"{source.name}: an NCCL RAS report not read: {exc}")

    def add_source(self, source: Source) -> int:
        """Register a live source (fed line by line); returns its index."""
        source.index = len(self.sources)
        self.sources.append(source)
        return source.index

    def feed(self, source: Source, block: Block, kind: str = TEXT, raw_bytes: int | None = None) -> Iterator[Finding]:
        """A block of whole raw lines of ``source`` (each within the line limit, numbered as lines of the whole
        input), decoded by ``kind`` and matched; yields the findings that open something new. ``raw_bytes``: what
        it took on the wire (a live stream's bytes; 0 when the reader counted them already)."""
        source.kind = kind
        source.truncated_count += len(block.truncated)
        source.lines_read = max(source.lines_read, block.first_line - 1 + block.nlines)
        source.bytes_read += len(block.data) if raw_bytes is None else raw_bytes
        for decoded in decode(kind, iter((block,))):
            yield from self._take(self.matcher.feed_block(decoded, source.name, source.index))

    def feed_chunk(self, source: Source, data: bytes, first_line: int, kind: str = TEXT) -> Iterator[Finding]:
        """A reader's chunk of whole lines (:class:`~qwen_triage.inputs.base.Chunk`): overlong lines cut, then
        :meth:`feed`."""
        before = source.bytes_read
        for block in chunk_blocks(data, first_line, source, kind, self.max_line):
            yield from self.feed(source, block, kind, raw_bytes=0)
        source.bytes_read = before + len(data)

    def feed_line(self, source: Source, text: str, line_no: int) -> Iterator[Finding]:
        """Live mode, one decoded line: a block of one line."""
        data = text.encode("utf-8", "replace").replace(b"\n", b" ") + b"\n"
        yield from self.feed(source, Block(data=data, first_line=line_no, counted=1))

    def release_held(self, prompt_only: bool = False) -> Iterator[Finding]:
        """Live mode, the input went quiet: multi-line records still open are complete (``prompt_only``: a short
        pause, which completes only the records written in one go; Matcher.release_held)."""
        yield from self._take(self.matcher.release_held(prompt_only=prompt_only))

    def flush(self) -> Iterator[Finding]:
        yield from self._take(self.matcher.finish())

    def lines_matched(self) -> int:
        """Log lines the matcher has seen so far (decoded: a journal entry of three lines is three)."""
        return self.matcher.stats.lines

    def diagnoses(self) -> list[Diagnosis]:
        """The diagnoses so far, as the report will have them."""
        return self.correlator.diagnoses()

    def observations(self) -> list[Observation]:
        return self.correlator.observations()

    def first_at(self, severities: Iterable[object]) -> Finding | CheckFinding | None:
        """The first finding of the first class found at one of ``severities`` (a live run's fatal line)."""
        if self._correlator is None:  # nothing found yet: no correlator to make
            return None
        wanted = tuple(severities)
        for group in self._correlator.groups.values():
            if group.severity in wanted:
                return group.first
        return None

    def _unheld_relays(self) -> list[Item]:
        """Relay lines when no diagnosis holds them: the failure they pass on is unknown, so they are listed
        (a failing log whose only error lines are wrappers is never reported as if nothing were wrong)."""
        out: dict[str, Item] = {}
        for g in self.correlator.relays():
            hint = g.summary(g.all_facts())
            for rec in g.evidence:  # its distinct lines, as the collector lists templates
                template = template_of(rec.message)
                if template in out:
                    out[template].count += 1
                else:
                    out[template] = Item(template, "relay", 1, rec, rec.program, hint=hint)
            if g.evidence:  # lines beyond the kept evidence
                out[template_of(g.evidence[-1].message)].count += max(g.count - len(g.evidence), 0)
        return list(out.values())

    def _locate(self, items: list[Item]) -> dict[int, PrintedBy]:
        """Where each unexplained line was printed (engine.locate), by item; an item the catalogue classes
        leaves the list and becomes a finding of its class, once however often the report is asked for (live).
        Nothing to look up, nothing read; nor in a scan that admits findings by its own test (``check``: node-level
        classes from the system's records only, under node-problem-detector's timeout)."""
        wanted = [i for i in items if i.kind in ("exception", "error") and i.template not in self._located]
        if wanted and self.admit is None:
            from qwen_triage.engine.locate import locate

            found = {f.item.template: f for f in locate(wanted, self.compiled, self.catalogue)}
            for item in wanted:
                f = self._located[item.template] = found.get(item.template)
                if f is not None and f.finding is not None:
                    self.correlator.add(f.finding)
        classed = {t for t, f in self._located.items() if f is not None and f.finding is not None}
        items[:] = [i for i in items if i.template not in classed]
        return {id(i): f.printed_by for i in items if (f := self._located.get(i.template)) is not None}

    def hang_report(self, diagnoses: list[Diagnosis] | None = None) -> Hang | None:
        """The report's `hang` object over what was read so far (engine.hang; None: the logs show no multi-rank
        job): the report's, and a live session's when its input pauses (the same analysis in every mode).
        ``diagnoses``: the report's, where the kernel-log join looks for a cause (else the correlator's now)."""
        several = len(self.sources) > 1
        verdict = self.hang.verdict(several_files=several)
        if verdict is None:
            return None
        if diagnoses is None:
            diagnoses = self._correlator.diagnoses() if self._correlator is not None else []
        return to_report(verdict, join_cause(verdict, diagnoses, several))

    def clean_figures(self) -> Figures | None:
        """The report's figures when they are all it would hold (no diagnosis, observation, unrecognised line,
        hang, note, nor an input with nothing in it), without building it; else None (ask :meth:`report`).

        A small healthy log's scan then never imports the correlator or the report model. Anything
        this cannot tell cheaply answers None, so the report, built, says the same or more.
        """
        m = self.matcher
        c = self._correlator
        if c is not None and (c.groups or c.observed or c.relayed or c.fallbacks):
            return None
        if any(s.notes for s in self.sources) or m.stats.truncated or m.disabled_rules \
                or any(p.disabled_at for p in self.unrecognised.benign) \
                or getattr(self.compiled.prefilter, "screened", None) or self.unrecognised.dropped:
            return None
        if (bool(self.sources) and all(s.empty for s in self.sources)) or self.hang.verdict(len(self.sources) > 1):
            return None
        if self.unrecognised.ordered() or self.unrecognised.stalls({s.index: s.lines_read for s in self.sources}) \
                or self.unrecognised.last_words():
            return None
        return Figures(lines=m.stats.lines, bytes=sum(s.bytes_read for s in self.sources),
                       seconds=round(time.perf_counter() - self.started, 4), rules=len(self.compiled.rules),
                       prefilter=self.compiled.prefilter.name)

    def report(self) -> Report:
        from qwen_triage.engine.correlate import evidence_of
        from qwen_triage.report.model import DisabledRuleOut, InputOut, Report, Stats, Unrecognised

        m = self.matcher
        notes = [n for s in self.sources for n in s.notes]  # an input cut short, empty or not text
        if m.stats.truncated:
            notes.append(
                f"{m.stats.truncated} line(s) longer than {self.max_line} bytes were matched on their first "
                f"{self.max_line} bytes only"
            )
        disabled = [
            DisabledRuleOut(rule=d.rule_id, pattern=d.pattern, where=d.where) for d in m.disabled_rules.values()
        ]
        for d in disabled:
            notes.append(f"rule {d.rule} was disabled: its pattern timed out on {d.where}")
        for p in self.unrecognised.benign:
            if p.disabled_at:
                notes.append(f"known-benign pattern {p.pattern.pattern[:80]!r} was disabled: it timed out on "
                             f"{p.disabled_at}")
        screened = getattr(self.compiled.prefilter, "screened", ())
        users = self.compiled.users
        for rule_id in dict.fromkeys(self.compiled.rules[ri].rule.id for pid in screened for ri, _ in users[pid]):
            notes.append(f"rule {rule_id}: a pattern too large for Hyperscan to compile in time is prefiltered "
                         "by its literals")
        # less what a diagnosis or a relay holds
        items = self.unrecognised.ordered(self.correlator.diagnosed_records(), self.correlator.relayed_records(),
                                          self.correlator.fired_rules())
        quiet: list[Item] = []  # what a log with no diagnosis says besides: relays, where a hang stopped
        if not self.correlator.diagnoses():
            quiet = [*self._unheld_relays(), *self.unrecognised.stalls({s.index: s.lines_read for s in self.sources})]
            if not items and not quiet:  # nothing else to say: each input's last words, if they say it failed
                items = self.unrecognised.last_words()
        placed = self._locate(items)
        diagnoses = self.correlator.diagnoses()
        if not diagnoses:  # a hang says nothing wrong: where it stopped is the evidence
            items += quiet
        if len(items) > MAX_UNRECOGNISED or self.unrecognised.dropped:
            more = len(items) - MAX_UNRECOGNISED + self.unrecognised.dropped
            notes.append(f"{more} more unrecognised error template(s) not listed")
        return Report(
            inputs=[InputOut(name=s.name, kind=s.kind, lines=s.lines_read, bytes=s.bytes_read) for s in self.sources],
            diagnoses=diagnoses,
            observations=self.correlator.observations(),
            notes=notes,
            nothing_read=bool(self.sources) and all(s.empty for s in self.sources),
            hang=self.hang_report(diagnoses),
            unrecognised=[
                Unrecognised(  # from log text: secrets masked here, as in evidence_of
                    template=redact_text(i.template),
                    kind=i.kind,
                    count=i.count,
                    evidence=evidence_of(i.first),
                    program=i.program and redact_text(i.program),
                    raised_by=i.raised_by and redact_text(i.raised_by),
                    exception=i.exception and redact_text(i.exception),
                    hint=i.hint and redact_text(i.hint),
                    printed_by=placed.get(id(i)),
                )
                for i in items[:MAX_UNRECOGNISED]
            ],
            stats=Stats(
                lines=m.stats.lines,
                bytes=sum(s.bytes_read for s in self.sources),
                seconds=round(time.perf_counter() - self.started, 4),
                rules=len(self.compiled.rules),
                patterns=len(self.compiled.patterns),
                prefilter=self.compiled.prefilter.name,
                candidate_lines=m.stats.candidates,
                truncated_lines=m.stats.truncated,
                max_line_bytes=self.max_line,
                disabled_rules=disabled,
            ),
        )


def scan_paths(paths: list[str], compiled: CompiledPack) -> Report:
    """Files (or ``-``) to one report, as ``scan a b`` makes it, for tests and ``eval``; an unreadable one raises
    :class:`~qwen_triage.inputs.source.InputError`."""
    from qwen_triage.inputs.file import open_source

    scanner = Scanner(compiled)
    for i, p in enumerate(paths):
        for _ in scanner.scan_source(open_source(p, i)):
            pass
    return scanner.report()
