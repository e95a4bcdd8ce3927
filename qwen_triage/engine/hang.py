"""Hang forensics: from what each rank of a job printed, which rank stopped first, and in which collective.

A distributed job that hangs prints no error of its own: one rank stops (a sleep, a crash, a
kill, a different collective), the others wait in a collective until a timeout fires, and the
log fills with identical timeouts from ranks that did nothing wrong. This module reads the
lines that tell ranks apart (engine.normalize lifts the rank and host off each line:
torchrun's `[rankN]:` / `[default0]:`, per-rank files, vLLM's and Ray's prefixes, NCCL's
`host:pid:tid`) and keeps, per rank, what it did last: the collective it entered and
completed, whether it timed out waiting, lost a peer, raised an error of its own, or was
killed. :func:`verdict` then tells the culprit from the victims.

The lines are found by the prefilter's one pass (the ``hang`` signal, :data:`HANG_PATTERN`):
a log without them costs nothing here. Templates come from what torch prints (gloo's
transport errors, ProcessGroupNCCL's watchdog, ProcessGroupWrapper's fingerprint check,
monitored_barrier, torchelastic's failure summary); each is cited where it is defined.
"""

from __future__ import annotations

import re
from dataclasses import field
from typing import TYPE_CHECKING, Callable

from qwen_triage.engine import clock
from qwen_triage.engine.block_records import record_of
from qwen_triage.engine.normalize import normalize, rank_of_path
from qwen_triage.engine.records import LineRecord
from qwen_triage.engine.sources import Block
from qwen_triage.lazydata import lazy_dataclass
from qwen_triage.lazyre import lazy
from qwen_triage.units import bounded_int

if TYPE_CHECKING:
    from qwen_triage.engine import ras
    from qwen_triage.engine.flight import FlightState
    from qwen_triage.engine.stage_ladder import StageLadder
    from qwen_triage.report.model import Diagnosis, Hang, HangOutlier

# Events every host of a job logs at about the same moment, that engine.clock aligns the hosts' clocks on:
# the process group's init (gloo's device setup, ProcessGroupNCCL's options, NCCL's communicator) and the
# rendezvous. Each with the event's name; a host's first line of each counts.
ANCHORS = (
    ("pg_init", r"ProcessGroupGloo\.cpp:\d+\]|ProcessGroupNCCL initialization options"),
    ("nccl_init", r"NCCL INFO [^\n]{0,300}Init COMPLETE"),
    ("rendezvous", r"Rendezvous complete for workers"),  # torchelastic's agent
)
ANCHOR_PATTERN = "|".join(p for _, p in ANCHORS)
# What every host of one job should print alike; a host that printed otherwise is the outlier (a node on another
# NCCL, a launch with another world size, an NCCL setting its environment gave otherwise). Group `v`: the value;
# group `n`, where there is one, names the setting in place of the entry's name.
CONFIGS = (
    ("NCCL version", r"NCCL INFO NCCL version (?P<v>[\w.+-]{1,40})"),
    ("world size", r"ProcessGroupNCCL initialization options:[^\n]{0,200}?\bsize: (?P<v>\d{1,7})"),
    # NCCL's param.cc / misc/param.cc: INFO(NCCL_ENV, "%s set by environment to %s", name, value)
    ("NCCL setting", r"NCCL INFO (?P<n>NCCL_[A-Z0-9_]{2,40}) set by environment to (?P<v>[^\s]{1,80})"),
)
CONFIG_PATTERN = "|".join(p.replace("(?P<v>", "(?:").replace("(?P<n>", "(?:")  # the prefilter takes no named groups
                          for _, p in CONFIGS)
MAX_SETTINGS = 64  # configuration values kept per host

# Lines the tracker reads; one alternation the prefilter finds in its pass (engine.compiled, signal "hang").
HANG_SIGNALS = (
    r"Timed out waiting \d+ms for (?:recv|send) operation"  # gloo transport/tcp/unbound_buffer.cc
    r"|Connection (?:closed|reset) by peer"  # gloo transport/tcp/pair.cc
    r"|WorkNCCL\(SeqNum=\d+"  # ProcessGroupNCCL: the watchdog's timeout report
    r"|[Ll]ast enqueued (?:NCCL )?work: -?\d+"  # ProcessGroupNCCL: watchdog and dump-signal reports
    r"|watchdog thread terminated with exception"  # ProcessGroupNCCL: an NCCL error (not a timeout) ended it
    r"|failed to pass monitoredBarrier"  # ProcessGroupGloo::monitoredBarrier
    r"|wait timeout after \d+ms, keys: "  # c10d TCPStore::doWait: a key another rank never set
    r"|Detected mismatch between collectives on ranks"  # ProcessGroupWrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL)
    r"|\] Running collective: CollectiveFingerPrint\("  # ProcessGroupWrapper's trace of each collective (DETAIL)
    r"|failed \(exitcode: -?\d+\) local_rank: \d+"  # torch.distributed.elastic.multiprocessing.api
    r"|^\s+(?:host|rank|exitcode|traceback) +: "  # torchelastic's failure summary (ChildFailedError)
    r"|Root Cause \(first observed failure\)"
    r'|distributed_c10d\.py", line \d+, in \w+'  # the collective a traceback waited in
)
HANG_PATTERN = HANG_SIGNALS + "|" + ANCHOR_PATTERN + "|" + CONFIG_PATTERN

# The lines of an NCCL RAS text report that engine.ras's reader takes (src/ras/client_support.cc's templates; each
# alternative holds a literal the literal prefilter can look for). One alternation the prefilter finds in its pass
# (engine.compiled, signal "ras"); kept here beside the hang signals, so a scan compiles its prefilter without
# importing engine.ras (imported by the first RAS line).
RAS_PATTERN = (
    r"NCCL version \S+ compiled with CUDA"  # rasClientRunInit: a report starts
    r"|Communicators\.\.\. \("  # rasClientRunComms: " (%.3fs)" after "Communicators..."
    # a row of the communicators' table: "%5d  %8d  %8d  %8s  %8d  %8d  %8s  %6s", the status right-aligned
    r"|^[ \t]*\d+[ \t]+\d+[ \t]+\d+[ \t]+\d+(?:-\d+)?[ \t]+\d+[ \t]+\d+ *"
    r"(?:  NOCOMM  |  UNKNOWN  |  INIT  |  RUNNING  |  FINALIZE  |  ABORT  )"
    r"|Missing communicator data from \d+ "  # "… job process(es)" / "… rank(s)"
    r"|job process(?:es are| is) considered dead"
    r"|Process \d+ on node \S+ managing GPU"
    r"|^#\d+-\d+ \([0-9a-f]+\) (?:INCOMPLETE|ERROR|MISMATCH)"  # a communicator's section
    r"|The missing ranks?: \d"  # 2.24-2.25
    r"|(?:managed by process \d+ on node |\[process information not found\])"  # a rank's line
    r"|(?:Initialization|Asynchronous) errors? on \d+ rank"
    r"|\d+ ranks reported "
    r"|Communicator ranks have different "
    r"|\d+ ranks have (?:status|launched up to operation|not launched any operations)"
    r"|communication timeouts? while gathering communicator data"
)

