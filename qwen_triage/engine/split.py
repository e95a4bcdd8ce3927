"""One big input over several cores: ``scan`` cuts a plain file above a size into parts at line boundaries,
scans the parts in worker processes and merges what they found in file order. The report is the one a scan in
one process gives, byte for byte (but its ``seconds``).

Why it is the same. The engine reads a file in blocks of whole lines, each ending at the last line end before
a multiple of :data:`~qwen_triage.inputs.source.CHUNK` bytes (engine.sources.raw_blocks); parts are cut where
blocks end, and a worker reads its part as a one-process scan reads the file (:class:`_Span`), so every block is
the same, and so is what a block gives on its own. What depends on the lines before a block is the matcher's
state: records held for continuation lines, `all`, storm and veto windows, kept context lines, the latest
traceback frame (and the literal prefilter's first MiB: engine.prefilter, ``resume``). So a worker starts
reading a little before its part (its warm-up, :data:`WARM_BYTES`), and at the part's first line its state is
compared with the state the scan of the part before ended with (:meth:`PartScan._state`,
:meth:`~qwen_triage.engine.matcher.Matcher.boundary_state`: what can still change a finding, lines counted
from there). Equal, what the worker finds from there on is what one process finds. Not equal (a window longer
than the warm-up, a frame seen long before), this process scans the part itself, from where the part before
was read from, and goes on scanning parts itself until a worker's state is its own again. Never a different
report; at worst a slower one. (tests/engine/test_split.py shows, part by part, that equal states find the
same, and that each piece of the state is needed.)

What is not the matcher's — the error lines no rule explains, each rank's timeline, the correlation into
diagnoses — is a fold over the whole input, not a window. A worker records what its matcher tells them
(:class:`Recorder`) and this process replays it into its own scanner part after part, in file order, with the
lines renumbered (a worker numbers its lines from where it starts reading) and the findings' completion order
carried on. That replay is the part of a split scan that does not spread over the cores: about a twentieth of a
one-process scan of the shared mixed log (bench/bench_parallel.py).

Memory stays flat: a worker streams its part a block at a time and sends back findings and records, never lines;
this process holds a few parts' results at once. Compressed, piped, followed and journal-JSON inputs are read in
one process, as before.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Callable, Generator, Iterator

from qwen_triage.engine import workers
from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.confirm import DisabledRule
from qwen_triage.engine.finding import Finding
from qwen_triage.engine.hang import HangTracker
from qwen_triage.engine.matcher import Matcher, MatchStats
from qwen_triage.engine.records import LineRecord
from qwen_triage.engine.sources import SAMPLE, Block, raw_blocks, text_verdict
from qwen_triage.engine.unrecognised import Progress, template_of
from qwen_triage.inputs.file import is_gzip, open_source
from qwen_triage.inputs.source import CHUNK, MAX_LINE, TEXT, InputError, Source
from qwen_triage.units import MiB

if TYPE_CHECKING:
    from multiprocessing.pool import AsyncResult, Pool

    from qwen_triage.engine.firing import Firing
    from qwen_triage.engine.scanner import Scanner

PART_MIN = 32 * MiB
PART_MAX = 64 * MiB  # what a part's findings and records take, held while the parts before it are merged, stays small
PARTS_PER_JOB = 4  # parts a worker takes on average: the last one to end does not keep the others waiting long
WARM_BYTES = 2 * MiB
"""bytes a worker reads before its part (about 13 000 lines of the shared mixed log): enough for its state to be
the one-process scan's at nearly every cut; where a longer window is open there, the part is scanned here"""
IN_FLIGHT_EXTRA = 1  # parts given out beyond one a worker (one waits for the first worker free): what is held

# what a worker's matcher told its collector and rank tracker, and its findings (:class:`Recorder`)
FOUND, SIGNAL, EXPLAINED, HEARTBEAT, READY, RANKED, COUNTED, RAS, ENDED = (
    "found", "signal", "explained", "heartbeat", "ready", "ranked", "counted", "ras", "ended")
