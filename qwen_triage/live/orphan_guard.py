"""The orphan guard: a small process that stops a child's whole tree when its wrapper dies.

``kill -9`` of ``qwen-triage run`` or ``relaunch`` gives the wrapper no chance to
stop what it started, and ``PR_SET_PDEATHSIG`` (set in the child, see
:func:`qwen_triage.live.procs.parent_death_preexec`) reaches only the direct child:
its workers, and a daemon that double-forked into a session of its own, would
keep the GPUs and the port. So the wrapper starts this guard first, in a session
of its own (a Ctrl-C for the child does not reach it), holding the read end of a
pipe whose only write end the wrapper keeps. The wrapper tells it the child's pid;
``done`` disarms it once the wrapper has stopped everything itself. End of file
without ``done`` means the wrapper died: the guard sends SIGTERM to every process
of the child's session and every process whose environment carries the run's
marker (:data:`qwen_triage.live.procs.RUN_MARKER`, inherited by all descendants),
waits a short grace, then SIGKILLs what is left.

The guard runs as ``python -I -S -c …`` with the package's own directory put on
``sys.path``, so it runs this very code whatever is installed elsewhere.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

GUARD_GRACE = 2.0  # the wrapper is gone: the port must be free within seconds, not after a polite shutdown


class OrphanGuard:
    """The wrapper's side: start the guard, tell it the child, disarm it."""

    def __init__(self, marker: str, grace: float = GUARD_GRACE):
        self.marker = marker
        self.grace = grace
        self.proc: subprocess.Popen[bytes] | None = None
        self._w: int | None = None

    def start(self) -> "OrphanGuard":
        from qwen_triage.live.procs import helper_command

        r, w = os.pipe()  # not inheritable: only the guard (as its stdin) gets the read end
        try:
            self.proc = subprocess.Popen(
                helper_command("qwen_triage.live.orphan_guard", self.marker, f"{self.grace:g}"),
                stdin=r, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )
        except OSError:
            os.close(w)
            self.proc = None
            return self
        finally:
            os.close(r)
        self._w = w
        return self

    def _send(self, line: str) -> None:
        if self._w is None:
            return
        try:
            os.write(self._w, line.encode() + b"\n")
        except OSError:
            pass

    def child(self, pid: int) -> None:
        self._send(f"child {pid}")

    def disarm(self) -> None:
        """The wrapper stopped everything itself (or leaves a detached server on purpose): the guard exits."""
        if self._w is None:
            return
        self._send("done")
        os.close(self._w)
        self._w = None
        if self.proc is not None:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    @property
    def armed(self) -> bool:
        return self._w is not None


def _targets(entry: bytes, sid: int | None) -> dict[int, int]:
    from qwen_triage.live import procs

    me = os.getpid()
    found = {st.pid: st.starttime for st in procs.marked(entry, exclude=me)}
    if sid is not None:
        found.update({st.pid: st.starttime for st in procs.session_members(sid) if st.pid != me})
    return found


def _signal(pids: dict[int, int], sig: int) -> None:
    from qwen_triage.live import procs

    for pid, start in pids.items():
        if procs.alive(pid, start):
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def cleanup(entry: bytes, sid: int | None, grace: float) -> int:
    """Stop every process of the run; how many there were."""
    seen: dict[int, int] = {}
    targets = _targets(entry, sid)
    seen.update(targets)
    _signal(targets, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        targets = _targets(entry, sid)
        if not targets:
            return len(seen)
        new = {p: s for p, s in targets.items() if p not in seen}
        seen.update(new)
        _signal(new, signal.SIGTERM)
        time.sleep(0.05)
    for _ in range(20):  # new forks between two scans get the next round
        targets = _targets(entry, sid)
        if not targets:
            break
        seen.update(targets)
        _signal(targets, signal.SIGKILL)
        time.sleep(0.05)
    return len(seen)


def main(argv: list[str] | None = None) -> int:
    from qwen_triage.live.procs import RUN_MARKER

    args = sys.argv[1:] if argv is None else argv
    marker, grace = args[0], float(args[1]) if len(args) > 1 else GUARD_GRACE
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGTSTP):
        signal.signal(sig, signal.SIG_IGN)
    sid: int | None = None
    stdin = sys.stdin.buffer
    while True:
        try:
            line = stdin.readline()
        except OSError:
            line = b""
        if not line:
            break  # the wrapper is gone
        word, _, rest = line.strip().partition(b" ")
        if word == b"done":
            return 0
        if word == b"child" and rest.isdigit() and len(rest) < 12:
            sid = int(rest)
    cleanup(f"{RUN_MARKER}={marker}".encode(), sid, grace)
    return 0
