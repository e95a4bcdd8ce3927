"""A running process's output: where ``/proc/PID/fd/N`` points, and a reader for the files among them.

``attach PID`` reads what a server that is already running writes. Where it writes is read from
``/proc/PID/fd/1`` and ``/2`` (:func:`inspect_fd`, classified by :func:`classify`): a regular file is read through
``/proc/PID/fd/N`` itself, so a rename by logrotate or a deleted file is still the file the process writes to; a
socket of a process in a systemd unit (:func:`unit_of`, from ``/proc/PID/cgroup``) is its journal stream. Deciding
what to follow from these targets is ``attach``'s (:mod:`qwen_triage.live.attach`); finding them is this module's.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from qwen_triage.inputs.base import Reader
from qwen_triage.inputs.file import FileReader


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
