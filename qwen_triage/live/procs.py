"""Small Linux process helpers: /proc stat, sessions, exit statuses, the subreaper and parent-death bits,
and the run marker that finds every descendant of a child, even one that double-forked out of its session."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from qwen_triage.exits import killed_by

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
# Put in a child's environment: every descendant inherits it, so a daemon that double-forked into a
# session of its own (and was re-parented away) is still found, by reading /proc/PID/environ.
RUN_MARKER = "QWEN_TRIAGE_RUN_ID"
MAX_ENVIRON = 1 << 20


def helper_command(module: str, *args: str) -> list[str]:
    """The command line of a helper process (the orphan guard, the pump): ``module``'s ``main()`` in this
    very package, whatever else is installed (its directory first on ``sys.path``). ``-I -S``: no site, no
    environment; helpers use the standard library only, and start fast beside the child."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = f"import sys; sys.path.insert(0, {root!r}); from {module} import main; sys.exit(main())"
    return [sys.executable, "-I", "-S", "-c", code, *args]


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


def run_marker() -> tuple[str, bytes]:
    """A new marker value, and the ``NAME=value`` entry to look for in /proc/PID/environ."""
    import uuid

    value = uuid.uuid4().hex
    return value, f"{RUN_MARKER}={value}".encode()


def marked(entry: bytes, exclude: int | None = None) -> list[ProcStat]:
    """Running processes (this user's: others' environments are unreadable) whose environment holds ``entry``."""
    out = []
    for pid in all_pids():
        if pid == exclude:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read(MAX_ENVIRON)
        except OSError:
            continue
        if entry in env.split(b"\0"):
            st = proc_stat(pid)
            if st is not None and not st.zombie:
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
        return killed_by(sig), f"was killed by signal {sig} ({signal_name(sig)}){core}"
    if os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        return code, f"exited with status {code}"
    return 255, f"ended (wait status {status:#x})"


def exit_status(returncode: int) -> int:
    """Popen.returncode -> the shell's convention: 128+N when killed by signal N."""
    return killed_by(-returncode) if returncode < 0 else returncode


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


def parent_death_preexec() -> "Callable[[], None] | None":
    """A ``preexec_fn`` that has the kernel SIGKILL the child when its parent dies (Linux ``PR_SET_PDEATHSIG``).

    None where that cannot work: not Linux, no libc, or not on the main thread. The signal
    follows the *thread* that forked the child, so a child started from a short-lived thread
    would die with that thread; the orphan guard (:mod:`qwen_triage.live.orphan_guard`) covers those.
    Everything is looked up before the fork: the child only makes two system calls.
    """
    import sys
    import threading

    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = _libc().prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    getppid, kill, getpid = os.getppid, os.kill, os.getpid

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if getppid() != parent:  # the parent died before the bit was set
            kill(getpid(), signal.SIGKILL)

    return preexec


def stop_helper(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """Stop a helper we started (the journal's reader): SIGTERM, SIGKILL after ``grace`` seconds; reaped either way."""
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
