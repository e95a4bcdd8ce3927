"""NCCL RAS output (`ncclras`, NCCL 2.24+) as an input: the ranks NCCL's own health check found dead, unresponsive,
in error or behind on a collective, for engine.hang.

NCCL's RAS threads (src/ras/ in NVIDIA/nccl) watch every process of a job; the `ncclras` client (or
`echo status | nc localhost 28028`) prints what they know: a job summary, a table of the communicators, then
*Errors* (job processes missing or considered dead; per communicator the ranks missing and the ranks that reported
an error) and *Warnings* (per communicator, ranks whose status or collective operation counts differ from the
others'). Since 2.28.7 `ncclras -f json` prints the raw data instead: per communicator each rank with its host,
pid, status flags and per-collective counts, and the missing ranks with `unresponsive` / `considered_dead`.

The text templates are those of src/ras/client_support.cc (``rasClientRunInit``, ``rasClientRunComms``,
``rasClientBreakDownErrors``): 2.24 and 2.25 print "different collective operation counts" (one count for all
collectives) and "The missing ranks: 3,5"; 2.26 and later one section per collective type ("different AllReduce
operation counts") and each missing rank on a line of its own with its GPU, process and node. The JSON keys are
its ``jsonWrite*`` functions'. A text report's lines reach :class:`TextReader` through the prefilter's pass
(signal "ras", engine.hang's ``RAS_PATTERN``), so a log without one costs nothing; a JSON report (an input whose first key is
``nccl_version``, pretty-printed as NCCL writes it or compacted) is read whole (:func:`load_json`).

RAS is the runtime's own view of a live job: a rank it cannot reach, or whose count of launched operations stays
below the others', is named directly. :func:`places` turns one report into each rank's place; engine.hang decides
beside the logs. RAS numbers a communicator's ranks: those of the job's one largest communicator (torch's default
process group spans the world) are taken as the global ranks, and a rank of a smaller communicator is mapped to
its global rank through its process (host, pid, GPU) where the report places that process in the largest one too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from qwen_triage.inputs.source import MAX_WHOLE
from qwen_triage.lazyre import lazy
from qwen_triage.units import bounded_int

MAX_RANKS = 65536
MAX_COMMS = 4096  # communicators kept of one report
MAX_PROCESSES = 4096  # dead or missing processes kept of one report
MAX_LINE_KEPT = 400

# The collective types RAS counts, in its order (src/init.cc ncclFuncStr; JSON: ncclFuncToString, the same names)
COLLECTIVES = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
ALL = "collective"  # 2.24-2.25: one count for every collective type ("different collective operation counts")
# ncclResult_t (src/nccl.h.in) as client_support.cc's ncclErrorToString words it; 7 (in progress) is no error
ERRORS = {1: "Unhandled CUDA error", 2: "System error", 3: "Internal error", 4: "Invalid argument",
          5: "Invalid usage", 6: "Remote process error", 8: "Unexpected error"}
REMOTE = "Remote process error"  # ncclRemoteError: a peer failed, this rank only saw it
IN_PROGRESS = 7


_VERSION = lazy(r"NCCL version (?P<v>\S{1,40}) compiled with CUDA")
_COMMUNICATORS = lazy(r"^Communicators\.\.\. \(")
_ROW = lazy(r"^(?P<group>\d{1,6})\s+(?P<comms>\d{1,6})\s+(?P<nodes>\d{1,6})\s+(?P<pernode>\d{1,6}(?:-\d{1,6})?)\s+"
            r"(?P<size>\d{1,7})\s+(?P<total>\d{1,7})\s+(?P<status>NOCOMM|UNKNOWN|INIT|RUNNING|FINALIZE|ABORT)\s+"
            r"(?P<errors>(?:OK|MISMATCH|ERROR|INCOMPLETE)(?:,(?:MISMATCH|ERROR))*)$")
_PROCS_MISSING = lazy(r"^Missing communicator data from (?P<n>\d{1,7}) job process")
_PROCS_DEAD = lazy(r"^(?P<n>\d{1,7}) job process(?:es are| is) considered dead")
_PROCESS = lazy(r"^Process (?P<pid>\d{1,10}) on node (?P<host>\S{1,255}) managing GPUs? (?P<gpus>[\d,]{1,200})")
_COMM = lazy(r"^#(?P<group>\d{1,6})-(?P<index>\d{1,6}) \((?P<hash>[0-9a-f]{1,16})\) (?P<what>INCOMPLETE|ERROR|MISMATCH)$")
_RANKS_MISSING = lazy(r"^Missing communicator data from (?P<n>\d{1,7}) ranks?$")
_MISSING_LIST = lazy(r"^The missing ranks?: (?P<ranks>\d[\d,]{0,2000})$")
_ERRORS_ON = lazy(r"^(?P<kind>Initialization|Asynchronous) errors? on \d{1,7} ranks?$")
_RANKS_REPORTED = lazy(r"^(?P<n>\d{1,7}) ranks reported (?P<err>.{1,80})$")
_DIFFERENT = lazy(r"^Communicator ranks have different (?:(?P<status>status)|(?P<op>\w{1,40}) operation counts)$")
_RANKS_STATUS = lazy(r"^(?P<n>\d{1,7}) ranks have status (?P<status>\w{1,20})$")
_RANKS_LAUNCHED = lazy(r"^(?P<n>\d{1,7}) ranks have (?:launched up to operation (?P<count>\d{1,20})"
                       r"|not launched any operations)$")
# `Rank 5 -- GPU 1 managed by process 48213 on node 10.0.0.12`, `Rank 3 has launched up to operation 1207 -- GPU 3
# (NVML 5) managed by …`, `Rank 2 reported Remote process error -- [process information not found]`
_RANK = lazy(r"^Rank (?P<rank>\d{1,7})(?: has status (?P<status>\w{1,20})"
             r"| has launched up to operation (?P<count>\d{1,20})| has not launched any operations(?P<none>)"
             r"| reported (?P<err>.{1,80}?))? -- (?:GPU (?P<gpu>\d{1,4}(?: \(NVML \d{1,4}\))?) managed by process "
             r"(?P<pid>\d{1,10}) on node (?P<host>\S{1,255})|\[process information not found\])$")
_TIMEOUTS = lazy(r"^Encountered (?P<n>\d{1,7}) communication timeouts? while gathering communicator data")


class RasError(ValueError):
    """Not an NCCL RAS JSON report this reader understands."""


@dataclass
class Member:
    """One rank of one communicator, as the report gives it (the text lists only the ranks that stand out)."""

    rank: int  # the communicator's rank
    host: str | None = None  # the node's address, as RAS prints it
    pid: int | None = None
    gpu: str | None = None  # CUDA device (with its NVML index where they differ)
    counts: dict[str, int] = field(default_factory=dict)  # collective -> operations launched up to
    status: str | None = None  # INIT, RUNNING, FINALIZE, ABORT, NOCOMM
    error: str | None = None  # the NCCL error it reported (ncclErrorToString's words)
    error_kind: str | None = None  # initialization or asynchronous
    missing: str | None = None  # dead, unresponsive (no data from its process) or nocomm (reachable, not a member)
    line: tuple[str, int, str] | None = None  # where the report names it: path, line, text


@dataclass
class Comm:
    """One communicator of a report."""

    name: str  # `#0-0` (the text's group and index) or its hash (JSON)
    hash: str | None = None
    size: int | None = None
    members: dict[int, Member] = field(default_factory=dict)
    # text: per collective, its groups of ranks with one count: [ranks, count, ranks listed one by one]
    groups: dict[str, list[list[int]]] = field(default_factory=dict)

    def member(self, rank: int) -> Member | None:
        if not 0 <= rank < MAX_RANKS:
            return None
        m = self.members.get(rank)
        if m is None:
            m = self.members[rank] = Member(rank)
        return m

    def top(self, op: str) -> int | None:
        """The highest count of ``op`` any rank launched."""
        counts = [g[1] for g in self.groups.get(op, ())] or [m.counts[op] for m in self.members.values()
                                                              if op in m.counts]
        return max(counts) if counts else None

    def rest(self, op: str) -> int | None:
        """The count of ``op`` of the ranks the text does not list one by one: the one group it does not list."""
        unlisted = [g for g in self.groups.get(op, ()) if g[2] < g[0]]
        return unlisted[0][1] if len(unlisted) == 1 and unlisted[0][2] == 0 else None


@dataclass
class Process:
    pid: int
    host: str
    gpus: str
    line: tuple[str, int, str]


@dataclass
class Report:
    """One RAS status report (text or JSON)."""

    path: str
    order: int = 0  # when it started, in the scan's order
    version: str | None = None
    comms: dict[str, Comm] = field(default_factory=dict)
    dead: list[Process] = field(default_factory=list)  # job processes considered dead (text)
    unreachable: list[Process] = field(default_factory=list)  # job processes it got no data from (text)
    timeouts: int = 0  # communication timeouts while gathering the data (a process that did not answer)

    def comm(self, name: str) -> Comm | None:
        c = self.comms.get(name)
        if c is None and len(self.comms) < MAX_COMMS:
            c = self.comms[name] = Comm(name)
        return c


def _kept(path: str, line: int, text: str) -> tuple[str, int, str]:
    return path, line, text[:MAX_LINE_KEPT]


class TextReader:
    """The lines of RAS text reports of one input, in order; :attr:`reports` the last two (the last may be still
    coming in a live session)."""

    def __init__(self) -> None:
        self.reports: list[Report] = []
        self._section: str | None = None  # dead, unreachable, incomplete, error, status, counts
        self._comm: Comm | None = None
        self._op: str = ALL
        self._value: int | str | None = None  # the value of the group whose ranks follow ("N ranks have …")
        self._error_kind: str | None = None

    @property
    def current(self) -> Report | None:
        return self.reports[-1] if self.reports else None

    def _start(self, path: str, order: int) -> Report:
        self.reports = [*self.reports[-1:], Report(path=path, order=order)]
        self._section, self._comm, self._value = None, None, None
        return self.reports[-1]

    def feed(self, message: str, path: str, line: int, text: str, order: int) -> None:
        """One line the prefilter found (its message: a log prefix dropped)."""
        msg = message.strip()
        if m := _VERSION.search(msg):
            self._start(path, order).version = m["v"]
            return
        report = self.current
        if _COMMUNICATORS.match(msg):
            if report is None or report.comms or report.dead or report.unreachable:
                report = self._start(path, order)  # a report pasted from its communicators on
            return
        if report is None:
            return  # a line like a report's with no report started: not RAS output
        at = _kept(path, line, text)
        if m := _ROW.match(msg):
            size, comms = bounded_int(m["size"]) or 0, bounded_int(m["comms"]) or 0
            for i in range(min(comms, MAX_COMMS)):
                c = report.comm(f"#{m['group']}-{i}")
                if c is not None:
                    c.size = size
            return
        if m := _COMM.match(msg):
            self._comm = report.comm(f"#{m['group']}-{m['index']}")
            if self._comm is not None:
                self._comm.hash = m["hash"]
            self._section = {"INCOMPLETE": "incomplete", "ERROR": "error", "MISMATCH": None}[m["what"]]
            self._value = None
            return
        if _PROCS_DEAD.match(msg):
            self._section, self._comm = "dead", None
            return
        if _PROCS_MISSING.match(msg):
            self._section, self._comm = "unreachable", None
            return
        if m := _PROCESS.match(msg):
            procs = report.dead if self._section == "dead" else report.unreachable if self._section == "unreachable" \
                else None
            pid = bounded_int(m["pid"])
            if procs is not None and pid is not None and len(procs) < MAX_PROCESSES:
                procs.append(Process(pid, m["host"], m["gpus"], at))
            return
        if m := _TIMEOUTS.match(msg):
            report.timeouts = bounded_int(m["n"]) or 0
            return
        comm = self._comm
        if comm is None:
            return
        if m := _MISSING_LIST.match(msg):  # 2.24-2.25: the numbers only
            for r in m["ranks"].split(",")[:MAX_RANKS]:
                if (n := bounded_int(r)) is not None and (mem := comm.member(n)) is not None:
                    mem.missing, mem.line = mem.missing or "unresponsive", mem.line or at
            return
        if _RANKS_MISSING.match(msg):
            return
        if m := _ERRORS_ON.match(msg):
            self._section, self._value = "error", None
            self._error_kind = "initialization" if m["kind"] == "Initialization" else "asynchronous"
            return
        if m := _RANKS_REPORTED.match(msg):
            self._value = m["err"]
            return
        if m := _DIFFERENT.match(msg):
            self._section, self._value = ("status", None) if m["status"] else ("counts", None)
            self._op = m["op"] if m["op"] in COLLECTIVES else ALL
            return
        if m := _RANKS_STATUS.match(msg):
            self._value = m["status"]
            return
        if m := _RANKS_LAUNCHED.match(msg):
            n, count = bounded_int(m["n"]) or 0, bounded_int(m["count"]) if m["count"] else 0
            self._value = count
            if len(comm.groups.setdefault(self._op, [])) < MAX_RANKS and count is not None:
                comm.groups[self._op].append([n, count, 0])
            return
        if m := _RANK.match(msg):
            self._rank(comm, m, at)

    def _rank(self, comm: Comm, m: re.Match[str], at: tuple[str, int, str]) -> None:
        """A rank's line, read by the section it is in (the group it belongs to when it names no value)."""
        rank = bounded_int(m["rank"])
        mem = comm.member(rank) if rank is not None else None
        if mem is None:
            return
        if m["host"]:
            mem.host, mem.pid, mem.gpu = m["host"], bounded_int(m["pid"]), m["gpu"]
        section = self._section
        if section == "incomplete":
            mem.missing = "unresponsive"
        elif section == "status":
            mem.status = m["status"] or (self._value if isinstance(self._value, str) else None)
        elif section == "counts":
            single = m["count"] is not None or m["none"] is not None
            count = (bounded_int(m["count"]) if m["count"] else 0) if single else self._value
            if isinstance(count, int):
                mem.counts[self._op] = count
                groups = comm.groups.setdefault(self._op, [])
                if single:
                    groups.append([1, count, 1])
                elif groups:
                    groups[-1][2] += 1
        elif section == "error":
            err = m["err"] or (self._value if isinstance(self._value, str) else None)
            if err:
                mem.error, mem.error_kind = err, self._error_kind
        else:
            return
        mem.line = at


