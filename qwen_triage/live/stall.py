"""Where a launch is, from its own log lines, and a watchdog for when it goes quiet.

Stages are recognised from the fixed wording vLLM, NCCL, PyTorch and Ollama /
llama.cpp print on the way up (patterns in ``rules/stages.yaml``, data beside
the rules). A launch only moves forward:
a line of an earlier stage (vLLM's API server repeating "Waiting for 1 local,
0 remote core engine proc(s) to start" while the engine core loads weights) does
not move it back, except for the lines that mark a fresh start (a new engine, a
new Ollama runner). Stages where silence is normal (serving) disarm the watchdog.
"""

from __future__ import annotations

import functools
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from qwen_triage.rulepack.spec import StageSpec

if TYPE_CHECKING:
    from qwen_triage.rulepack.pack import RulePack


class StageTable:
    """The stage and heartbeat patterns, compiled: what every tracker of one rule pack matches.

    Built from the pack's stage data (``RulePack.stages``, served from the rule-pack
    cache), so `run` does not read and validate ``stages.yaml`` a second time;
    :func:`stage_table` keeps one per distinct content.
    """

    def __init__(self, stages: tuple[StageSpec, ...], heartbeats: tuple[str, ...]):
        self.stages = stages
        self.by_id = {s.id: s for s in stages}
        self.heartbeat = re.compile("|".join(heartbeats).encode()) if heartbeats else re.compile(rb"(?!)")
        self.whole = re.compile("|".join(f"(?P<{s.id}>{'|'.join(s.patterns)})" for s in stages).encode())
        # every stage pattern, numbered; a stage's patterns compiled one by one for confirming
        self.numbered = [(st, re.compile(p.encode())) for st in stages for p in st.patterns]
        self._prefilter = None

    @property
    def prefilter(self):
        """The engine's prefilter over the stage patterns (Hyperscan where installed): one pass per block."""
        if self._prefilter is None:
            from qwen_triage.engine.prefilter import build_prefilter
            from qwen_triage.engine.scanner import cache_dir

            self._prefilter = build_prefilter([p.pattern.decode() for _, p in self.numbered], "auto", cache_dir())
        return self._prefilter


@functools.cache
def stage_table(stages: tuple[StageSpec, ...], heartbeats: tuple[str, ...]) -> StageTable:
    return StageTable(stages, heartbeats)


def table_of(pack: "RulePack") -> StageTable:
    """The stage table of a loaded rule pack (the bundled one for a pack loaded without ``stages.yaml``)."""
    if not pack.stages:
        return bundled_table()
    return stage_table(tuple(StageSpec.from_dict(d) for d in pack.stages), tuple(pack.heartbeats))


@functools.cache
def bundled_table() -> StageTable:
    """The stages shipped with the pack, read from ``stages.yaml`` (for callers without a loaded pack)."""
    from qwen_triage.rulepack.stages import bundled_stages  # YAML and pydantic: only on this path

    data = bundled_stages()
    specs = tuple(StageSpec.from_dict(s.model_dump()) for s in data.stages)
    return stage_table(specs, tuple(data.heartbeats))


def stages() -> tuple[StageSpec, ...]:
    """The launch stages, in the order a launch goes through them."""
    return bundled_table().stages


@dataclass
class StageState:
    stage: StageSpec
    since: float  # monotonic time the stage was entered
    line: str  # the line that put the launch there


class StageTracker:
    """The stage of a launch, from the lines it prints."""

    def __init__(self, clock=time.monotonic, table: StageTable | None = None):
        self.clock = clock
        self.current: StageState | None = None
        self.table = table if table is not None else bundled_table()

    def _take(self, stage: StageSpec, line: bytes) -> StageState | None:
        cur = self.current
        if cur is not None and stage.id == cur.stage.id:
            return None
        if cur is None or stage.resets or stage.rank >= cur.stage.rank:
            text = line.decode("utf-8", "replace").rstrip("\r")
            self.current = StageState(stage, self.clock(), text[-300:])
            return self.current
        return None

    def feed_block(self, data: bytes) -> StageState | None:
        """Lines (LF-separated, ANSI-free); returns the new state when the stage changed."""
        changes = self.changes(data)
        return changes[-1] if changes else None

    def changes(self, data: bytes) -> list[StageState]:
        """Every stage the launch moved to over these lines, in order: a block that holds the
        start and the workers' first lines (triage a little behind) still reports both."""
        changed: list[StageState] = []
        numbered = self.table.numbered
        for start, pids in sorted(self.table.prefilter.candidates(data).items()):
            cur = self.current
            if cur is not None and not any(self._may_move(numbered[pid][0], cur.stage) for pid in pids):
                continue  # the launch's own chatter in its stage (NCCL INFO...): nothing to confirm
            end = data.find(b"\n", start)
            line = data[start : end if end >= 0 else len(data)]
            # the earliest-listed stage whose pattern really matches this line
            for pid in sorted(pids):
                stage, pattern = numbered[pid]
                if pattern.search(line):
                    state = self._take(stage, line)
                    if state is not None:
                        changed.append(state)
                    break
        return changed

    @staticmethod
    def _may_move(stage: StageSpec, current: StageSpec) -> bool:
        """Whether a line of ``stage`` would move a launch that is in ``current`` (see :meth:`_take`)."""
        return stage.id != current.id and (stage.resets or stage.rank >= current.rank)

    def peek(self, partial: bytes) -> StageSpec | None:
        """The stage a partial line (a progress bar without its LF yet) would move to."""
        segment = partial.rstrip(b"\r").rsplit(b"\r", 1)[-1]
        whole = self.table.whole
        m = whole.search(segment) or whole.search(partial[-4096:])
        if not m:
            return None
        stage = self.table.by_id[m.lastgroup or ""]
        cur = self.current
        if cur is None or stage.resets or stage.rank >= cur.stage.rank:
            return stage
        return None