Event = tuple  # (kind, ...), as Recorder writes them


def splittable(source: Source, above: int) -> bool:
    """Whether ``source`` is an input to split: a regular file (not stdin, a pipe or a device) of at least
    ``above`` bytes (engine.scan.split_above) that is plain text, as the scan tells it (not gzip, the journal's
    JSON export, a Flight Recorder dump or an NCCL RAS report)."""
    if source.path is None or source.size is None or source.size < above or source.size == 0:
        return False
    try:
        if not stat.S_ISREG(os.stat(source.path).st_mode) or is_gzip(source.path):
            return False
    except OSError:
        return False  # the scan in one process says why
    probe = open_source(str(source.path))
    try:
        probe.begin_sniffed()
    except InputError:
        return False
    finally:
        probe.end()
    return probe.kind == TEXT


# --- where the parts are cut ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """A part of a file: its bytes ``start`` to ``end`` (None: the file's end), read from ``warm`` on (the
    matcher's warm-up). All three are where a one-process scan ends a block."""

    index: int
    warm: int
    start: int
    end: int | None


def part_size(size: int, jobs: int, chunk: int = CHUNK) -> int:
    """Bytes a part of a ``size``-byte input gets: a few parts a worker, within bounds, whole reads."""
    target = min(max(size // (jobs * PARTS_PER_JOB), PART_MIN), PART_MAX)
    return max(target // chunk, 1) * chunk


def plan(path: str, size: int, part_bytes: int, warm_bytes: int, max_line: int = MAX_LINE,
         chunk: int = CHUNK) -> list[Part]:
    """The parts of a file: cut about every ``part_bytes``, each read from about ``warm_bytes`` before it; every
    cut where a one-process scan reading by ``chunk`` ends a block."""
    step = max(part_bytes // chunk, 1) * chunk
    fd = os.open(path, os.O_RDONLY)
    try:
        starts = [0]
        grid = step
        while grid < size:
            cut = _block_end_before(fd, grid, max_line)
            if cut is not None and cut > starts[-1]:
                starts.append(cut)
                grid += step
            else:  # a line too long around it: the next read's end
                grid += chunk
        return [Part(i, _warm_start(fd, start, warm_bytes, max_line, chunk), start,
                     starts[i + 1] if i + 1 < len(starts) else None) for i, start in enumerate(starts)]
    finally:
        os.close(fd)


def _block_end_before(fd: int, grid: int, max_line: int) -> int | None:
    """Where a block a one-process scan reads ends, at the last line end before ``grid`` (a multiple of its
    chunk); None when that is not within ``max_line`` bytes of it (an overlong line may be cut there)."""
    base = max(grid - max_line + 1, 0)
    nl = os.pread(fd, grid - base, base).rfind(b"\n")
    return None if nl < 0 else base + nl + 1


def _warm_start(fd: int, start: int, warm_bytes: int, max_line: int, chunk: int) -> int:
    """Where a part's worker starts reading: a block's end about ``warm_bytes`` before ``start`` (0 when that is
    the file's start)."""
    if warm_bytes <= 0:
        return start
    grid = ((start - warm_bytes) // chunk) * chunk
    while grid > 0:
        cut = _block_end_before(fd, grid, max_line)
        if cut is not None and cut <= start:
            return cut
        grid -= chunk
    return 0


class _Span:
    """The bytes of a file from ``start`` to ``end`` (None: its end), read as a one-process scan reads the file:
    the first read stops at the next multiple of ``chunk``, later ones start at one (the same blocks)."""

    def __init__(self, fd: int, start: int, end: int | None, chunk: int = CHUNK):
        self.fd = fd
        self.pos = start
        self.end = end
        self._grid = -(-start // chunk) * chunk

    def read(self, n: int = -1) -> bytes:
        want = n if n >= 0 else 1 << 62
        if self.pos < self._grid:
            want = min(want, self._grid - self.pos)
        if self.end is not None:
            want = min(want, self.end - self.pos)
        parts = []
        while want > 0:
            data = os.pread(self.fd, min(want, 1 << 30), self.pos)
            if not data:
                break
            parts.append(data)
            self.pos += len(data)
            want -= len(data)
        return b"".join(parts)


# --- a part, scanned --------------------------------------------------------------------------------------


class Recorder:
    """A part's collector and rank tracker (matcher.Signals, matcher.Ranks): what its matcher tells them from
    the part's first line on, recorded in order, with its findings, for the scan to replay (:func:`replay`).

    A heartbeat's stage is looked up here, where the block is (Matcher._stage_before): wherever the scan's
    collector will look it up, a new run of heartbeats (unrecognised.Collector.heartbeat), and at each input's
    first heartbeat of the part, where this one cannot know whether a run goes on."""

    def __init__(self) -> None:
        self.on = False
        self.events: list[Event] = []
        self._runs: dict[int, Progress] = {}
        self._beating: set[int] = set()  # inputs in a run of heartbeats, warm-up included (Collector.beating)
        self._counted = 0  # records for the rank tracker with no news (HangTracker.news), not yet sent
        self._told: set[tuple[str, str, str]] = set()  # the news the records sent gave

    def start(self) -> None:
        self.on = True

    def take(self) -> list[Event]:
        self._send_counted()
        events, self.events = self.events, []
        return events

    def _send_counted(self) -> None:
        if self._counted:
            self.events.append((COUNTED, self._counted))
            self._counted = 0

    def signal(self, rec: LineRecord, parts_of: frozenset[str] | None = None) -> None:
        if self.on:
            self.events.append((SIGNAL, rec, parts_of))

    def explained(self, rec: LineRecord) -> None:
        if self.on:
            self.events.append((EXPLAINED, rec))

    def heartbeat(self, rec: LineRecord, stage_before: Callable[[], str | None]) -> None:
        self._beating.add(rec.source_index)  # the warm-up's too: whether a ready line matters, as in one process
        if not self.on:
            return
        template = template_of(rec.message)
        run = self._runs.get(rec.source_index)
        looked = run is None or not run.same_run(template, rec)
        if run is None:
            run = self._runs[rec.source_index] = Progress()
        run.beat_template, run.beat_last = template, rec
        self.events.append((HEARTBEAT, rec, stage_before() if looked else None, looked))

    def beating(self, source_index: int) -> bool:
        return source_index in self._beating

    def ready(self, rec: LineRecord) -> None:
        self._beating.discard(rec.source_index)
        if self.on:
            self._runs.pop(rec.source_index, None)
            self.events.append((READY, rec))

    def observe(self, rec: LineRecord) -> None:
        if not self.on:
            return
        news = HangTracker.news(rec)
        if news is not None and news <= self._told:  # the most of them: counted here, not sent
            self._counted += 1
            return
        self._send_counted()
        self.events.append((RANKED, rec))
        if news:
            self._told |= news

    def ras_line(self, rec: LineRecord) -> None:
        if self.on:
            self._send_counted()
            self.events.append((RAS, rec))

    def found(self, finding: Finding, firing: Firing) -> None:
        self.events.append((FOUND, finding.rule.index, firing.row_of(finding.rule), finding.records,
                            finding.facts, finding.seq))

    def file_ended(self, block: Block) -> None:
        self.events.append((ENDED, block))


@dataclass(frozen=True)
class Task:
    """A part for a worker: which file, how it is named and numbered in the scan, how it is read."""

    part: Part
    path: str
    name: str  # the input's name in the report
    source_index: int
    max_line: int = MAX_LINE
    chunk: int = CHUNK
    first_line: int = 1  # the number of the line at part.warm (1: numbered from there, the scan renumbers)
    prefilter_seen: int = 0  # what the scan's prefilter had been given before the input (Prefilter.seen)


@dataclass
class PartEnd:
    """What a part's scan gives beside its events: where it started and ended, its states there, its counts."""

    index: int
    first_line: int  # the number its part's first line got (the worker's numbering)
    seq_start: int  # findings completed before its part's first line (the worker's count)
    start_state: tuple | None = None  # Matcher.boundary_state at its first line
    end_state: tuple | None = None  # ... at the line after it (None: the input ended in it)
    next_line: int = 0
    lines_read: int = 0
    seq_end: int = 0
    stats: MatchStats = field(default_factory=MatchStats)
    bytes_read: int = 0
    truncated: int = 0
    ended: bool = False  # the input ended in it: its end, a read that failed, a file cut short
    notes: list[str] = field(default_factory=list)
    disabled: dict[int, DisabledRule] = field(default_factory=dict)
    disabled_patterns: set[int] = field(default_factory=set)


class PartScan:
    """A matcher reading one file from ``task.part.warm`` on: first up to the part (:meth:`warm_up`, nothing
    recorded), then the part and, where the scan asks, the parts after it (:meth:`scan`, each recorded)."""

    def __init__(self, task: Task, compiled: CompiledPack):
        self.task = task
        self.recorder = Recorder()
        self.matcher = Matcher(compiled, collector=self.recorder, hang=self.recorder)
        # bytes before it count as read: a read that fails after the file's start is a note, not an error
        self.source = Source(name=task.name, index=task.source_index, bytes_read=task.part.warm)
        self.fd = os.open(task.path, os.O_RDONLY)
        self.pos = task.part.warm
        self.next_line = task.first_line
        self.end: PartEnd | None = None  # how the last part it scanned ended
        self._seen = 0  # what the prefilter had been given where this scan is (Prefilter.seen)
        self._prefilter_where_it_starts()

    def _prefilter_where_it_starts(self) -> None:
        """The prefilter as a scan in one process has it where this one starts reading: given the blocks before
        (counted only while that changes how it answers: its first MiB or so, engine.prefilter)."""
        prefilter = self.matcher.c.prefilter
        seen = self.task.prefilter_seen
        need = prefilter.horizon - seen
        if need >= 0 and self.task.part.warm > 0:
            span = _Span(self.fd, 0, self.task.part.warm, self.task.chunk)
            for block in raw_blocks(span, Source(name=self.task.name, bytes_read=1),  # type: ignore[arg-type]
                                    self.task.max_line, self.task.chunk, check_text=False):
                seen += len(block.data)
                if seen > prefilter.horizon:
                    break
        prefilter.resume(seen)
        self._seen = seen

    def _state(self, line: int) -> tuple:
        """What is compared where parts meet: the matcher's state, and the prefilter's (how it answers)."""
        prefilter = self.matcher.c.prefilter
        return self.matcher.boundary_state(line), min(prefilter.seen, prefilter.horizon + 1)

    def close(self) -> None:
        os.close(self.fd)

    def _blocks(self, end: int | None) -> tuple[_Span, Iterator[Block]]:
        span = _Span(self.fd, self.pos, end, self.task.chunk)
        blocks = raw_blocks(span, self.source, self.task.max_line, self.task.chunk,  # type: ignore[arg-type]
                            first_line=self.next_line, check_text=False)
        return span, blocks

    def warm_up(self) -> bool:
        """Read up to the part, finding nothing (the part before found it); False when that could not be read
        (the part before ends the input there)."""
        span, blocks = self._blocks(self.task.part.start)
        for block in blocks:
            for _ in self.matcher.feed_block(block, self.task.name, self.task.source_index):
                pass
        self._seen = self.matcher.c.prefilter.seen
        self.pos = span.pos
        self.next_line = self.source.lines_read + 1 if self.pos > self.task.part.warm else self.next_line
        return not self.source.notes and self.pos == self.task.part.start

    def scan(self, part: Part) -> Iterator[list[Event]]:
        """The part's events, a block at a time (it starts where the matcher is); :attr:`end` says how it ended."""
        matcher, recorder, source, name, src = self.matcher, self.recorder, self.source, self.task.name, \
            self.task.source_index
        assert self.pos == part.start, f"part {part.index} starts at {part.start}, the scan is at {self.pos}"
        matcher.c.prefilter.resume(self._seen)  # where this scan left it (a pack's prefilter may serve others)
        end = self.end = PartEnd(part.index, self.next_line, matcher.firing.seq)
        end.start_state = self._state(self.next_line)
        stats = _copy(matcher.stats)
        notes = len(source.notes)
        recorder.start()
        span, blocks = self._blocks(part.end)
        last = None
        for block in blocks:
            end.truncated += len(block.truncated)
            for finding in matcher.feed_block(block, name, src):
                recorder.found(finding, matcher.firing)
            last = block
            yield recorder.take()
        self.pos = span.pos
        self._seen = matcher.c.prefilter.seen
        self.next_line = source.lines_read + 1
        end.ended = part.end is None or span.pos < part.end or len(source.notes) > notes
        if end.ended:  # as Scanner.scan_source ends an input
            for finding in matcher.finish(src, ended=True):
                recorder.found(finding, matcher.firing)
            if last is not None:
                recorder.file_ended(last)
            yield recorder.take()
        else:
            end.end_state = self._state(self.next_line)
        end.next_line = self.next_line
        end.lines_read = source.lines_read
        end.seq_end = matcher.firing.seq
        end.stats = _minus(matcher.stats, stats)
        end.bytes_read = span.pos - part.start
        end.notes = source.notes[notes:]
        end.disabled = dict(matcher.confirmer.disabled_rules)  # a pattern that timed out in the warm-up too
        end.disabled_patterns = set(matcher.confirmer.disabled_patterns)


def _copy(stats: MatchStats) -> MatchStats:
    return MatchStats(**{f.name: getattr(stats, f.name) for f in fields(MatchStats)})


def _minus(a: MatchStats, b: MatchStats) -> MatchStats:
    return MatchStats(**{f.name: getattr(a, f.name) - getattr(b, f.name) for f in fields(MatchStats)})


def _add(a: MatchStats, b: MatchStats) -> None:
    for f in fields(MatchStats):
        setattr(a, f.name, getattr(a, f.name) + getattr(b, f.name))


def scan_part(task: Task) -> tuple[list[Event], PartEnd | None]:
    """A pool worker's task: one part, its events whole (they go back in one message); no end when the bytes
    before it could not be read (the part before ends the input there)."""
    scan = PartScan(task, workers.pack())
    try:
        if not scan.warm_up():
            return [], None
        events = [event for batch in scan.scan(task.part) for event in batch]
    finally:
        scan.close()
    return events, scan.end


# --- the parts, merged ------------------------------------------------------------------------------------


class _Merge:
    """The parts' events replayed into the scan's own scanner, in file order, renumbered."""

    def __init__(self, scanner: Scanner, source: Source):
        self.scanner = scanner
        self.source = source
        self.line = 1  # the number of the next part's first line
        self.seq = scanner.matcher.firing.seq  # findings completed before it

    def shift(self, first_line: int) -> int:
        return self.line - first_line

    def replay(self, events: list[Event], shift: int, seq_shift: int) -> Iterator[Finding]:
        """Events of one part, its lines moved by ``shift`` (each record once), its findings' completion order
        by ``seq_shift``."""
        scanner, compiled, firing = self.scanner, self.scanner.compiled, self.scanner.matcher.firing
        moved: dict[int, LineRecord] = {}  # records renumbered, by identity (held: no id is reused meanwhile)

        def move(rec: LineRecord) -> LineRecord:
            if shift and id(rec) not in moved:
                moved[id(rec)] = rec
                rec.line += shift
            return rec

        for event in events:
            kind = event[0]
            if kind == FOUND:
                _, ri, row, records, facts, seq = event
                rule = compiled.rules[ri] if row is None else firing.row_rule(compiled.rules[ri], row)
                finding = Finding(rule=rule, records=[move(r) for r in records], facts=facts, seq=seq + seq_shift)
                yield from scanner.take((finding,))
            elif kind == SIGNAL:
                scanner.unrecognised.signal(move(event[1]), event[2])
            elif kind == EXPLAINED:
                scanner.unrecognised.explained(move(event[1]))
            elif kind == HEARTBEAT:
                scanner.unrecognised.heartbeat(move(event[1]), _stage(event[2], event[3]))
            elif kind == READY:
                scanner.unrecognised.ready(move(event[1]))
            elif kind == RANKED:
                scanner.hang.observe(move(event[1]))
            elif kind == COUNTED:
                scanner.hang.counted(event[1])
            elif kind == RAS:
                scanner.hang.ras_line(move(event[1]))
            elif kind == ENDED:
                b: Block = event[1]
                block = Block(data=b.data, first_line=b.first_line + shift,
                              truncated=frozenset(n + shift for n in b.truncated), counted=b.counted)
                scanner.input_ended(self.source, block)

    def ended(self, end: PartEnd) -> None:
        """A part's counts, added; the next part starts after it."""
        shift = self.shift(end.first_line)
        source, matcher = self.source, self.scanner.matcher
        source.bytes_read += end.bytes_read
        source.lines_read = end.lines_read + shift
        source.truncated_count += end.truncated
        source.notes += end.notes
        _add(matcher.stats, end.stats)
        for ri, disabled in end.disabled.items():
            path, _, line = disabled.where.rpartition(":")
            where = f"{path}:{int(line) + shift}" if line.isdigit() else disabled.where
            matcher.confirmer.disabled_rules.setdefault(ri, DisabledRule(disabled.rule_id, disabled.pattern, where))
        matcher.confirmer.disabled_patterns |= end.disabled_patterns
        self.line = end.next_line + shift
        self.seq += end.seq_end - end.seq_start
        matcher.firing.seq = self.seq


def _stage(stage: str | None, looked: bool) -> Callable[[], str | None]:
    def stage_before() -> str | None:
        assert looked, "the scan's collector asked for a stage its part's worker did not look up"
        return stage

    return stage_before


@dataclass(frozen=True)
class SplitOptions:
    """How to split: ``jobs`` workers (the pack's ``rule_dirs``, for a worker that loads it), parts of
    ``part_bytes`` (None: :func:`part_size`), each read from ``warm_bytes`` before it."""

    jobs: int
    rule_dirs: tuple[str, ...] = ()
    part_bytes: int | None = None
    warm_bytes: int = WARM_BYTES


@dataclass
class SplitStats:
    """How a split scan went (for tests and the bench): its parts, and those scanned again in this process."""

    parts: int = 0
    in_process: list[int] = field(default_factory=list)  # parts a worker's state differed at: scanned here


def scan_split(scanner: Scanner, source: Source, options: SplitOptions,
               on_block: Callable[[Source], None] | None = None, stats: SplitStats | None = None) -> Iterator[Finding]:
    """Scan ``source`` (a :func:`splittable` one) in parts over ``options.jobs`` worker processes (1: one part
    after another in this process), into ``scanner`` as :meth:`Scanner.scan_source` would; yields the findings
    that open something new."""
    assert source.path is not None and source.size is not None
    compiled = scanner.compiled
    path = str(source.path)
    part_bytes = options.part_bytes or part_size(source.size, options.jobs, scanner.chunk)
    parts = plan(path, source.size, part_bytes, options.warm_bytes, scanner.max_line, scanner.chunk)
    stats = stats if stats is not None else SplitStats()
    stats.parts = len(parts)
    scanner.add_source(source)
    source.kind = TEXT
    merge = _Merge(scanner, source)
    seen = compiled.prefilter.seen
    before = scanner.matcher.stats.bytes
    tasks = [Task(p, path, source.name, source.index, scanner.max_line, scanner.chunk, prefilter_seen=seen)
             for p in parts]
    engine = compiled.prefilter.name
    workers.share(compiled, options.rule_dirs, engine)  # forked workers take it as it is
    if options.jobs < 2:
        yield from _merged(_InThisProcess(), tasks, merge, 1, on_block, stats)
    else:
        import multiprocessing

        with multiprocessing.get_context().Pool(processes=options.jobs, initializer=workers.init,
                                                initargs=(options.rule_dirs, engine, True)) as pool:
            yield from _merged(pool, tasks, merge, options.jobs, on_block, stats)
    compiled.prefilter.resume(seen + scanner.matcher.stats.bytes - before)  # as after reading the input here
    with open(path, "rb") as fh:
        text_verdict(source, fh.read(SAMPLE))


class _Later:
    """A part scanned in this process when its result is asked for."""

    def __init__(self, task: Task):
        self.task = task

    def get(self) -> tuple[list[Event], PartEnd | None]:
        return scan_part(self.task)


class _InThisProcess:
    """The pool of ``jobs=1``: each part scanned here, in turn (the same merge, checks and all)."""

    def apply_async(self, func: Callable[[Task], object], args: tuple[Task]) -> _Later:
        assert func is scan_part
        return _Later(args[0])


def _merged(pool: Pool | _InThisProcess, tasks: list[Task], merge: _Merge, jobs: int, on_block: Callable[[Source], None] | None,
            stats: SplitStats) -> Iterator[Finding]:
    """The parts in order, each taken when its state at its first line is the state the part before ended with;
    where it is not, scanned on in this process from where the part before began, until a worker's state is that
    of this process's scan again."""
    ahead: deque[AsyncResult[tuple[list[Event], PartEnd | None]] | _Later] = deque()
    submitted = 0
    before: PartEnd | None = None
    anchor, anchor_line = 0, 1  # where the worker of the part before began reading, and that line's number
    here: PartScan | None = None  # this process's scan, while the workers' states differ from it
    try:
        for k, task in enumerate(tasks):
            while submitted < len(tasks) and len(ahead) < jobs + IN_FLIGHT_EXTRA:
                ahead.append(pool.apply_async(scan_part, (tasks[submitted],)))
                submitted += 1
            events, end = ahead.popleft().get()
            if end is not None and (before is None or end.start_state == before.end_state):
                if here is not None:
                    here.close()
                    here = None
                anchor, anchor_line = task.part.warm, merge.shift(end.first_line) + task.first_line
                yield from merge.replay(events, merge.shift(end.first_line), merge.seq - end.seq_start)
                merge.ended(end)
            else:
                stats.in_process.append(k)
                if here is None:
                    here = PartScan(replace(task, part=replace(task.part, warm=anchor), first_line=anchor_line),
                                    merge.scanner.compiled)
                    if not here.warm_up():  # read by the worker of the part before: it is exact from there
                        raise InputError(f"{task.name}: read failed before byte {task.part.start}")
                end = yield from _in_process(here, task.part, merge)
            if on_block is not None:
                on_block(merge.source)
            before = end
            if end.ended:
                return
    finally:
        if here is not None:
            here.close()


def _in_process(scan: PartScan, part: Part, merge: _Merge) -> Generator[Finding, None, PartEnd]:
    """A part scanned in this process, its events replayed as they come (numbered as the scan numbers its lines:
    nothing to renumber)."""
    batches = scan.scan(part)
    for batch in batches:
        assert scan.end is not None
        yield from merge.replay(batch, merge.shift(scan.end.first_line), merge.seq - scan.end.seq_start)
    assert scan.end is not None
    merge.ended(scan.end)
    return scan.end
