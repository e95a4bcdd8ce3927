"""Where a launch is, from its own log lines, and a watchdog for when it goes quiet.

Stages are recognised from the fixed wording vLLM, NCCL, PyTorch and Ollama /
llama.cpp print on the way up (patterns below). A launch only moves forward:
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


@dataclass(frozen=True)
class Stage:
    id: str
    label: str  # "loading weights", as the stall report says it
    rank: int  # launches move to equal or higher ranks only
    patterns: tuple[str, ...]
    resets: bool = False  # a fresh start: taken whatever the current stage
    quiet_ok: bool = False  # silence here is normal; no stall report
    hint: str = ""


STAGES: tuple[Stage, ...] = (
    Stage(
        "start",
        "starting the server",
        0,
        (
            r"Automatically detected platform \w+",
            r"vLLM API server version \S+",
            r"Initializing an? (?:V\d )?LLM engine",
        ),
        resets=True,
        hint="still in Python imports and argument checks; a hang here is usually a stuck filesystem or import",
    ),
    Stage(
        "gpu_discovery",
        "looking for GPUs",
        1,
        (r'msg="looking for compatible GPUs"', r"ggml_cuda_init: found \d+ \w+ devices"),
        hint="Ollama is querying the driver; a hang here points at the driver or a GPU that fell off the bus "
        "(check `nvidia-smi`, `dmesg | grep -i xid`)",
    ),
    Stage(
        "workers",
        "waiting for worker processes",
        5,
        (
            r"Waiting for \d+ local, \d+ remote core engine proc",
            r"Reducing Torch parallelism from \d+ threads",
            r"Waiting for creating a placement group",
            r"vLLM message queue communication handle",
            r"Started a local Ray instance",
        ),
        hint="a worker (or the engine core) died or is stuck before reporting ready; its traceback, if any, "
        "is above; `ps -ef | grep -i vllm` shows whether the workers are alive",
    ),
    Stage(
        "nccl",
        "NCCL / distributed init",
        10,
        (
            r"Found nccl from library",
            r"vLLM is using nccl==",
            r"NCCL version \d+\.\d+",
            r"NCCL INFO (?:Bootstrap|cudaDriverVersion|NET/|Channel \d+|Using network|comm 0x|Connected all"
            r"|Init COMPLETE|P2P|ncclCommInitRank)",
            r"world_size=\d+ rank=\d+ local_rank=\d+ distributed_init_method",
            r"reading GPU P2P access cache",
            r"Custom allreduce is disabled",
            r"rank \d+ in world size \d+ is assigned as",
            r"Waiting in store based barrier to initialize process group",
        ),
        hint="a hung NCCL init is the usual six-GPU failure: rerun with NCCL_DEBUG=INFO to see the step it "
        "stops at; on PCIe boxes try NCCL_P2P_DISABLE=1 (P2P/IOMMU/ACS), in containers check --shm-size",
    ),
    Stage(
        "runner_start",
        "starting the Ollama runner",
        12,
        (
            r'msg="starting llama server"',
            r'msg="starting go runner"',
            r'msg="starting ollama engine"',
            r'msg="waiting for llama runner to start responding"',
        ),
        resets=True,
        hint="the runner subprocess did not come up; look for its crash above (`llama runner process has "
        "terminated`)",
    ),
    Stage(
        "download",
        "downloading the model",
        20,
        (
            r"Downloading shards",
            r"Fetching \d+ files",
            r"Downloading \[[^\]]+\]",
            r"-of-\d{5}\.safetensors: +\d+%",
            r"pulling manifest",
            r'msg="downloading [0-9a-f]+ in \d+',
        ),
        hint="a download that stops is the network or the hub (HF_ENDPOINT / mirror, proxy) or a full disk "
        "(`df -h` on the cache directory)",
    ),
    Stage(
        "loading",
        "loading weights",
        20,
        (
            r"Starting to load model",
            r"Loading model weights",
            r"Loading (?:safetensors|pt) checkpoint shards",
            r"Using model weights format",
            r"Loading weights took",
            r"Model loading took",
            r"llama_model_loader: loaded meta data",
            r"(?:llm_)?load_tensors: +(?:offload|loading|CUDA\d|CPU)",
            r"status=\"llm server loading model\"",
        ),
        hint="slow storage (network filesystem, spinning disk) or host RAM pressure; `iostat -x 1` and "
        "`free -g` show which",
    ),
    Stage(
        "compile",
        "torch.compile",
        25,
        (
            r"Dynamo bytecode transform time",
            r"for vLLM's torch\.compile",
            r"Compiling a graph for (?:dynamic|general) shape",
            r"torch\.compile takes [\d.]+ s in total",
        ),
        hint="the first start after an install compiles for minutes with little output; later starts use "
        "the cache (--enforce-eager skips it)",
    ),
    Stage(
        "kv_profile",
        "KV cache profiling",
        30,
        (
            r"Memory profiling takes",
            r"# (?:GPU|cuda) blocks: \d+",
            r"GPU KV cache size: [\d,]+ tokens",
            r"Maximum concurrency for [\d,]+ tokens",
            r"llama_(?:new_context_with_model|context|kv_cache_init|kv_cache_unified):",
            r"KV self size",
        ),
        hint="profiling runs a dummy forward pass at full batch; a hang here is usually GPU memory or a kernel "
        "(check `nvidia-smi` for the processes' memory)",
    ),
    Stage(
        "cuda_graphs",
        "CUDA graph capture",
        40,
        (
            r"Capturing cudagraphs for decoding",
            r"Capturing CUDA graph shapes",
            r"Capturing CUDA graphs",
            r"Graph capturing finished",
        ),
        hint="capture can take a minute per size on large models; a hang here often involves custom all-reduce "
        "(--disable-custom-all-reduce) or too little memory left (--enforce-eager to skip)",
    ),
    Stage(
        "serving",
        "serving",
        50,
        (
            r"Application startup complete",
            r"Uvicorn running on",
            r"Starting vLLM API server",
            r'msg="llama runner started in',
            r'msg="Listening on ',
        ),
        quiet_ok=True,
    ),
)

# Lines a stuck launch keeps repeating: they do not count as progress for the watchdog.
HEARTBEATS: tuple[str, ...] = (
    r"Waiting for \d+ local, \d+ remote core engine proc\(s\) to (?:start|connect)",
    r"Waiting for creating a placement group of specs for \d+ seconds",
    r"Waiting in store based barrier to initialize process group",
)
HEARTBEAT_RE = re.compile("|".join(HEARTBEATS).encode())

_BY_ID = {s.id: s for s in STAGES}
STAGE_RE = re.compile(
    "|".join(f"(?P<{s.id}>{'|'.join(s.patterns)})" for s in STAGES).encode(),
)


@dataclass
class StageState:
    stage: Stage
    since: float  # monotonic time the stage was entered
    line: str  # the line that put the launch there


# Every stage pattern, numbered; a stage's patterns compiled one by one for confirming.
_PATTERNS: list[tuple[Stage, re.Pattern[bytes]]] = [(st, re.compile(p.encode())) for st in STAGES for p in st.patterns]


@functools.cache
def _stage_prefilter():  # type: ignore[no-untyped-def]
    """The engine's prefilter over the stage patterns (Hyperscan where installed): one pass per block.

    Built once per process: every tracker matches the same fixed patterns.
    """
    from qwen_triage.engine.scanner import cache_dir
    from qwen_triage.engine.prefilter import build_prefilter

    return build_prefilter([p.pattern.decode() for _, p in _PATTERNS], "auto", cache_dir())


class StageTracker:
    """The stage of a launch, from the lines it prints."""

    def __init__(self, clock=time.monotonic):  # type: ignore[no-untyped-def]
        self.clock = clock
        self.current: StageState | None = None
        self.prefilter = _stage_prefilter()

    def _take(self, stage: Stage, line: bytes) -> StageState | None:
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
        changed = None
        for start, pids in sorted(self.prefilter.candidates(data).items()):
            end = data.find(b"\n", start)
            line = data[start : end if end >= 0 else len(data)]
            # the earliest-listed stage whose pattern really matches this line
            for pid in sorted(pids):
                stage, pattern = _PATTERNS[pid]
                if pattern.search(line):
                    changed = self._take(stage, line) or changed
                    break
        return changed

    def peek(self, partial: bytes) -> Stage | None:
        """The stage a partial line (a progress bar without its LF yet) would move to."""
        segment = partial.rstrip(b"\r").rsplit(b"\r", 1)[-1]
        m = STAGE_RE.search(segment) or STAGE_RE.search(partial[-4096:])
        if not m:
            return None
        stage = _BY_ID[m.lastgroup or ""]
        cur = self.current
        if cur is None or stage.resets or stage.rank >= cur.stage.rank:
            return stage
        return None


@dataclass
class Stall:
    """The child printed nothing for ``quiet`` seconds."""

    quiet: float
    stage: Stage | None
    stage_since: float | None  # seconds the launch has been in that stage
    stage_line: str | None
    last_lines: list[str]
    processes: int | None = None  # processes of the child still alive, where known
    when: float = field(default_factory=time.time)

    def describe(self) -> str:
        where = f"in stage “{self.stage.label}”" if self.stage else "before any stage it recognises"
        quiet = f"{self.quiet:.1f}" if self.quiet < 10 else f"{self.quiet:.0f}"
        return f"no output for {quiet} s, {where}"


class StallWatchdog:
    """Reports once per silence longer than ``seconds`` (a new line re-arms it)."""

    def __init__(self, seconds: float | None, clock=time.monotonic):  # type: ignore[no-untyped-def]
        self.seconds = seconds
        self.clock = clock
        self.last_activity = clock()
        self.reported = False

    def activity(self, when: float | None = None) -> None:
        self.last_activity = self.clock() if when is None else when
        self.reported = False

    def due(self, stage: Stage | None) -> float | None:
        """Seconds of silence when a report is due now, else None."""
        if not self.seconds or self.reported or (stage is not None and stage.quiet_ok):
            return None
        quiet = self.clock() - self.last_activity
        if quiet < self.seconds:
            return None
        self.reported = True
        return quiet


def count_progress(lines: list[bytes]) -> int:
    """How many of these lines are something other than a heartbeat."""
    return sum(1 for line in lines if not HEARTBEAT_RE.search(line))


class LastLines:
    """The last few lines seen, for stall reports (bounded); repeated heartbeats fold into one."""

    def __init__(self, n: int = 12, width: int = 400):
        self.lines: deque[str] = deque(maxlen=n)
        self.width = width
        self._beat: str | None = None  # the heartbeat line last stored
        self._beats = 0

    def extend(self, lines: list[bytes]) -> None:
        n = self.lines.maxlen or 12
        for raw in lines[-2 * n :]:  # only the tail can be shown
            if HEARTBEAT_RE.search(raw):
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