_HANG_RE = lazy(HANG_SIGNALS, re.M)
_ANCHORS = tuple((name, lazy(p)) for name, p in ANCHORS)
_CONFIGS = tuple((name, lazy(p)) for name, p in CONFIGS)
_GLOO_TIMEOUT = lazy(r"Timed out waiting (?P<ms>\d+)ms for (?:recv|send) operation")
_PEER_LOST = lazy(r"Connection (?:closed|reset) by peer")
# `[PG ID 0 PG GUID 0(default_pg) Rank 4]` or `[Rank 5]`: the process group's rank, where the line has no prefix
_NCCL_RANK = lazy(r"\[(?:PG ID \d+ PG GUID [^\]]*? )?Rank (?P<rank>\d+)\]")
_WORK = lazy(r"WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)")
_WATCHDOG_TIMEOUT = lazy(r"Watchdog caught collective operation timeout|ran for \d+ milliseconds before timing out"
                         r"|collective timeout|Exception \(either an error or timeout\) detected by watchdog")
# `last enqueued NCCL work: 32, last completed NCCL work: 31` (and, newer, `PG status: last enqueued work: 412, …`)
_SEQS = lazy(r"[Ll]ast enqueued (?:NCCL )?work: (?P<enq>-?\d+), last completed (?:NCCL )?work: (?P<done>-?\d+)")
# ProcessGroupNCCL's watchdog ended by an NCCL error of this rank's communicator (not a timeout)
_NCCL_ERROR = lazy(r"watchdog thread terminated with exception: (?P<err>(?!\[Rank \d+\] Watchdog caught).{1,300})")
_MONITORED = lazy(r"Ranks? (?P<ranks>\d+(?:, \d+)*) failed to pass monitoredBarrier")
# ProcessGroupWrapper: `Rank 4 is running collective: CollectiveFingerPrint(SequenceNumber=3, OpType=BROADCAST,
# TensorShape=[4], …), but Rank 0 is running collective: CollectiveFingerPrint(…)`. The first rank named is the one
# that reports (the check runs on every rank before the collective: both are at that step). Before torch 2.1 the
# peer's fingerprint was printed without its tensors and with its number glued to the op
# (`CollectiveFingerPrint(SequenceNumber=0OpType=REDUCE)`, pytorch#100207): that number is not the peer's step.
_FINGERPRINT = lazy(r"Rank (?P<rank>\d+) is running collective: CollectiveFingerPrint\(SequenceNumber=(?P<seq>\d+),? ?"
                    r"OpType=(?P<op>\w+)(?:, TensorShape=(?P<shape>\[[^\]]*\]))?")
# ProcessGroupWrapper's trace (TORCH_DISTRIBUTED_DEBUG=DETAIL, INFO): `[Rank 1] Running collective:
# CollectiveFingerPrint(SequenceNumber=3, OpType=BROADCAST, TensorShape=[1], …)` before each collective it runs; the
# rank is the process group's (the line's `[rankN]:` prefix, where there is one, gives the global rank)
_TRACED = lazy(r"\[Rank (?P<rank>\d+)\] Running collective: CollectiveFingerPrint\(SequenceNumber=(?P<seq>\d+),? ?"
               r"OpType=(?P<op>\w+)(?:, TensorShape=(?P<shape>\[[^\]]*\]))?")
# c10d's TCPStore::doWait (`DistStoreError: wait timeout after 8000ms, keys: /default_pg/0//cpu//0/4`). Under the
# default group's prefix, gloo's full-mesh rendezvous (ProcessGroupGloo's constructor, one prefix per device:
# `/cpu//0/`) waits for each peer's address under the peer's rank: the rank named never reached the group's init.
_STORE_WAIT = lazy(r"wait timeout after \d+ms, keys: (?P<key>\S{1,200})")
_GLOO_PEER_KEY = lazy(r"^/?default_pg/[^,\s]*?//\w+//\d+/(?:rank_)?(?P<peer>\d{1,7})$")
_AGENT_FAILED = lazy(r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local>\d+) \(pid: (?P<pid>\d+)\)")
_SUMMARY_FIELD = lazy(r"^\s+(?P<key>host|rank|exitcode|traceback) +: (?P<value>.*)$")
_SUMMARY_RANK = lazy(r"(?P<rank>\d+) \(local_rank: (?P<local>\d+)\)")
_SUMMARY_EXIT = lazy(r"(?P<code>-?\d+) \(pid: (?P<pid>\d+)\)")
_COLLECTIVE_FRAME = lazy(r'distributed_c10d\.py", line \d+, in (?P<op>\w+)')
_EXCEPTION = lazy(r"^\s*(?P<exc>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Failure))(?::\s?(?P<msg>.*))?$")

SIGTERM = -15  # what torchelastic sends the other workers once one has failed: their exit says nothing
MAX_RANKS = 65536
MAX_LINE_KEPT = 400
CAUSE_AFTER_S = 5.0  # a host's line this long after the first failure (clocks aligned) is not its cause
MAX_CLOCKS = 4096  # hosts (or files) whose clocks are kept
LAST_LINES_TIMED = 256  # a file's last lines searched for the time it went quiet
STAGE_WINDOW = 1 << 18  # bytes at the end of a file searched for the launch stage it reached
MAX_TAILS = 256  # files whose ends are kept for that, in a scan of several hosts' files


@lazy_dataclass
class RankState:
    """What one rank was last seen doing."""

    rank: int
    local_rank: int | None = None
    host: str | None = None
    entered: int | None = None  # sequence number of the last collective it entered
    completed: int | None = None
    op: str | None = None  # the collective it was in (ALLREDUCE, all_reduce, …)
    shape: str | None = None
    waited: bool = False  # timed out waiting in a collective
    peer_lost: bool = False  # its connection to a peer closed under it
    error: str | None = None  # an exception of its own (not a timeout, not a lost peer)
    exitcode: int | None = None
    exit_order: int | None = None  # order of the launcher's exit reports
    accused: list[str] = field(default_factory=list)  # what another rank's report says of it
    last_line: tuple[str, int, str] | None = None  # path, line, text
    files: set[str] = field(default_factory=set)  # inputs its lines came from
    first_trouble: int | None = None  # scan order of its first timeout, error or lost peer
    dumped: bool | None = None  # its Flight Recorder dump was read (False: the job's dumps hold none of it; None: no dumps)
    ras: ras.Place | None = None  # what the last NCCL RAS report says of it (engine.ras)
    traced: tuple[int, str, str | None] | None = None  # the last collective ProcessGroupWrapper traced for it
    traced_in: str | None = None  # the input that trace line came from
    trace_final: bool = False  # that input has been read to its end: the trace is where the rank's log stops


@lazy_dataclass
class Culprit:
    """The rank (or host) a hung job's verdict names, and the collective it stopped in."""

    rank: int | None
    host: str | None
    collective: str | None
    seq: int | None
    why: str


@lazy_dataclass
class Verdict:
    """What the hang analysis concluded: the culprit, the suspects, and each rank's last state."""

    culprit: Culprit | None
    suspects: list[tuple[int, str]]  # (rank, why)
    ranks: list[RankState]
    decided: bool
    note: str
    clocks: dict[str, float] = field(default_factory=dict)  # host -> its clock's offset from the reference host
    outliers: list[tuple[str, str, str, str]] = field(default_factory=list)  # host, what, its value, the others'
    failed_at: float | None = None  # the first failure or timeout the hosts reported, on the reference clock
    quiet: tuple[str, float | None] | None = None  # the host that went quiet first; seconds before the first failure
    behind: tuple[str, str, str] | None = None  # the host whose log reached an earlier launch stage: its, the others'

    def aligned(self, host: str | None, ts: str | None) -> float | None:
        """A host's timestamp on the reference host's clock."""
        t = clock.seconds(ts)
        return None if t is None else t - self.clocks.get(host or "", 0.0)


