"""A running process's output: where ``/proc/PID/fd/N`` points, and a reader for the files among them.

``attach PID`` reads what a server that is already running writes. Where it writes is read from
``/proc/PID/fd/1`` and ``/2`` (:func:`inspect_fd`, classified by :func:`classify`): a regular file is read through
``/proc/PID/fd/N`` itself, so a rename by logrotate or a deleted file is still the file the process writes to; a
socket of a process in a systemd unit (:func:`unit_of`, from ``/proc/PID/cgroup``) is its journal stream. Deciding
what to follow from these targets is ``attach``'s (:mod:`qwen_triage.live.attach`); finding them is this module's.
A child wrapped by ``run`` or ``relaunch`` is read here too: :class:`ChildOutput`, what its pass-through logged.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from qwen_triage.inputs.base import Chunk, Reader
from qwen_triage.inputs.file import FileReader

if TYPE_CHECKING:  # the positions import pydantic: not while a wrapped child's first output flows (ChildOutput)
    from qwen_triage.inputs.position import SourceState

MAX_HANDED = 64 << 20  # bytes handed over (no log) that may wait for triage; more are dropped, and counted


@dataclass(frozen=True)
class OutputTarget:
    fd: int
    link: str  # what /proc/PID/fd/N points to, as readlink says it
    kind: str  # file | journal | socket | pipe | terminal | null | other | unreadable | closed
    path: str  # /proc/PID/fd/N
    ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the target
    reason: str = ""

    @property
    def name(self) -> str:
        return self.link.removesuffix(" (deleted)") if self.kind == "file" else self.link


def classify(link: str, mode: int | None) -> str:
    if link == "/dev/null":
        return "null"
    if link.startswith("pipe:"):
        return "pipe"
    if link.startswith("socket:"):
        return "socket"
    if link.startswith(("/dev/pts/", "/dev/tty", "/dev/console")):
        return "terminal"
    if mode is not None and stat.S_ISREG(mode):
        return "file"
    if mode is not None and stat.S_ISFIFO(mode):
        return "pipe"
    if mode is not None and stat.S_ISCHR(mode):
        return "terminal" if link.startswith("/dev/") and "tty" in link else "other"
    return "other"


def inspect_fd(pid: int, fd: int, proc_root: str = "/proc") -> OutputTarget:
    path = f"{proc_root}/{pid}/fd/{fd}"
    try:
        link = os.readlink(path)
    except FileNotFoundError:
        return OutputTarget(fd, "", "closed", path, reason="not open")
    except PermissionError:
        return OutputTarget(fd, "", "unreadable", path, reason="permission denied")
    except OSError as exc:
        return OutputTarget(fd, "", "unreadable", path, reason=exc.strerror or str(exc))
    try:
        st = os.stat(path)
        mode, ident = st.st_mode, (st.st_dev, st.st_ino)
    except OSError:
        mode, ident = None, None
    return OutputTarget(fd, link, classify(link, mode), path, ident)


def parse_cgroup(text: str) -> tuple[str | None, bool]:
    """The systemd service a process runs in, from /proc/PID/cgroup: (unit, is a user unit)."""
    best: tuple[str | None, bool] = (None, False)
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if not (hierarchy == "0" or "name=systemd" in controllers):
            continue
        comps = [c for c in path.strip().strip("/").split("/") if c]
        user = any(c.startswith("user@") and c.endswith(".service") for c in comps)
        services = [c for c in comps if c.endswith(".service") and not c.startswith("user@")]
        if services:
            best = (services[-1], user)
            if hierarchy == "0":
                break
    return best


def unit_of(pid: int, proc_root: str = "/proc") -> tuple[str | None, bool]:
    try:
        with open(f"{proc_root}/{pid}/cgroup") as f:
            return parse_cgroup(f.read())
    except OSError:
        return None, False


def cmdline_of(pid: int, proc_root: str = "/proc") -> list[str]:
    try:
        with open(f"{proc_root}/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def output_reader(pid: int, fd: int = 1, proc_root: str = "/proc") -> Reader:
    """A reader of the file process ``pid`` writes to on ``fd`` (through /proc, so renames do not matter)."""
    target = inspect_fd(pid, fd, proc_root)
    if target.kind != "file":
        raise ValueError(f"fd {fd} of process {pid} is not a file ({target.reason or target.kind})")
    reader = FileReader(target.path)
    reader.label = target.name
    return reader


@dataclass
class OutputChunk(Chunk):
    """A piece of a wrapped child's output as it wrote it, not cut at lines: the feed's splitters, one per
    stream, make the lines (stdout and stderr pieces interleave). ``first_line`` counts both streams' lines."""

    stream: int = 1  # 1: stdout, 2: stderr
    when: float = 0.0  # time.monotonic() when the pass-through saw it


