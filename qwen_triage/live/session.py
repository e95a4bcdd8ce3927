"""The live core shared by `run`, `scan --follow`, `attach` and `journal`.

Bytes arrive in arbitrary chunks from one or more streams of an input (a child's
stdout and stderr, a followed file, the journal's JSON through a pipe). Each stream is
cut into whole lines on its own (so two streams never mix inside one line), the
lines of one feed go to the engine as one block (fast: the prefilter sees the
whole block at once), and every finding that opens a new diagnosis becomes a
:class:`LiveEvent` at once. Memory is bounded: a partial line is held up to
``max_line`` bytes, and the engine keeps a few evidence lines per diagnosis.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from qwen_triage.engine.check_finding import CheckFinding
from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.finding import Finding
from qwen_triage.engine.scanner import Scanner
from qwen_triage.engine.sources import Block, clean_lines
from qwen_triage.inputs.source import MAX_LINE, TEXT, Source, sniff
from qwen_triage.live.lines import Lines, LineSplitter
from qwen_triage.report.model import Diagnosis, Hang, Observation, Report
from qwen_triage.rulepack.severity import Severity

FATAL = (Severity.critical, Severity.error)
# A few lines of the usual shapes (a vLLM line, a traceback ending in an error a rule knows, NCCL, torch's
# process group, the kernel, Ollama's logfmt) for LiveSession.warm: what they exercise is compiled before the
# child prints anything.
WARM_LINES = b"""INFO 01-07 10:00:01 [config.py:1] warm-up
Traceback (most recent call last):
  File "/opt/venv/lib/python3.11/site-packages/torch/cuda/memory.py", line 1, in warm
    raise
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 1 GiB
host:1:1 [0] NCCL WARN warm-up
[rank0]:[E107 10:00:01.000000000 ProcessGroupNCCL.cpp:1] [PG 0 Rank 0] warm-up
[    1.000000] NVRM: warm-up
time=2025-01-07T10:00:01.000Z level=ERROR source=server.go:1 msg="warm-up"
"""


@dataclass
class LiveInput:
    """One input of a live session: one engine source, one line splitter per stream."""

    source: Source
    kind: str = "auto"  # "auto" (decided on the first line: inputs.source.sniff) or one of inputs.source.KINDS
    next_line: int = 1
    splitters: dict[int, LineSplitter] = field(default_factory=dict)
    ended: bool = False

    @property
    def name(self) -> str:
        return self.source.name


@dataclass
class LiveEvent:
    """A finding that opened something new: a diagnosis, a symptom of one, or an observation."""

    kind: str  # "diagnosis" | "symptom" | "observation"
    finding: Finding
    item: Diagnosis | Observation | None  # the diagnosis/observation as the report has it now
    root: Diagnosis | None = None  # for a symptom: the diagnosis it is a consequence of
    number: int = 0  # for a diagnosis: 1 for the first one announced, and so on
    elapsed: float = 0.0  # seconds since the session started

    @property
    def severity(self) -> Severity:
        return self.finding.severity

    @property
    def class_(self) -> str:
        return self.finding.rule.rule.class_


class LiveSession:
    """A Scanner fed as bytes arrive, announcing each new diagnosis once."""

    def __init__(
        self,
        compiled: CompiledPack,
        on_event: Callable[[LiveEvent], None] | None = None,
        max_line: int = MAX_LINE,
        on_hang: Callable[[Hang], None] | None = None,
    ):
        self.scanner = Scanner(compiled, max_line=max_line)
        self.on_event = on_event
        self.on_hang = on_hang
        self._hang_asked: dict[bool, int] = {}  # final or not -> the hang tracker's records when last asked
        self._hang_shown: tuple | None = None  # the last verdict handed to on_hang
        self.max_line = max_line
        self.started = time.monotonic()
        self.inputs: list[LiveInput] = []
        self.notes: list[str] = []
        self.announced: dict[str, int] = {}  # class id -> diagnosis number (or 0 for a symptom)
        self.fatal: Finding | CheckFinding | None = None  # first critical/error finding, once certain
        self.finished = False

    def warm(self) -> None:
        """Do once now, while the child starts, what the first error line would otherwise pay for: the `regex`
        module and the first confirms, the normaliser's and the multi-line families' patterns, the correlator
        and the diagnosis model. :data:`WARM_LINES` go through a scanner of their own (nothing of them reaches
        this session); what they compile is shared. Paid at the first fatal line, it held that line's diagnosis
        back 60-130 ms (bench/bench_latency.py)."""
        scratch = Scanner(self.scanner.compiled, max_line=self.max_line)
        source = Source(name="warm-up", kind=TEXT)
        scratch.add_source(source)
        block = Block(data=WARM_LINES, first_line=1, counted=WARM_LINES.count(b"\n"))
        for _ in (*scratch.feed(source, block), *scratch.flush()):
            pass
        scratch.correlator.diagnoses()

    # -- inputs -------------------------------------------------------------

    def add_input(self, name: str, kind: str = "auto") -> LiveInput:
        source = Source(name=name, kind=TEXT if kind == "auto" else kind)
        self.scanner.add_source(source)
        inp = LiveInput(source=source, kind=kind)
        self.inputs.append(inp)
        return inp

    def feed(self, inp: LiveInput, data: bytes, stream: int = 0) -> Lines:
        """Bytes of one stream of an input; returns the whole lines they completed."""
        splitter = inp.splitters.get(stream)
        if splitter is None:
            splitter = inp.splitters[stream] = LineSplitter(self.max_line)
        lines = splitter.feed_lines(data)
        if lines:
            self._feed_lines(inp, lines, len(data))
        elif data:
            inp.source.bytes_read += len(data)
        return lines

    def break_line(self, inp: LiveInput, stream: int | None = None) -> None:
        """End the partial line of a stream (or of all): the file under it was rotated or truncated."""
        for key, splitter in inp.splitters.items():
            if stream is None or key == stream:
                lines = splitter.close_lines()
                if lines:
                    self._feed_lines(inp, lines, 0)

    def end_input(self, inp: LiveInput) -> None:
        """No more bytes will come for this input."""
        if not inp.ended:
            self.break_line(inp)
            inp.ended = True

    # -- engine -------------------------------------------------------------

    def _feed_lines(self, inp: LiveInput, lines: Lines, raw_bytes: int) -> None:
        if inp.kind == "auto":
            inp.kind = sniff(lines.data[: lines.data.find(b"\n")])
        first = inp.next_line
        inp.next_line += lines.count
        truncated = frozenset(first + i for i in lines.cut)
        block = Block(data=clean_lines(lines.data), first_line=first, truncated=truncated, counted=lines.count)
        self._announce(self.scanner.feed(inp.source, block, inp.kind, raw_bytes))
        self._check_fatal()

    def _check_fatal(self) -> None:
        if self.fatal is not None:
            return
        self.fatal = self.scanner.first_at(FATAL)

    def _announce(self, findings: Iterator[Finding]) -> None:
        new = list(findings)
        if not new:
            return
        diagnoses = self.scanner.diagnoses()
        by_class = {d.class_: d for d in diagnoses}
        root_of = {s.class_: d for d in diagnoses for s in d.symptoms}
        elapsed = time.monotonic() - self.started
        for f in new:
            if f.severity is Severity.info:
                obs = next((o for o in self.scanner.observations() if o.rule == f.rule.rule.id), None)
                self._emit(LiveEvent("observation", f, obs, elapsed=elapsed))
                continue
            cls = f.rule.rule.class_
            if cls in self.announced:
                continue
            if cls in by_class:
                number = sum(1 for n in self.announced.values() if n) + 1
                self.announced[cls] = number
                self._emit(LiveEvent("diagnosis", f, by_class[cls], number=number, elapsed=elapsed))
            else:
                root = root_of.get(cls)
                self.announced[cls] = 0
                self._emit(LiveEvent("symptom", f, None, root=root, elapsed=elapsed))

    def _emit(self, event: LiveEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def release_prompt(self) -> None:
        """The input paused briefly: records written in one go (a kernel message) still open are complete."""
        self.release_held(prompt_only=True)

    def release_held(self, prompt_only: bool = False) -> None:
        """The input paused: multi-line records still waiting for continuation lines are complete (``prompt_only``:
        a short pause, only those written in one go)."""
        self._announce(self.scanner.release_held(prompt_only))
        if not prompt_only:
            self._check_hang(final=False)

    def _check_hang(self, final: bool) -> None:
        """A multi-rank job's verdict (engine.hang, as `scan` and the report give it) for ``on_hang``, when the
        ranks' lines changed it. At a pause only a culprit is shown: the ranks' timeouts come in a burst, and
        halfway through it the logs cannot decide yet. ``final`` (the stall watchdog fired: the output has been
        quiet for long) shows suspects too."""
        seen = self.scanner.hang.seen
        if self.on_hang is None or self._hang_asked.get(final) == seen:
            return
        self._hang_asked[final] = seen
        hang = self.scanner.hang_report()
        if hang is None or (hang.culprit is None and not (final and hang.suspects)):
            return
        c = hang.culprit
        key = ((c.rank, c.collective, c.seq) if c is not None else None,
               tuple(s.rank for s in hang.suspects), hang.cause is not None)
        if key != self._hang_shown:
            self._hang_shown = key
            self.on_hang(hang)

    def settle(self) -> None:
        """Release findings still waiting on a veto window: the input has gone quiet for long.

        A finding with `unless` is certain once its window of lines has passed; a launch that
        hangs right after the evidence never prints those lines. Called when the stall watchdog
        fires, so such a finding is shown then rather than only at the end.
        """
        self._announce(self.scanner.flush())
        self._check_fatal()
        self._check_hang(final=True)

    # -- end ----------------------------------------------------------------

    def finish(self) -> Report:
        """End every input, release findings still waiting on a veto window, build the report."""
        if not self.finished:
            for inp in self.inputs:
                self.end_input(inp)
            self._announce(self.scanner.flush())
            self._check_fatal()
            self.finished = True
        return self.report()

    def report(self) -> Report:
        report = self.scanner.report()
        report.notes.extend(self.notes)
        return report