def load_json(data: bytes, path: str, order: int = 0) -> Report:
    """A JSON report (`ncclras -f json`, NCCL 2.28.7+); :class:`RasError` when it is not one."""
    if len(data) > MAX_WHOLE:
        raise RasError(f"larger than {MAX_WHOLE >> 20} MiB")
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise RasError(f"unreadable ({type(exc).__name__})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("communicators"), list):
        raise RasError("no communicators")
    report = Report(path=path, order=order, version=_str(obj.get("nccl_version")))
    ras = obj.get("ras")
    if isinstance(ras, dict) and isinstance(ras.get("timeouts_count"), int):
        report.timeouts = ras["timeouts_count"]
    for i, c in enumerate(obj["communicators"][:MAX_COMMS]):
        if not isinstance(c, dict):
            continue
        name = _str(c.get("hash")) or f"#{i}"
        comm = report.comm(f"{name}#{i}" if name in report.comms else name)
        if comm is None:
            break
        comm.hash = name
        comm.size = c["size"] if isinstance(c.get("size"), int) else None
        for r in _dicts(c.get("ranks")):
            mem = _member(comm, r)
            if mem is None:
                continue
            counts = r.get("collective_counts")
            if isinstance(counts, dict):
                mem.counts = {k: v for k, v in counts.items() if k in COLLECTIVES and isinstance(v, int)}
            st = _dict(r.get("status"))
            mem.status = _status(st)
            for key, kind in (("init_state", "initialization"), ("async_error", "asynchronous")):
                code = st.get(key)
                if isinstance(code, int) and code not in (0, IN_PROGRESS) and mem.error is None:
                    mem.error, mem.error_kind = ERRORS.get(code, ERRORS[8]), kind
        for r in _dicts(c.get("missing_ranks")):
            mem = _member(comm, r)
            st = _dict(r.get("status"))
            if mem is not None:
                mem.missing = "dead" if st.get("considered_dead") is True else \
                    "unresponsive" if st.get("unresponsive") is True else "nocomm"
    return report


def _dict(v: object) -> dict:
    return v if isinstance(v, dict) else {}


def _str(v: object) -> str | None:
    return v[:200] if isinstance(v, str) else None


def _dicts(v: object) -> list[dict]:
    return [x for x in v[:MAX_RANKS] if isinstance(x, dict)] if isinstance(v, list) else []


def _member(comm: Comm, r: dict) -> Member | None:
    rank = r.get("rank")
    mem = comm.member(rank) if isinstance(rank, int) and not isinstance(rank, bool) else None
    if mem is None:
        return None
    host = _str(r.get("host"))
    mem.host = host if host and host != "unknown" else None  # client_support.cc writes "unknown", pid -1
    mem.pid = r["pid"] if isinstance(r.get("pid"), int) and r["pid"] >= 0 else None
    cuda, nvml = r.get("cuda_dev"), r.get("nvml_dev")
    if isinstance(cuda, int):
        mem.gpu = str(cuda) if nvml in (None, cuda) else f"{cuda} (NVML {nvml})"
    return mem


def _status(st: dict) -> str:
    """The status the text would print for one rank (rasClientRunComms: abort, then finalize, then init state)."""
    if st.get("abort_flag") is True:
        return "ABORT"
    if st.get("finalize_called") is True or st.get("destroy_flag") is True:
        return "FINALIZE"
    return "RUNNING" if st.get("init_state") == 0 else "INIT"


# -- what a report says of each rank ------------------------------------------------------------------------------

LEVELS = {"dead": 3, "unresponsive": 3, "error": 2, "behind": 1}  # which kind names a culprit, strongest first


@dataclass
class Place:
    """One global rank's place in a report, for engine.hang."""

    rank: int
    kind: str  # dead, unresponsive, error, peer error, behind, in step
    why: str = ""  # what RAS says of it, worded to follow "rank N "
    claim: bool = False  # RAS names it as stopping: its kind is the strongest any rank has (LEVELS)
    host: str | None = None
    op: str | None = None  # the collective it is behind on (None: every type, 2.24-2.25, or not known)
    count: int | None = None  # the operations of that collective it launched
    seq: int | None = None  # behind: the operation the others launched and it did not
    error: str | None = None
    progressing: bool = False  # behind, but the others' count went up since the previous report
    line: tuple[str, int, str] | None = None


@dataclass
class Places:
    """What one report says of the job's ranks."""

    ranks: dict[int, Place]
    world: Comm | None
    note: str = ""  # what the report says that is not any rank's (dead processes it cannot place, progress)


def world_of(report: Report) -> Comm | None:
    """The job's one largest communicator: its ranks are the global ranks. None when several share that size
    (no communicator spans the job), or none says its size and more than one is listed."""
    sized = [c for c in report.comms.values() if c.size is not None]
    if sized:
        top = max(c.size or 0 for c in sized)
        largest = [c for c in sized if c.size == top]
        return largest[0] if len(largest) == 1 and top > 1 else None
    return next(iter(report.comms.values())) if len(report.comms) == 1 else None


def _process_key(host: str | None, pid: int | None, gpu: str | None) -> tuple[str, int, str] | None:
    return (host, pid, (gpu or "").split(" ", 1)[0]) if host and pid is not None else None


def places(report: Report, previous: Report | None = None) -> Places:
    """Each global rank's place in ``report``: the kind of trouble RAS reports of it, and whether that names it
    (the strongest kind any rank has: a dead or unresponsive process, then an error of its own, then a count of
    launched operations below the others'). ``previous``: an earlier report of the same job; a communicator whose
    counts went up since it is progressing, and a rank behind in it is not named."""
    world = world_of(report)
    out: dict[int, Place] = {}
    if world is None:
        note = "NCCL RAS: no one communicator spans the job, so its ranks cannot be placed" if report.comms else ""
        return Places(out, None, note)
    _join_lone_process(world, report)
    global_of: dict[tuple[str, int, str], int] = {}
    for m in world.members.values():
        if (key := _process_key(m.host, m.pid, m.gpu)) is not None:
            global_of[key] = m.rank
    dead = {(p.host, p.pid) for p in report.dead}
    for comm in [world, *(c for c in report.comms.values() if c is not world)]:
        for m in comm.members.values():
            key = _process_key(m.host, m.pid, m.gpu)
            rank = m.rank if comm is world else global_of.get(key) if key is not None else None
            place = _place(comm, m, dead, previous) if rank is not None else None
            if place is None or rank is None:
                continue
            place.rank = rank
            have = out.get(rank)
            if have is None or LEVELS.get(place.kind, 0) > LEVELS.get(have.kind, 0):
                out[rank] = place
    _unlisted_behind(out, world, previous)
    _in_step(out, world)
    strongest = max((LEVELS.get(p.kind, 0) for p in out.values() if not p.progressing), default=0)
    for p in out.values():
        p.claim = strongest > 0 and LEVELS.get(p.kind, 0) == strongest and not p.progressing
    notes = []
    placed = {(m.host, m.pid) for c in report.comms.values() for m in c.members.values()
              if m.missing in ("dead", "unresponsive")}
    for procs, what in ((report.dead, "considers dead"), (report.unreachable, "got no data from")):
        lost = [p for p in procs if (p.host, p.pid) not in placed]  # no rank of theirs listed: none to name
        if lost:
            notes.append(f"NCCL RAS {what} " + ", ".join(f"process {p.pid} on node {p.host} (GPU {p.gpus})"
                                                         for p in lost[:8]))
    if report.timeouts:
        notes.append(f"NCCL RAS met {report.timeouts} communication timeout(s) while gathering its data")
    if strongest == LEVELS["behind"] and previous is None:
        notes.append("one NCCL RAS report: a count behind can be collectives in flight (NCCL's guide); the same "
                     "counts in a later report confirm it")
    if any(p.progressing for p in out.values()):
        notes.append("NCCL RAS: the operation counts went up since the previous report (the job is progressing)")
    return Places(out, world, "; ".join(notes))


def _join_lone_process(world: Comm, report: Report) -> None:
    """2.24-2.25 list a communicator's missing ranks by number only (`The missing rank: 21`): when the report lists
    one dead (or one silent) process and the world one such rank, that rank is that process's."""
    bare = [m for m in world.members.values() if m.missing and m.host is None]
    procs = report.dead or report.unreachable
    if len(bare) == 1 and len(procs) == 1 and "," not in procs[0].gpus:
        bare[0].host, bare[0].pid, bare[0].gpu = procs[0].host, procs[0].pid, procs[0].gpus


def _unlisted_behind(out: dict[int, Place], world: Comm, previous: Report | None) -> None:
    """The text lists the ranks of the smaller groups one by one: when the ranks it lists are the ones ahead
    (`30 ranks have launched up to operation 640`, `2 ranks have launched up to operation 641`, then ranks 12 and 13),
    the ranks it does not list are the ones behind (NVIDIA/nccl#1911: the 30 are the stragglers, not 12 and 13)."""
    ranks = range(min(world.size, MAX_RANKS)) if world.size is not None else sorted(world.members)
    for op in world.groups:
        rest, top = world.rest(op), world.top(op)
        if rest is None or top is None or rest >= top:
            continue
        listed = {m.rank for m in world.members.values() if op in m.counts}
        what = "collective" if op == ALL else op
        ahead = ", ".join(str(r) for r in sorted(listed)[:8]) + (", …" if len(listed) > 8 else "")
        before = _previous_top(previous, world, op)
        progressing = before is not None and before < top
        hash_ = f" ({world.hash})" if world.hash and world.hash != world.name else ""
        why = (f"launched {what} operations only up to {rest}, with every rank the report does not list, where "
               f"rank(s) {ahead} of communicator {world.name}{hash_} launched up to {top} (NCCL RAS" +
               (f"; up from {before} in the previous report: progressing)" if progressing else ")"))
        for r in ranks:
            m = world.members.get(r)
            if r in out or r in listed or (m is not None and m.missing == "nocomm"):
                continue
            out[r] = Place(r, "behind", why, host=m.host if m else None, op=None if op == ALL else op, count=rest,
                           seq=top, progressing=progressing)


def _in_step(out: dict[int, Place], world: Comm) -> None:
    """The world's ranks RAS reports nothing against are in step: with the count of the collective others are
    behind on, where the report gives it (the text lists one group of counts only as a number)."""
    op = next((p.op or ALL for p in out.values() if p.kind == "behind"), None)
    ranks = range(min(world.size, MAX_RANKS)) if world.size is not None else sorted(world.members)
    for r in ranks:
        if r in out:
            continue
        m = world.members.get(r)
        if m is not None and m.missing == "nocomm":
            continue  # reachable but no longer a member: finalised or destroyed
        count = m.counts.get(op) if m is not None and op is not None else None
        if count is None and op is not None:
            count = world.rest(op)
        out[r] = Place(r, "in step", host=m.host if m else None, op=None if op in (None, ALL) else op, count=count,
                       line=m.line if m else None)


def _place(comm: Comm, m: Member, dead: set[tuple[str, int]], previous: Report | None) -> Place | None:
    """What one member's lines say (None: nothing but that it is there)."""
    where = f"of communicator {comm.name}" + (f" ({comm.hash})" if comm.hash and comm.hash != comm.name else "")
    process = f"its process {m.pid} on node {m.host}" if m.pid is not None and m.host else "its process"
    if m.missing in ("dead", "unresponsive"):
        if m.missing == "dead" or (m.host, m.pid) in dead:
            return Place(m.rank, "dead", f"is considered dead by NCCL RAS: {process} is unreachable via the RAS "
                                         f"network (rank {m.rank} {where})", host=m.host, line=m.line)
        return Place(m.rank, "unresponsive", f"did not answer NCCL RAS: {process} gave no data for rank {m.rank} "
                                             f"{where}", host=m.host, line=m.line)
    if m.error is not None:
        kind = "peer error" if m.error == REMOTE else "error"
        return Place(m.rank, kind, f"reported {m.error} to NCCL RAS ({m.error_kind or 'an'} error, rank {m.rank} "
                                   f"{where})", host=m.host, error=m.error, line=m.line)
    for op in sorted(m.counts, key=lambda o: (o == ALL, o)):
        top, count = comm.top(op), m.counts[op]
        if top is None or count >= top:
            continue
        what = "collective" if op == ALL else op
        did = f"launched {what} operations only up to {count}" if count else f"launched no {what} operation"
        before = _previous_top(previous, comm, op)
        progressing = before is not None and before < top
        why = f"{did} where other ranks {where} launched up to {top} (NCCL RAS" + \
            (f"; up from {before} in the previous report: progressing)" if progressing else ")")
        return Place(m.rank, "behind", why, host=m.host, op=None if op == ALL else op, count=count, seq=top,
                     progressing=progressing, line=m.line)
    return None


def _previous_top(previous: Report | None, comm: Comm, op: str) -> int | None:
    if previous is None or comm.hash is None:
        return None
    for c in previous.comms.values():
        if c.hash == comm.hash:
            return c.top(op)
    return None
