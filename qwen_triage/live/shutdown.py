"""Process-group shutdown: find every process of the child, signal them, escalate, reap.

The child leads a session of its own; its workers may move to groups of their
own, and a daemon may double-fork out of the session. :class:`ProcessTree` finds
them all — the session's members, descendants seen while they ran (pid and start
time, so a reused pid is not mistaken for one), and every process whose
environment carries the run marker — sends a signal to each group and each
stray, gives the grace period, then SIGKILLs what is left and reaps the zombies
re-parented to us (subreaper).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass

from qwen_triage.live import procs
from qwen_triage.live.hooks import Hooks


@dataclass
class _Tracked:
    starttime: int
    session: int


class ProcessTree:
    """The child's processes, for counting and stopping; ``marker_entry`` is the run marker's environ entry."""

    def __init__(self, marker_entry: bytes, grace: float, hooks: Hooks):
        self.marker_entry = marker_entry
        self.grace = grace
        self.hooks = hooks
        self.child: int | None = None  # the child's pid: it leads its session and its group (setsid)
        self.stop_reason: str | None = None
        self.stopper: threading.Thread | None = None
        self._stop_lock = threading.Lock()
        self._kill_now = threading.Event()
        self._tracked: dict[int, _Tracked] = {}

    # -- finding ----------------------------------------------------------------

    def track_descendants(self) -> None:
        """Remember every descendant (pid, start time) so one that leaves the session is still found."""
        if self.child is None:
            return
        try:
            import psutil

            kids = psutil.Process(self.child).children(recursive=True)
        except Exception:  # noqa: BLE001 - psutil.NoSuchProcess and friends
            return
        for k in kids:
            if k.pid not in self._tracked:
                st = procs.proc_stat(k.pid)
                if st is not None:
                    self._tracked[k.pid] = _Tracked(st.starttime, st.session)

    def members(self) -> list[tuple[int, int, bool]]:
        """(pid, pgrp, in the child's session) of every running process of the child."""
        if self.child is None:
            return []
        found = {st.pid: (st.pid, st.pgrp, True) for st in procs.session_members(self.child)}
        for st in procs.marked(self.marker_entry, exclude=os.getpid()):
            if st.pid not in found:  # left the session (a double-forked daemon): tracked, for reaping too
                self._tracked.setdefault(st.pid, _Tracked(st.starttime, st.session))
        for pid, t in list(self._tracked.items()):
            if pid in found:
                continue
            now = procs.proc_stat(pid)
            if now is None or now.starttime != t.starttime:
                del self._tracked[pid]
            elif not now.zombie:
                found[pid] = (pid, now.pgrp, False)
        return sorted(found.values())

    # -- stopping ---------------------------------------------------------------

    def signal_all(self, sig: int) -> int:
        """``sig`` to each of the child's groups and to each process outside them; how many processes."""
        members = self.members()
        for pgrp in {pgrp for _, pgrp, ours in members if ours}:
            try:
                os.killpg(pgrp, sig)
            except OSError:
                pass
        for pid, _, ours in members:
            if not ours:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        return len(members)

    def request_stop(self, sig: int = signal.SIGTERM, reason: str | None = None, grace: float | None = None) -> None:
        """Begin stopping (returns at once): ``sig`` to every process, SIGKILL after the grace period.

        A second request while one runs kills at once.
        """
        with self._stop_lock:
            if self.stopper is not None:
                if not self._kill_now.is_set():
                    self.hooks.note("stopping now: SIGKILL to every process of the child")
                self._kill_now.set()
                return
            self.stop_reason = self.stop_reason or reason or f"{procs.signal_name(sig)}"
            stopper = threading.Thread(
                target=self._terminate,
                args=(sig, self.grace if grace is None else grace),
                name="qwen-triage-stop",
                daemon=True,
            )
            stopper.start()
            # Published once started: the thread that waits for the child joins it without the lock.
            self.stopper = stopper

    def kill_now(self) -> None:
        self.request_stop(signal.SIGKILL, grace=0)
        self._kill_now.set()

    def _terminate(self, sig: int, grace: float) -> None:
        """``sig`` to every process; SIGKILL to what is left after ``grace``; reap what we adopted."""
        n = self.signal_all(sig)
        if sig != signal.SIGKILL and n:
            self.hooks.note(
                f"sent {procs.signal_name(sig)} to the child's {n} process(es); "
                f"SIGKILL in {grace:g} s (Ctrl-C again: now)"
            )
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and not self._kill_now.is_set():
            if not self.members():
                break
            time.sleep(0.05)
        left = self.members()
        if left:
            if sig != signal.SIGKILL:
                self.hooks.note(
                    f"SIGKILL to {len(left)} process(es) still running: {', '.join(str(p) for p, _, _ in left)}",
                    report=True,
                )
            self.signal_all(signal.SIGKILL)
            deadline = time.monotonic() + 5
            while self.members() and time.monotonic() < deadline:
                time.sleep(0.02)
        self.reap_adopted()

    def after_exit(self, returncode: int) -> None:
        """The child exited: what it left running gets the grace period, then the stop; all of it reaped."""
        left = self.members()
        if left and self.stopper is None:
            pids = ", ".join(str(p) for p, _, _ in left[:12])
            self.hooks.note(
                f"the child {procs.describe_returncode(returncode)} but left {len(left)} process(es) "
                f"running ({pids}); stopping them in {self.grace:g} s",
                report=True,
            )
            deadline = time.monotonic() + self.grace
            while time.monotonic() < deadline and self.members() and self.stopper is None:
                time.sleep(0.05)
            if self.members() and self.stopper is None:
                self.request_stop(signal.SIGTERM, reason="leftover processes")
        if self.stopper is not None:
            self.stopper.join()
        self.reap_adopted()

    def reap_adopted(self) -> None:
        """Collect zombies re-parented to us (subreaper) that belonged to the child."""
        me = os.getpid()
        child = self.child if self.child is not None else -1
        for _ in range(50):
            zombies = [
                st.pid
                for st in map(procs.proc_stat, procs.all_pids())
                if st is not None and st.ppid == me and st.zombie and st.pid != child
                and (st.session == self.child or st.pid in self._tracked)
            ]
            if not zombies:
                return
            for pid in zombies:
                procs.reap(pid)
            time.sleep(0.01)