class HangTracker:
    """Per-rank state, fed the records of a scan that carry a rank or a hang signal (engine.matcher)."""

    def __init__(self, stages: "Callable[[], StageLadder | None]" = lambda: None) -> None:
        self.ranks: dict[int, RankState] = {}
        # the launch stages (rules/stages.yaml), to tell how far each host's log got: asked for only when two
        # hosts' logs are read (its one regex is compiled then, not by every scan)
        self._stages = stages
        self._tails: dict[str, bytes] = {}  # clock (host or file) -> its file's end, while a second host may come
        self.stage_of: dict[str, str | None] = {}  # clock -> the last launch stage its file reached, once asked
        self._order = 0
        self._summary: dict[int, dict[str, str]] = {}  # source -> the failure-summary entry being read
        self._root_cause_next: set[int] = set()
        self.root_cause: int | None = None  # the rank torchelastic named as the first observed failure
        self._host_of_local: dict[tuple[str | None, int], int] = {}
        # engine.clock's inputs, by clock (a line's host, else its file): each anchor event's first time, and the
        # time of the first failure or timeout reported there
        self.anchors: dict[str, dict[str, float]] = {}
        self.failed_at: dict[str, float] = {}
        self.spoke: set[str] = set()  # clocks (hosts, files) where a rank or a launcher reported a failure or an exit
        self.last_seen: dict[str, float] = {}  # clock -> the time of its file's last line that has one
        self.config: dict[str, dict[str, str]] = {}  # clock (host) -> what it printed of CONFIGS, first value
        self.flight_world: set[int] = set()  # the default process group's ranks, as the dumps give them
        self._ras_text: dict[int, ras.TextReader] = {}  # source -> its NCCL RAS text reports (engine.ras)
        self._ras_json: list[ras.Report] = []  # the last two NCCL RAS JSON reports read
        self._ras_hosts: set[int] = set()  # ranks whose host only the RAS report gave
        self._ended: set[str] = set()  # inputs read to their end (file_ended)

    @property
    def seen(self) -> int:
        """How many records the tracker has been fed: a live session asks for a new verdict only when it grew."""
        return self._order

    def _state(self, rank: int) -> RankState | None:
        if not 0 <= rank < MAX_RANKS:
            return None
        st = self.ranks.get(rank)
        if st is None:
            st = self.ranks[rank] = RankState(rank)
        return st

    def _rank_of(self, rec: LineRecord) -> int | None:
        if rec.rank is not None:
            return rec.rank
        if rec.local_rank is not None:
            # a local rank is the global one on a single node; on several, the summary maps them
            return self._host_of_local.get((self._host_key(rec), rec.local_rank), rec.local_rank)
        m = _NCCL_RANK.search(rec.message)
        return bounded_int(m["rank"]) if m else None

    @staticmethod
    def _host_key(rec: LineRecord) -> str | None:
        return rec.host

    def observe(self, rec: LineRecord) -> None:
        """One record with a rank or a hang signal."""
        self._order += 1
        msg = rec.message
        self._anchor(rec)
        if self._summary_line(rec):
            return
        if m := _AGENT_FAILED.search(msg):
            self._failure_time(rec)
            # the launcher's own line: local rank only; the summary after it gives the global rank
            self._summary.setdefault(rec.source_index, {})
            return
        for m in _MONITORED.finditer(msg):
            for r in m["ranks"].split(", "):
                st = self._state(int(r))
                if st is not None:
                    st.accused.append("failed to pass monitoredBarrier (named by the barrier's rank 0)")
        if (m := _STORE_WAIT.search(msg)) and (k := _GLOO_PEER_KEY.match(m["key"].rstrip(",)]"))):
            st = self._state(int(k["peer"]))
            if st is not None and len(st.accused) < 8:
                st.accused.append("never reached the process group's init: the ranks that reported waited there for "
                                  f"its address (the store key {m['key'][:80]}) until they timed out")
        if (t := _TRACED.search(msg)) is not None:
            self._traced(rec, t)
            return
        prints = list(_FINGERPRINT.finditer(msg))
        for m in prints:
            st = self._state(int(m["rank"]))
            if st is None:
                continue
            # a peer's fingerprint printed without its tensors carries no step of its own (pytorch#100207): the
            # check compares the ranks at one step, the reporting rank's
            seq = int(m["seq"]) if m["shape"] is not None or m is prints[0] else int(prints[0]["seq"])
            st.entered, st.op, st.shape = seq, m["op"], m["shape"]
            if not _MONITORED.search(msg):
                self._desync_named(st, rec, reporter=m is prints[0])
        if not prints and _HANG_RE.search(msg) is None and _EXCEPTION.match(msg) is None:
            # a line that only carries a rank says nothing here; which such lines reach the tracker depends
            # on the prefilter engine (the literal one points at more), and the verdict must not
            return
        rank = self._rank_of(rec)
        if rank is None:
            return
        st = self._state(rank)
        if st is None:
            return
        if rec.host and not st.host:
            st.host = rec.host
        if rec.local_rank is not None and st.local_rank is None:
            st.local_rank = rec.local_rank
        st.last_line = (rec.path, rec.line, rec.text[:MAX_LINE_KEPT])
        if len(st.files) < 8:
            st.files.add(rec.path)
        trouble = False
        if m := _WORK.search(msg):
            st.entered, st.op = max(st.entered or -1, int(m["seq"])), m["op"]
        if m := _SEQS.search(msg):
            st.entered, st.completed = int(m["enq"]), int(m["done"])
        if _GLOO_TIMEOUT.search(msg) or _WATCHDOG_TIMEOUT.search(msg) or _STORE_WAIT.search(msg) \
                or (prints and not _MONITORED.search(msg)):
            st.waited = trouble = True
        elif m := _NCCL_ERROR.search(msg):
            st.error = st.error or m["err"].strip()[:MAX_LINE_KEPT]
            trouble = True
        elif _PEER_LOST.search(msg):
            st.peer_lost = trouble = True
        elif m := _COLLECTIVE_FRAME.search(msg):
            st.op = m["op"]
        elif (m := _EXCEPTION.match(msg)) and not st.waited and not st.peer_lost and "monitoredBarrier" not in msg:
            st.error = f"{m['exc']}: {m['msg'] or ''}".strip(": ")[:MAX_LINE_KEPT]
            trouble = True
        elif "monitoredBarrier" in msg:
            st.waited = trouble = True
        if trouble:
            self._failure_time(rec)
        if trouble and st.first_trouble is None:
            st.first_trouble = self._order

    def _traced(self, rec: LineRecord, t: "re.Match[str]") -> None:
        """ProcessGroupWrapper's trace of a collective a rank is about to run: the last one is where its log
        stops. Not trouble: a healthy DETAIL run prints one per collective."""
        rank = rec.rank if rec.rank is not None else bounded_int(t["rank"])
        st = self._state(rank) if rank is not None else None
        if st is None:
            return
        st.traced, st.traced_in = (int(t["seq"]), t["op"], t["shape"]), rec.path
        if rec.host and not st.host:
            st.host = rec.host
        if len(st.files) < 8:
            st.files.add(rec.path)
        st.last_line = (rec.path, rec.line, rec.text[:MAX_LINE_KEPT])

    def _desync_named(self, st: RankState, rec: LineRecord, reporter: bool) -> None:
        """A rank ProcessGroupWrapper's mismatch report names: it reached the check of that step and the job
        failed there (the reporting rank and the peer it compared itself with alike, whether or not the line has a
        rank prefix)."""
        if not st.waited:
            st.waited = True
            self._failure_time(rec)
        if st.first_trouble is None:
            st.first_trouble = self._order
        if reporter or st.last_line is None:
            st.last_line = (rec.path, rec.line, rec.text[:MAX_LINE_KEPT])
            if len(st.files) < 8:
                st.files.add(rec.path)

    @staticmethod
    def news(rec: LineRecord) -> frozenset[tuple[str, str, str]] | None:
        """What :meth:`observe` could learn from ``rec`` but its count, told without the tracker's state: the
        first-seen facts it may set (``("config" | "anchor", clock, name)``: only the first of each counts), or
        None when it says more (a rank's trouble, a collective, a summary: observe must read it). A part's worker
        (engine.split) sends on only the records that may set a fact it has not sent yet, and counts the rest
        (:meth:`counted`). Kept beside :meth:`observe` and :meth:`_anchor`: what they read, this reads."""
        text, msg = rec.text, rec.message
        if "Root Cause (first observed failure)" in text or _SUMMARY_FIELD.match(text):
            return None
        if _AGENT_FAILED.search(msg) or _MONITORED.search(msg) or _FINGERPRINT.search(msg) \
                or _HANG_RE.search(msg) or _EXCEPTION.match(msg):
            return None
        where = HangTracker._clock_of(rec)
        facts = {("config", where, _config_name(name, m)) for name, pattern in _CONFIGS
                 if (m := pattern.search(text)) is not None}
        if rec.timestamp is not None:
            name = next((name for name, pattern in _ANCHORS if pattern.search(text)), None)
            if name is not None and clock.seconds(rec.timestamp) is not None:
                facts.add(("anchor", where, name))
        return frozenset(facts)

    def counted(self, n: int) -> None:
        """``n`` records whose :meth:`news` this tracker had had already, counted as :meth:`observe` counts them."""
        self._order += n

    @staticmethod
    def _clock_of(rec: LineRecord) -> str:
        return rec.host or "\0" + rec.path  # a file that names no host: resolved in verdict()

    def _anchor(self, rec: LineRecord) -> None:
        """An event every host logs (the process group's init, the rendezvous): its first time on this clock;
        and what the host printed of its configuration."""
        for name, pattern in _CONFIGS:
            if len(self.config) < MAX_CLOCKS and (m := pattern.search(rec.text)) is not None:
                printed = self.config.setdefault(self._clock_of(rec), {})
                if len(printed) < MAX_SETTINGS:
                    printed.setdefault(_config_name(name, m), m["v"])
        if rec.timestamp is None or len(self.anchors) >= MAX_CLOCKS:
            return
        for name, pattern in _ANCHORS:
            if pattern.search(rec.text) is not None:
                t = clock.seconds(rec.timestamp)
                if t is not None:
                    self.anchors.setdefault(self._clock_of(rec), {}).setdefault(name, t)
                return

    def _failure_time(self, rec: LineRecord) -> None:
        if len(self.spoke) < MAX_CLOCKS:
            self.spoke.add(self._clock_of(rec))
        t = clock.seconds(rec.timestamp)
        if t is not None and len(self.failed_at) < MAX_CLOCKS:
            key = self._clock_of(rec)
            self.failed_at[key] = min(self.failed_at.get(key, t), t)

    def file_ended(self, path: str, block: "Block") -> None:
        """A file has been read: when its path names a rank (torchrun's --log-dir files), that rank was there,
        silent or not, and the file's last line is the last it printed. A distributed job's file keeps its end, whose
        last launch stage is read once a second host shows (the verdict): one host's log is never searched again."""
        if len(self._ended) < MAX_CLOCKS:
            self._ended.add(path)
        key = self._last_time(path, block)
        if (self.ranks or self.anchors) and len(self._tails) < MAX_TAILS:
            self._tails[key or "\0" + path] = bytes(block.data[-STAGE_WINDOW:])  # read once a second host shows
        rank, local = rank_of_path(path)
        if rank is None and local is None:
            return
        data = block.data.rstrip(b"\n")
        if not data:
            return
        start = data.rfind(b"\n") + 1
        index = data.count(b"\n", 0, start)
        rec = record_of(block, index, data[start:], path, 0)
        rank = self._rank_of(rec)
        st = self._state(rank) if rank is not None else None
        if st is None:
            return
        if st.last_line is None or st.last_line[0] == path or path.endswith("stdout.log"):
            st.last_line = (rec.path, rec.line, rec.text[:MAX_LINE_KEPT])

    def _last_time(self, path: str, block: "Block") -> str | None:
        """When a file went quiet: the time of its last line that has one (of its last lines only); the clock it
        is on."""
        if len(self.last_seen) >= MAX_CLOCKS:
            return None
        lines = block.data.rstrip(b"\n").rsplit(b"\n", LAST_LINES_TIMED)
        for raw in reversed(lines[1:] if len(lines) > LAST_LINES_TIMED else lines):
            rec = normalize(raw[:MAX_LINE_KEPT].decode("utf-8", "replace"), path)
            t = clock.seconds(rec.timestamp)
            if t is not None:
                key = self._clock_of(rec)
                self.last_seen[key] = max(self.last_seen.get(key, t), t)
                return key
        return None

    def flight(self, fs: "FlightState", path: str) -> None:
        """One rank's Flight Recorder dump (engine.flight): the last collective it entered (and completed, where
        the backend says), its op and shape, as its log lines would give them."""
        st = self._state(fs.rank)
        if st is None:
            return
        self._order += 1
        st.dumped = True
        if fs.entered is not None:
            st.entered = max(st.entered if st.entered is not None else -1, fs.entered)
            st.op, st.shape = fs.op or st.op, fs.shape or st.shape
        if fs.completed is not None:
            st.completed = fs.completed
            st.waited = st.waited or (fs.entered is not None and fs.entered > fs.completed)
        if len(st.files) < 8:
            st.files.add(path)
        if len(self.flight_world) < MAX_RANKS:
            self.flight_world.update(r for r in fs.world if 0 <= r < MAX_RANKS)

    def ras_line(self, rec: LineRecord) -> None:
        """A line of an NCCL RAS text report (engine.ras, signal "ras"), read in its input's order."""
        self._order += 1
        reader = self._ras_text.get(rec.source_index)
        if reader is None:
            if len(self._ras_text) >= MAX_CLOCKS:
                return
            from qwen_triage.engine.ras import TextReader  # imported by the first RAS line: most logs have none

            reader = self._ras_text[rec.source_index] = TextReader()
        reader.feed(rec.message, rec.path, rec.line, rec.text, self._order)

    def ras_json(self, data: bytes, path: str) -> None:
        """An NCCL RAS report in JSON (`ncclras -f json`); :class:`~qwen_triage.engine.ras.RasError` when it is not
        one."""
        from qwen_triage.engine.ras import load_json

        self._order += 1
        self._ras_json = [*self._ras_json[-1:], load_json(data, path, self._order)]

    def _apply_ras(self) -> str:
        """The last NCCL RAS report read (against the one before it, engine.ras.places): each rank it places, on its
        state; what it says of no rank, for the verdict's note. Done afresh at each verdict: a live session's report
        may still be coming in."""
        for state in self.ranks.values():
            state.ras = None
            if state.rank in self._ras_hosts:  # a line read since may name its host as the logs do
                state.host = None
        self._ras_hosts.clear()
        reports = sorted([*self._ras_json, *(r for t in self._ras_text.values() for r in t.reports)],
                         key=lambda r: r.order)
        if not reports:
            return ""
        from qwen_triage.engine.ras import places

        found = places(reports[-1], reports[-2] if len(reports) > 1 else None)
        for place in found.ranks.values():
            st = self._state(place.rank)
            if st is not None:
                st.ras = place
                if st.host is None and place.host is not None:
                    st.host = place.host
                    self._ras_hosts.add(st.rank)
        return found.note

    def _summary_line(self, rec: LineRecord) -> bool:
        """torchelastic's failure summary: `host : …`, `rank : 4 (local_rank: 1)`, `exitcode : -9 (pid: …)`."""
        msg = rec.text
        if "Root Cause (first observed failure)" in msg:
            self._root_cause_next.add(rec.source_index)
            return True
        m = _SUMMARY_FIELD.match(msg)
        if m is None:
            return False
        entry = self._summary.setdefault(rec.source_index, {})
        key, value = m["key"], m["value"].strip()
        if key == "host":
            entry.clear()
        entry[key] = value
        if key == "exitcode" and (r := _SUMMARY_RANK.match(entry.get("rank", ""))):
            st = self._state(int(r["rank"]))
            if st is None:
                return True
            st.local_rank = int(r["local"])
            st.host = st.host or entry.get("host")
            self._host_of_local[(entry.get("host"), st.local_rank)] = st.rank
            if e := _SUMMARY_EXIT.match(value):
                st.exitcode = int(e["code"])
                self._order += 1
                st.exit_order = st.exit_order or self._order
            if rec.source_index in self._root_cause_next:
                self._root_cause_next.discard(rec.source_index)
                self.root_cause = st.rank
        return True

    def verdict(self, several_files: bool = False) -> Verdict | None:
        """The culprit, or the suspects; None when the logs show fewer than two ranks.

        ``several_files``: the scan read several inputs; a rank whose lines all came from one file that names
        no rank, and that no line names a host for, is on the host the file is named for (`node-b.log`).
        """
        if any(st.dumped for st in self.ranks.values()):  # the job left dumps: a rank of its world without one
            for r in self.flight_world:
                st = self._state(r)
                if st is not None and not st.dumped:
                    st.dumped = False
        ras_note = self._apply_ras()
        for st in self.ranks.values():
            st.trace_final = st.traced is not None and st.traced_in in self._ended
        if len(self.ranks) < 2:
            return None
        if several_files:
            for st in self.ranks.values():
                if st.host is None and len(st.files) == 1:
                    st.host = host_of_file(next(iter(st.files)))
        v = decide(sorted(self.ranks.values(), key=lambda s: s.rank), self.root_cause)
        if ras_note:
            v.note += f" ({ras_note})"
        self._timeline(v, several_files)
        return v

    def _timeline(self, v: Verdict, several_files: bool) -> None:
        """The hosts' clocks aligned (engine.clock) and the first failure on the common clock."""

        def host(key: str) -> str:
            if not key.startswith("\0"):
                return key
            return (host_of_file(key[1:]) if several_files else None) or ""

        anchors: dict[str, dict[str, float]] = {}
        for key, events in self.anchors.items():
            merged = anchors.setdefault(host(key), {})
            for name, t in events.items():
                merged[name] = min(merged.get(name, t), t)
        v.clocks = clock.offsets(anchors) if len(anchors) > 1 else {}
        times = [t - v.clocks.get(host(key), 0.0) for key, t in self.failed_at.items()]
        v.failed_at = min(times) if times else None
        printed: dict[str, dict[str, str]] = {}
        for key, values in self.config.items():
            for name, value in values.items():
                printed.setdefault(name, {}).setdefault(host(key), value)
        v.outliers = [o for name, by_host in printed.items() for o in config_outliers(name, by_host)]
        v.quiet = self._quiet_host(v, host)
        if v.quiet is not None and v.culprit is None:
            lost_host(v, *v.quiet)
        ladder = self._stages() if v.quiet is None and len({host(k) for k in self._tails} - {""}) > 1 else None
        if ladder is not None:
            reached: dict[str, str] = {}
            for key, tail in self._tails.items():
                if key not in self.stage_of:
                    self.stage_of[key] = ladder.last(tail)
                stage = self.stage_of[key]
                if stage is not None and (h := host(key)):
                    reached[h] = ladder.later(reached.get(h), stage)
            v.behind = ladder.behind(reached)
            if v.behind is not None:
                host_behind(v, *v.behind)

    def _quiet_host(self, v: Verdict, host: Callable[[str], str]) -> tuple[str, float | None] | None:
        """The one host whose log stops with no failure, timeout or exit of its own while the ranks of other hosts
        failed (a host lost at once: its launcher and every rank on it gone, its log just ends), and how many
        seconds its last timed line came before the first failure the others reported (clocks aligned; None where
        that cannot be told). A host that logged on after the others failed did not go quiet."""
        spoke = {host(k) for k in self.spoke} | {s.host for s in v.ranks if s.host and _troubled(s)}
        seen = {host(k) for k in (*self.anchors, *self.last_seen)} - {""}
        quiet = sorted(seen - spoke)
        if not spoke or len(quiet) != 1 or len(seen | spoke) < 2:
            return None
        h = quiet[0]
        last = [t for k, t in self.last_seen.items() if host(k) == h]
        lead = None
        if last and v.failed_at is not None and h in v.clocks:
            lead = round(v.failed_at - (max(last) - v.clocks[h]), 3)
            if lead < -CAUSE_AFTER_S:
                return None
        return h, lead