class ChildOutput(Reader):
    """A wrapped child's output, in the order the pass-through saw it (``qwen-triage run``, ``relaunch``).

    Why a reader: the supervisor's receive side gets from the pump process only *what* was written
    (:meth:`logged`: stream and length; :meth:`handed`: the bytes themselves when there is no log), and
    the triage thread takes the bytes back from ``log_fd`` when its turn comes, within a budget and a
    deadline as every source is read: the log is the backlog, so triage however far behind holds no
    output in memory and skips none of it. Bytes handed over are held up to :data:`MAX_HANDED`, the rest
    counted in ``dropped``. One thread records, another reads. The position is the log offset, kept for
    this run only: a child's output is read once, so ``prev`` is ignored. ``log_fd`` (the log, or an
    unnamed spool file; None: every piece is handed over) is this reader's to close.
    """

    def __init__(self, log_fd: int | None, label: str = "<child>"):
        super().__init__(key=f"process:{label}", label=label, via="log" if log_fd is not None else "records")
        self.log_fd = log_fd
        self._pending: deque[tuple[int, int | bytes, float]] = deque()
        self._lock = threading.Lock()
        self._behind = 0  # bytes recorded and not yet read
        self._held = 0  # of those, bytes handed over (in memory)
        self.dropped = 0  # bytes handed over past MAX_HANDED: not read by triage
        self._pos = 0

    def logged(self, stream: int, n: int, when: float) -> None:
        """The pass-through wrote ``n`` bytes of ``stream`` to the log: to be read back."""
        with self._lock:
            self._behind += n
        self._pending.append((stream, n, when))

    def handed(self, stream: int, data: bytes, when: float) -> None:
        """The pass-through handed ``data`` over itself (no log, or the log failed)."""
        with self._lock:
            if self._held + len(data) > MAX_HANDED:
                self.dropped += len(data)
                return
            self._held += len(data)
            self._behind += len(data)
        self._pending.append((stream, data, when))

    @property
    def waiting(self) -> bool:
        return bool(self._pending)

    @property
    def behind(self) -> int:
        """Bytes recorded and not yet read."""
        return self._behind

    def read(self, prev: SourceState | None, budget: int, deadline: float, boot_id: str = "") -> Iterator[OutputChunk]:
        """The pieces waiting, in order; stops (``more``) once ``budget`` bytes are out or at ``deadline``."""
        from qwen_triage.inputs.position import SourceState

        self.more = False
        out = 0
        while self._pending:
            if out >= budget or time.monotonic() >= deadline:
                self.more = True
                break
            stream, what, when = self._pending.popleft()
            if isinstance(what, bytes):
                data, recorded, held = what, len(what), len(what)
            else:
                data, recorded, held = self._read_log(what), what, 0
            with self._lock:
                self._behind -= recorded
                self._held -= held
            out += len(data)
            first = self.lines + 1
            self.lines += data.count(b"\n")
            self.bytes += len(data)
            yield OutputChunk(data=data, first_line=first, stream=stream, when=when)
        self.state = SourceState(kind="process", lines_total=self.lines, bytes_total=self.bytes)

    def _read_log(self, n: int) -> bytes:
        """The next ``n`` bytes logged (b"" should the log be unreadable)."""
        fd = self.log_fd
        parts = []
        while n > 0 and fd is not None:
            try:
                part = os.pread(fd, n, self._pos)
            except OSError:
                part = b""
            if not part:
                self._pos += n  # truncated behind our back: that much is lost to triage
                break
            parts.append(part)
            self._pos += len(part)
            n -= len(part)
        return b"".join(parts)

    def close(self) -> None:
        if self.log_fd is not None:
            os.close(self.log_fd)
            self.log_fd = None
