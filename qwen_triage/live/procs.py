"""Small Linux process helpers: /proc stat, sessions, exit statuses, the subreaper bit."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import signal
import subprocess
from dataclasses import dataclass

PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class ProcStat:
    pid: int
    comm: str
    state: str  # R, S, D, Z, T, …
    ppid: int
    pgrp: int
    session: int
    starttime: int  # clock ticks after boot: with pid, identifies a process across pid reuse
    exit_code: int | None  # raw wait status, meaningful for a zombie (Linux 3.5+, same user)

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


def proc_stat(pid: int) -> ProcStat | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    try:
        lpar = raw.index(b"(")
        rpar = raw.rindex(b")")
        rest = raw[rpar + 2 :].split()
        return ProcStat(
            pid=pid,
            comm=raw[lpar + 1 : rpar].decode("utf-8", "replace"),
            state=rest[0].decode(),
            ppid=int(rest[1]),
            pgrp=int(rest[2]),
            session=int(rest[3]),
            starttime=int(rest[19]),
            exit_code=int(rest[49]) if len(rest) > 49 else None,
        )
    except (ValueError, IndexError):
        return None


def all_pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def session_members(sid: int, include_zombies: bool = False) -> list[ProcStat]:
    """Every process whose session id is ``sid``."""
    out = []
    for pid in all_pids():
        st = proc_stat(pid)
        if st is not None and st.session == sid and (include_zombies or not st.zombie):
            out.append(st)
    return out


def alive(pid: int, starttime: int | None = None) -> bool:
    """True while the process runs (a zombie is not running); same process when starttime matches."""
    st = proc_stat(pid)
    if st is None or st.zombie:
        return False
    return starttime is None or st.starttime == starttime


def describe_wait_status(status: int) -> tuple[int, str]:
    """Raw wait status -> (shell-style exit status, words)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        core = " (core dumped)" if os.WCOREDUMP(status) else ""
        return 128 + sig, f"was killed by signal {sig} ({signal_name(sig)}){core}"
    if os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        return code, f"exited with status {code}"
    return 255, f"ended (wait status {status:#x})"


def exit_status(returncode: int) -> int:
    """Popen.returncode -> the shell's convention: 128+N when killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def describe_returncode(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by signal {-returncode} ({signal_name(-returncode)})"
    return f"exited with status {returncode}"


def signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


@functools.cache
def _libc() -> ctypes.CDLL:
    # find_library may run ldconfig or a compiler: once per process is enough.
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def set_child_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process (Linux), so they can be found and reaped.

    The bit belongs to the process and setting it twice is harmless, so no flag is kept here.
    """
    try:
        return _libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def stop_helper(proc: subprocess.Popen, grace: float = 5.0) -> None:  # type: ignore[type-arg]
    """Stop a helper we started (journalctl): SIGTERM, SIGKILL after ``grace`` seconds; reaped either way."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def reap(pid: int) -> int | None:
    """Collect a zombie child of ours; its raw wait status, or None when it is not ours or still runs."""
    try:
        got, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    except OSError:
        return None
    return status if got == pid else None