def _config_name(name: str, m: "re.Match[str]") -> str:
    """What a configuration line printed: the entry's name, or the setting it names (`NCCL_SOCKET_IFNAME`)."""
    return m["n"] if "n" in m.re.groupindex else name


def _troubled(s: RankState) -> bool:
    return bool(s.waited or s.peer_lost or s.error or s.exitcode not in (None, 0))


def lost_host(v: Verdict, host: str, lead: float | None) -> None:
    """No rank stands out, and one host went quiet first: that host is the culprit, its rank named where the
    logs place exactly one rank on it (else its ranks are the suspects)."""
    on_host = [s for s in v.ranks if s.host == host]
    others = [s for s in v.ranks if s.host != host]
    op = next((s.op for s in others if (s.waited or s.peer_lost) and s.op), None)
    when = f" {lead:.1f} s before the first failure the other hosts reported," if lead is not None else ""
    lost = "timed out waiting" if any(s.waited for s in others) else "lost their peers"
    why = (f"host {host} went quiet first: its log stops{when} with no error, timeout or exit of its own while the "
           f"ranks on the other hosts {lost}; the host (its launcher and every rank on it) was lost at once")
    _blame_host(v, host, on_host, op, why, "went quiet first")


def host_behind(v: Verdict, host: str, its: str, others: str) -> None:
    """One host's log never got as far as every other host's (its last launch stage is an earlier one): the host
    is the culprit where no rank elsewhere stands out. A rank on it that the others named (they waited for it)
    stays the culprit when it is the host's only rank; with several ranks there, each of them may be as late
    (the others wait for one rank at a time), so the host is named and its ranks are the suspects."""
    if v.culprit is not None and v.culprit.host not in (None, host):
        return
    on_host = [s for s in v.ranks if s.host == host]
    if v.culprit is not None and v.culprit.rank is not None and len(on_host) <= 1:
        return
    named = f"; the other ranks waited for its rank {v.culprit.rank}" if v.culprit and v.culprit.rank is not None else ""
    why = (f"host {host} is behind: its log got only as far as '{its}' while every other host's reached "
           f"'{others}'{named}")
    _blame_host(v, host, on_host, None, why, "is behind")