@dataclass
class Stall:
    """The child printed nothing for ``quiet`` seconds."""

    quiet: float
    stage: StageSpec | None
    stage_since: float | None  # seconds the launch has been in that stage
    stage_line: str | None
    last_lines: list[str]
    processes: int | None = None  # processes of the child still alive, where known
    line: int = 0  # lines of the child's output triage had read when it went quiet
    when: float = field(default_factory=time.time)

    def describe(self) -> str:
        where = f"in stage “{self.stage.label}”" if self.stage else "before any stage it recognises"
        quiet = f"{self.quiet:.1f}" if self.quiet < 10 else f"{self.quiet:.0f}"
        return f"no output for {quiet} s, {where}"


class StallWatchdog:
    """Reports once per silence longer than ``seconds`` (a new line re-arms it)."""

    def __init__(self, seconds: float | None, clock=time.monotonic):
        self.seconds = seconds
        self.clock = clock
        self.last_activity = clock()
        self.reported = False

    def activity(self, when: float | None = None) -> None:
        self.last_activity = self.clock() if when is None else when
        self.reported = False

    def due(self, stage: StageSpec | None) -> float | None:
        """Seconds of silence when a report is due now, else None."""
        if not self.seconds or self.reported or (stage is not None and stage.quiet_ok):
            return None
        quiet = self.clock() - self.last_activity
        if quiet < self.seconds:
            return None
        self.reported = True
        return quiet


def has_progress(data: bytes, heartbeat: re.Pattern[bytes] | None = None) -> bool:
    """Whether any line of ``data`` (lines, each ending in LF) is something other than a heartbeat.

    Line by line from the first: a chunk of real output answers on its first line,
    where searching the whole chunk for a heartbeat first read megabytes.
    """
    heartbeat = heartbeat if heartbeat is not None else bundled_table().heartbeat
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        if not heartbeat.search(data[start:end]):  # a line of its own: `^` and `$` as the patterns mean them
            return True
        start = end + 1
    return False


class LastLines:
    """The last few lines seen, for stall reports (bounded); repeated heartbeats fold into one."""

    def __init__(self, n: int = 12, width: int = 400, heartbeat: re.Pattern[bytes] | None = None):
        self.lines: deque[str] = deque(maxlen=n)
        self.width = width
        self.heartbeat = heartbeat if heartbeat is not None else bundled_table().heartbeat
        self._beat: str | None = None  # the heartbeat line last stored
        self._beats = 0

    def extend(self, lines: list[bytes]) -> None:
        n = self.lines.maxlen or 12
        for raw in lines[-2 * n :]:  # only the tail can be shown
            if self.heartbeat.search(raw):
                text = raw.decode("utf-8", "replace").rstrip("\r")[: self.width]
                if self._beat is not None and self.lines and self.lines[-1].startswith(self._beat):
                    self._beats += 1
                    self.lines[-1] = f"{self._beat}  [x{self._beats}]"
                else:
                    self._beat, self._beats = text, 1
                    self.lines.append(text)
                continue
            self._beat = None
            text = raw.decode("utf-8", "replace").rstrip("\r")
            if "\r" in text:  # a progress bar: its latest state
                text = text.rsplit("\r", 1)[-1]
            self.lines.append(text[: self.width])

    def snapshot(self, partial: bytes = b"") -> list[str]:
        out = list(self.lines)
        if partial:
            text = partial.decode("utf-8", "replace").rstrip("\r")
            text = text.rsplit("\r", 1)[-1]
            if text.strip():
                out.append(text[: self.width] + "  [no newline yet]")
        return out