def _blame_host(v: Verdict, host: str, on_host: list[RankState], op: str | None, why: str, which: str) -> None:
    """The host is the culprit: its rank named where the logs place exactly one rank on it, else its ranks are the
    suspects ("on host X, which <which>")."""
    rank = on_host[0].rank if len(on_host) == 1 else None
    v.culprit = Culprit(rank=rank, host=host, collective=op, seq=None, why=why)
    v.suspects = [(s.rank, f"on host {host}, which {which}") for s in on_host] if rank is None else []
    v.decided, v.note = True, why


def config_outliers(what: str, by_host: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """The one host whose value differs from what every other host printed (at least two of them agreeing):
    (host, what, its value, the others'). Two hosts that differ cannot say which is off: none."""
    values = set(by_host.values())
    if len(by_host) < 3 or len(values) != 2:
        return []
    for value in values:
        odd = [h for h, v in by_host.items() if v == value]
        if len(odd) == 1:
            other = next(v for v in values if v != value)
            return [(odd[0], what, value, other)]
    return []


def _fingerprint(st: RankState) -> tuple[int | None, str | None, str | None]:
    return st.entered, st.op, st.shape


def _majority_outliers(states: list[RankState]) -> list[RankState]:
    """Ranks whose collective (op or shape) differs from what most ranks ran at the same step."""
    with_fp = [s for s in states if s.op is not None and s.entered is not None and (s.waited or s.dumped)]
    if len(with_fp) < 3:
        return []
    counts: dict[tuple, int] = {}
    for s in with_fp:
        counts[_fingerprint(s)] = counts.get(_fingerprint(s), 0) + 1
    top = max(counts.values())
    common = [fp for fp, n in counts.items() if n == top]
    if len(common) != 1 or top * 2 <= len(with_fp):
        return []
    # a rank at another step is behind, not desynchronised: the rule for ranks that never entered takes it
    return [s for s in with_fp if _differs(s, common[0])]


def _differs(st: RankState, fp: tuple) -> bool:
    """Whether a rank at the fingerprint's step ran another collective or shape; a shape the log did not give
    (a peer's fingerprint as torch < 2.1 printed it) is not a difference."""
    step, op, shape = fp
    return st.entered == step and (st.op != op or (st.shape is not None and shape is not None and st.shape != shape))


def _split_step(states: list[RankState]) -> tuple[int, list[RankState]] | None:
    """A step at which the ranks in it ran different collectives or shapes and no majority says which one left
    the common path (two ranks, or an even split): the step and those ranks."""
    steps: dict[int, list[RankState]] = {}
    for s in states:
        if s.op is not None and s.entered is not None and (s.waited or s.dumped):
            steps.setdefault(s.entered, []).append(s)
    for step, ranks in sorted(steps.items()):
        if len(ranks) >= 2 and any(_differs(r, _fingerprint(ranks[0])) for r in ranks[1:]):
            return step, ranks
    return None


def _trace_behind(states: list[RankState]) -> tuple[list[RankState], list[RankState]] | None:
    """ProcessGroupWrapper's trace (TORCH_DISTRIBUTED_DEBUG=DETAIL) where the ranks' logs end: the ranks whose last
    traced collective is the latest one, and those behind it. Only for inputs read to their end: a live log's
    ranks trace their collectives moments apart, and a pause of its output says nothing."""
    traced = [s for s in states if s.trace_final and s.traced is not None]
    if len(traced) < 3:
        return None
    top = max(s.traced[0] for s in traced if s.traced is not None)
    ahead = [s for s in traced if s.traced is not None and s.traced[0] == top]
    behind = [s for s in traced if s.traced is not None and s.traced[0] < top]
    if not behind or len(ahead) < 2:
        return None
    return ahead, behind


def _same_op(a: str, b: str) -> bool:
    """ALLREDUCE and all_reduce, _ALLGATHER_BASE and allgather: one kind of collective."""
    def norm(op: str) -> str:
        return op.lower().replace("_", "").removesuffix("base").removesuffix("coalesced")
    return norm(a) == norm(b)


def _culprit(st: RankState, why: str, seq: int | None = None, op: str | None = None) -> Culprit:
    return Culprit(rank=st.rank, host=st.host, collective=op or st.op, seq=seq if seq is not None else st.entered,
                   why=why)


def decide(states: list[RankState], root_cause: int | None = None) -> Verdict:
    """Tell the rank that stopped from the ranks that waited for it.

    In order of how directly the logs say it: a rank a monitored barrier named; a rank whose
    collective differs from the others' at the same step (a desync); a rank that never
    entered the collective the others wait in (NCCL sequence numbers); a rank that raised an
    error of its own or was killed (not by the launcher's SIGTERM); a rank that alone neither
    waited nor failed while the others timed out. Otherwise the suspects, each with why (ranks that
    ran different collectives at one step with no majority to say which one diverged, among them).
    A job where no rank failed or timed out is read from where ProcessGroupWrapper's trace of each rank
    ends, for inputs read to their end.
    """
    if not _troubled_job(states):
        if (trace := _trace_behind(states)) is not None:
            return _trace_verdict(states, *trace)
        return Verdict(None, [], states, True, "no rank failed or timed out")
    note_rc = ""
    if root_cause is not None:
        note_rc = f"; torchelastic's 'Root Cause (first observed failure)' names rank {root_cause}"

    def found(st: RankState, why: str, seq: int | None = None, op: str | None = None) -> Verdict:
        extra = ""
        if root_cause is not None and root_cause != st.rank:
            extra = f" (torchelastic's 'Root Cause' names rank {root_cause}, the first to fail waiting: a victim)"
        return Verdict(_culprit(st, why + extra, seq, op), [], states, True, why + extra)

    accused = [s for s in states if _claim(s)]
    if len(accused) == 1:  # named directly: by a monitored barrier, or by NCCL RAS (with the collective it says)
        a, by_ras = accused[0], accused[0].ras if not accused[0].accused else None
        return found(a, f"rank {a.rank} {_claim(a)}", *((by_ras.seq, by_ras.op) if by_ras else (None, None)))
    if (lost := _host_gone(accused)) is not None:
        return Verdict(lost, [(s.rank, _claim(s) or "") for s in accused], states, True, lost.why + note_rc)
    outliers = _majority_outliers(states)
    if len(outliers) == 1:
        o = outliers[0]
        return found(o, f"rank {o.rank} ran {o.op}{' ' + o.shape if o.shape else ''} at collective {o.entered} "
                        "where the other ranks ran another collective or shape (a desync)")
    waiting_seqs = [s.entered for s in states if (s.waited or s.dumped) and s.entered is not None]
    if (late := _never_entered(states, waiting_seqs)) is not None:
        return found(*late)
    failed = [s for s in states if s.error or s.exitcode not in (None, 0, SIGTERM, 1) and not s.waited
              and not s.peer_lost]
    failed = [s for s in failed if not s.waited and not s.peer_lost]
    if failed:
        first = min(failed, key=lambda s: (s.first_trouble or 1 << 62, s.exit_order or 1 << 62))
        if len(failed) == 1 or first.first_trouble is not None:
            why = f"rank {first.rank} " + (f"raised {first.error}" if first.error else
                                           f"was killed (exit code {first.exitcode})")
            return found(first, why + " while the other ranks " + _others(states, first))
    waited = [s for s in states if s.waited or s.peer_lost or s.dumped]  # a dumped rank was in its collective
    silent = [s for s in states if not (s.waited or s.peer_lost or s.error or s.dumped or s.ras)]
    if waited and not any(s.waited for s in states):
        # every rank that spoke lost its peer, none timed out: a process died at once. A rank its own launcher
        # stopped afterwards (SIGTERM) was alive then: not the one that died
        silent = [s for s in silent if s.exitcode != SIGTERM]
    seen = {s.rank for s in states}
    if waited and 0 in seen:
        # ranks count from 0 without gaps: one below the highest seen that printed nothing was there, silent
        unseen = [RankState(r) for r in range(max(seen)) if r not in seen]
        silent += unseen
        states = sorted(states + unseen, key=lambda s: s.rank)
    only_dumps = not any(w.waited or w.peer_lost for w in waited)
    if waited and len(silent) == 1 and not (only_dumps and silent[0].dumped is False):
        # (a rank whose dump alone is missing may have lost it otherwise: a suspect, not the culprit)
        s = silent[0]
        op = next((w.op for w in waited if w.op), None)
        said = "printed nothing" if s.last_line is None and s.exitcode is None else "neither timed out nor failed"
        return found(s, f"rank {s.rank} {said} while every other rank the logs show timed out waiting "
                        f"in a collective: it never entered it", op=op,
                     seq=max(waiting_seqs) if waiting_seqs else None)
    if (split := _split_step(states)) is not None:
        return _split_verdict(states, *split, note_rc)
    suspects, note = _suspects(states, silent, bool(waited))
    return Verdict(None, suspects, states, False, note + note_rc)


def _never_entered(states: list[RankState], waiting_seqs: list[int]) -> tuple[RankState, str, int, str | None] | None:
    """The one rank that never entered the collective the others waited in (or entered, by their dumps): the rank,
    why, the collective's number and op."""
    if not waiting_seqs:
        return None
    target = max(waiting_seqs)
    op = next((s.op for s in states if s.waited and s.entered == target and s.op), None)
    op = op or next((s.op for s in states if s.entered == target and s.op), None)
    # sequence numbers count per process group: a rank waiting in another kind of collective may be in another
    # group (FSDP's all-gather beside the default group's all-reduce), and its number says nothing of this one
    behind = [s for s in states if s.entered is not None and s.entered < target
              and (op is None or s.op is None or _same_op(s.op, op))]
    if len(behind) != 1:
        return None
    b = behind[0]
    said = "entered (their Flight Recorder dumps)" if b.dumped else "waited in"
    return (b, f"rank {b.rank} never entered collective {target}{' (' + op + ')' if op else ''} that the other "
               f"ranks {said} (its last: {b.entered})", target, op)


def _split_verdict(states: list[RankState], step: int, ranks: list[RankState], note_rc: str) -> Verdict:
    """Ranks ran different collectives at one step and no majority says which one left the common path."""
    return Verdict(None, [(s.rank, f"ran {s.op}{' ' + s.shape if s.shape else ''} at collective {step}")
                          for s in ranks], states, False,
                   f"the logs cannot decide: ranks {', '.join(str(s.rank) for s in ranks)} ran different "
                   f"collectives or shapes at collective {step} (a desync) and no majority says which one left "
                   "the common path" + note_rc)


def _trace_verdict(states: list[RankState], ahead: list[RankState], behind: list[RankState]) -> Verdict:
    """No rank failed or timed out, and the ranks' ProcessGroupWrapper traces end at different collectives: the job
    hung there, and the rank behind never entered the collective the others did."""
    lead = ahead[0].traced
    assert lead is not None
    seq, op = lead[0], lead[1]
    if len(behind) == 1 and (last := behind[0].traced) is not None:
        b = behind[0]
        why = (f"rank {b.rank}'s log ends at collective {last[0]} ({last[1]}) while every other rank's had "
               f"entered collective {seq} ({op}) (ProcessGroupWrapper's trace; no rank printed an error): it never "
               "entered it")
        return Verdict(_culprit(b, why, seq, op), [], states, True, why)
    suspects = [(b.rank, f"its trace ends at collective {b.traced[0]} while other ranks entered {seq}")
                for b in behind if b.traced is not None]
    return Verdict(None, suspects, states, False,
                   f"the logs cannot decide between the suspects: the traces of ranks "
                   f"{', '.join(str(b.rank) for b in behind)} end before collective {seq}")


def _suspects(states: list[RankState], silent: list[RankState], waited: bool) -> tuple[list[tuple[int, str]], str]:
    """When no rank stands out: the silent ones, those that raised or were killed, each with why; else every
    rank. And the note that says the logs cannot decide."""
    suspects: list[tuple[int, str]] = [(s.rank, c) for s in states if (c := _claim(s))]
    for s in silent:
        suspects.append((s.rank, "left no Flight Recorder dump while the other ranks did" if s.dumped is False
                         else "printed no timeout and no error" + (" while others waited" if waited else "")))
    for s in states:
        if s.error:
            suspects.append((s.rank, f"raised {s.error}"))
        elif s.exitcode not in (None, 0, SIGTERM, 1) and not s.waited:
            suspects.append((s.rank, f"exit code {s.exitcode}"))
    suspects = _one_row_per_rank(suspects)
    missing = [str(s.rank) for s in states if s.dumped is False]
    if suspects and missing and len(missing) == len(suspects):
        return suspects, f"the logs cannot decide: the Flight Recorder dumps of rank(s) {', '.join(missing)} are missing"
    if suspects:
        return suspects, "the logs cannot decide between the suspects"
    in_step = [s for s in states if not (s.waited or s.peer_lost) and s.ras is not None and s.ras.kind == "in step"]
    if waited and in_step:
        # the ranks that said nothing are there only as NCCL RAS's report has them: in step, none behind or missing
        timed = [str(s.rank) for s in states if s.waited or s.peer_lost]
        return ([(s.rank, "NCCL RAS reports it in step" if s in in_step else "timed out waiting") for s in states],
                f"the logs cannot decide: rank(s) {', '.join(timed[:8])}{', …' if len(timed) > 8 else ''} timed out "
                "waiting while NCCL RAS reports every other rank in step (no count behind, no process missing)")
    why = "every rank that reported timed out waiting" if waited else "the ranks' lines do not say"
    note = ("the logs cannot decide: every rank joined and none finished"
            if waited and not silent else "the logs cannot decide which rank stopped first")
    return [(s.rank, why) for s in states], note


def _one_row_per_rank(suspects: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """A rank suspected for several reasons (silent, and an exit code of its own) is one suspect, its reasons
    joined, in the order first given."""
    merged: dict[int, list[str]] = {}
    for rank, why in suspects:
        if why not in merged.setdefault(rank, []):
            merged[rank].append(why)
    return [(rank, "; ".join(whys)) for rank, whys in merged.items()]


def _troubled_job(states: list[RankState]) -> bool:
    """Whether any rank failed, timed out, was named, or stands out in the dumps or NCCL RAS's report."""
    dumped_at = {s.entered for s in states if s.dumped}
    return any(s.waited or s.peer_lost or s.error or s.accused or (s.exitcode not in (None, 0, SIGTERM))
               or s.dumped is False or (s.dumped and len(dumped_at) > 1)
               or (s.ras is not None and (s.ras.claim or s.ras.kind in ("dead", "unresponsive", "error")))
               for s in states)


def _claim(s: RankState) -> str | None:
    """What names a rank directly, worded to follow "rank N ": a monitored barrier's report, or the last NCCL RAS
    report's (its process dead or unresponsive, an error of its own, its count of a collective behind)."""
    if s.accused:
        return s.accused[0]
    return s.ras.why if s.ras is not None and s.ras.claim else None


def _host_gone(accused: list[RankState]) -> Culprit | None:
    """Several ranks NCCL RAS cannot reach, all on one host: the host is the culprit (lost whole, or its
    processes stopped), its ranks the suspects."""
    gone = [s for s in accused if not s.accused and s.ras is not None and s.ras.kind in ("dead", "unresponsive")]
    hosts = {s.host for s in gone}
    if len(accused) < 2 or len(gone) != len(accused) or len(hosts) != 1 or None in hosts:
        return None
    host = str(hosts.pop())
    kinds = " or ".join(sorted({s.ras.kind for s in gone if s.ras is not None}))
    why = (f"host {host}: NCCL RAS reports its ranks {', '.join(str(s.rank) for s in gone)} {kinds} and no rank "
           "on another host: the host or its processes stopped")
    return Culprit(rank=None, host=host, collective=None, seq=None, why=why)


def _others(states: list[RankState], culprit: RankState) -> str:
    rest = [s for s in states if s is not culprit]
    if rest and all(s.waited for s in rest):
        return "timed out waiting"
    if rest and all(s.waited or s.peer_lost or s.exitcode == SIGTERM for s in rest):
        return "lost it or were stopped by the launcher"
    return "waited or were stopped"


def host_of_file(path: str) -> str | None:
    """The host a file is named for, when its path names no rank: `logs/node-b.log` -> `node-b`."""
    if rank_of_path(path) != (None, None):
        return None
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    for suffix in (".gz", ".log", ".txt", ".out", ".err"):
        name = name.removesuffix(suffix)
    return name or None


def join_cause(verdict: Verdict, diagnoses: list["Diagnosis"], several_files: bool) -> "Diagnosis | None":
    """The diagnosis that explains the hang on the culprit's host: a root cause whose symptoms (the
    taxonomy's `explains` links, engine.correlate) include what the ranks printed, found in the culprit's
    host's lines (a journal's host field, or the file named for the host)."""
    c = verdict.culprit
    if c is None:
        return None
    hosts = {s.host for s in verdict.ranks if s.host}
    for d in diagnoses:
        if not d.symptoms or not d.evidence:
            continue
        ev = d.evidence[0]
        host = normalize(ev.text, ev.path).host or (host_of_file(ev.path) if several_files else None)
        if c.host and host in hosts and host != c.host:
            continue  # another host's trouble
        if c.host and host is not None and host not in hosts and host != c.host and several_files:
            continue
        lead = cause_lead(verdict, d)
        if lead is not None and lead < -CAUSE_AFTER_S:
            continue  # logged after the ranks had failed, on the aligned clock: it cannot explain them
        return d
    return None


def cause_lead(verdict: Verdict, cause: "Diagnosis") -> float | None:
    """How many seconds the cause's line came before the first failure the ranks' hosts reported, both on the
    reference host's clock; None when either has no time, or the logs came from one host (or hosts whose clocks
    could not be aligned): one log's formats need not agree on the date (a year-less glog line beside a
    journal's), and only a shared event ties clocks together."""
    if verdict.failed_at is None or not verdict.clocks or not cause.evidence:
        return None
    ev = cause.evidence[0]
    rec = normalize(ev.text, ev.path)
    t = verdict.aligned(rec.host or host_of_file(ev.path), rec.timestamp)
    return None if t is None else round(verdict.failed_at - t, 3)


def _cause_words(cause: "Diagnosis | None", lead: float | None, aligned: bool) -> str:
    if cause is None:
        return ""
    ev = cause.evidence[0]
    name = ev.path.replace("\\", "/").rsplit("/", 1)[-1]
    when = ""
    if lead is not None:
        when = (f" {abs(lead):.0f} s {'before' if lead >= 0 else 'after'} the first failure the ranks reported"
                f"{' (host clocks aligned)' if aligned else ''}")
    return f"; its host logged {cause.title} ({cause.class_}, {name}:{ev.line}){when}, which explains the timeouts"


def _rank_verdict(st: RankState, verdict: Verdict) -> str:
    if verdict.culprit is not None and verdict.culprit.rank == st.rank:
        return "culprit"
    if any(r == st.rank for r, _ in verdict.suspects):
        return "suspect"
    if st.error:
        return "failed"
    if st.waited:
        return "timed out"
    if st.peer_lost:
        return "lost peer"
    if st.exitcode == SIGTERM:
        return "stopped by launcher"
    if st.dumped and st.entered is not None and (st.completed is None or st.completed < st.entered) \
            and (verdict.culprit is not None or verdict.suspects):
        return "in collective"
    if st.trace_final and st.traced is not None and st.entered is None \
            and (verdict.culprit is not None or verdict.suspects):
        return "in collective"
    if st.ras is not None and st.ras.kind != "in step":  # dead, unresponsive, behind: what NCCL RAS says
        return {"peer error": "lost peer", "error": "failed"}.get(st.ras.kind, st.ras.kind)
    if st.ras is not None and (verdict.culprit is not None or verdict.suspects):
        return "in step"
    if st.exitcode not in (None, 0):
        return "failed"
    return "ok"


def _quiet_outlier(verdict: Verdict) -> list["HangOutlier"]:
    """The host that went quiet first, as the report's outlier (kind quiet)."""
    from qwen_triage.redact import redact_text
    from qwen_triage.report.model import HangOutlier

    if verdict.quiet is None:
        return []
    host, lead = verdict.quiet
    when = f"{lead:.1f} s before the first failure the other hosts reported" if lead is not None else \
        "before the other hosts' ranks failed"
    return [HangOutlier(host=redact_text(host), what="went quiet first", value=f"its log stops {when}",
                        others="reported failures, timeouts or exits", kind="quiet", quiet_lead_s=lead)]


def _stage_outlier(verdict: Verdict) -> list["HangOutlier"]:
    """The host whose log got to an earlier launch stage than every other host's (kind stage)."""
    from qwen_triage.redact import redact_text
    from qwen_triage.report.model import HangOutlier

    if verdict.behind is None:
        return []
    host, its, others = verdict.behind
    return [HangOutlier(host=redact_text(host), what="launch stage", value=its, others=others, kind="stage")]


def _entered(s: RankState) -> int | None:
    """The last collective a rank entered as the report shows it: its own lines', else NCCL RAS's count, else the
    last one ProcessGroupWrapper traced for it."""
    if s.entered is not None:
        return s.entered
    if s.ras is not None:
        return s.ras.count
    return s.traced[0] if s.traced is not None else None


def to_report(verdict: Verdict, cause: "Diagnosis | None" = None) -> "Hang":
    """The report's `hang` object (report.model.Hang), text from the logs redacted."""
    from qwen_triage.redact import redact_text
    from qwen_triage.report.model import Evidence, Hang, HangClock, HangCulprit, HangOutlier, HangRank, HangSuspect

    def clean(text: str | None) -> str | None:
        return None if text is None else redact_text(text)

    c = verdict.culprit
    lead = None if cause is None else cause_lead(verdict, cause)
    words = _cause_words(cause, lead, bool(verdict.clocks))
    return Hang(
        culprit=None if c is None else HangCulprit(rank=c.rank, host=clean(c.host), collective=c.collective,
                                                  seq=c.seq, why=redact_text(c.why + words)),
        cause=cause,
        cause_lead_s=lead,
        clocks=[HangClock(host=redact_text(h), clock_offset_s=o) for h, o in sorted(verdict.clocks.items())],
        outliers=[HangOutlier(host=redact_text(h), what=what, value=redact_text(value), others=redact_text(others))
                  for h, what, value, others in verdict.outliers] + _quiet_outlier(verdict) + _stage_outlier(verdict),
        suspects=[HangSuspect(rank=r, why=redact_text(why)) for r, why in verdict.suspects],
        ranks=[
            HangRank(rank=s.rank, local_rank=s.local_rank, host=clean(s.host),
                     entered=_entered(s), completed=s.completed,
                     collective=s.op or (s.ras.op if s.ras else None) or (s.traced[1] if s.traced else None),
                     exitcode=s.exitcode,
                     error=clean(s.error or (s.ras.error if s.ras and s.ras.kind == "error" else None)),
                     last_line=None if (line := s.last_line or (s.ras.line if s.ras else None)) is None else
                     Evidence(path=line[0], line=line[1], text=redact_text(line[2])),
                     verdict=_rank_verdict(s, verdict))
            for s in verdict.ranks
        ],
        summary=redact_text(verdict.note),
    )
