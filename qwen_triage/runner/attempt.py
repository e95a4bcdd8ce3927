"""One launch of the server: start it, watch it, stop it, triage what it left.

Two ways to run it, one interface (:class:`Server`):

* :class:`SupervisedServer` (the default): the live supervisor of
  ``qwen-triage run`` — own session, output teed to the attempt's log, live
  triage, stall watchdog, the whole process group stopped with a grace period.
* :class:`DetachedServer` (``--detach``): the server writes its log file
  itself, so it can outlive the runner; the runner follows the file's growth
  for the stall watchdog and triages the file after a failure. It outlives a
  runner that ends in order (the server was proven ready, or was stopped), not
  one killed on the way (``kill -9``): until the runner exits normally an orphan
  guard (:mod:`qwen_triage.live.orphan_guard`) is armed, and the server's whole tree,
  daemons that double-forked included, is found by its run marker.

:func:`triage_attempt` scans the attempt's log together with the kernel log of
the same window (the journal's kernel entries, else ``dmesg``; :mod:`qwen_triage.inputs.kernel`) when this user
can read it.
"""

from __future__ import annotations

import atexit
import io
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from qwen_triage.inputs import kernel as kernel_log
from qwen_triage.live import procs

if TYPE_CHECKING:
    from qwen_triage.engine.compiled import CompiledPack
    from qwen_triage.live.orphan_guard import OrphanGuard
    from qwen_triage.live.session import LiveEvent
    from qwen_triage.live.stall import Stall
    from qwen_triage.report.model import Report


class Server(Protocol):
    log_path: Path
    started_wall: float

    @property
    def pid(self) -> int | None: ...

    @property
    def done(self) -> bool: ...

    @property
    def exit_status(self) -> int | None: ...

    @property
    def stall(self) -> "Stall | None": ...

    def start(self) -> None: ...

    @property
    def stop_reason(self) -> str | None: ...

    def members(self) -> list[int]: ...

    def request_stop(self, reason: str) -> None: ...

    def kill_now(self) -> None: ...

    def wait(self, timeout: float | None = None) -> int | None: ...


class SupervisedServer:
    """The server under :class:`qwen_triage.live.supervisor.Supervisor`."""

    def __init__(
        self,
        argv: Sequence[str],
        env: dict[str, str],
        log_path: Path,
        *,
        compiled: "CompiledPack | None",
        stall: float | None,
        grace: float,
        show_output: bool = False,
        on_event: Callable[["LiveEvent"], None] | None = None,
        on_note: Callable[[str], None] | None = None,
    ):
        from qwen_triage.live.supervisor import Supervisor

        out = err = None
        if show_output:
            from qwen_triage.live.live_report import Sink

            out, err = Sink.pair(1, 2)
        self._stall: Stall | None = None
        self.log_path = log_path
        self.started_wall = 0.0
        self.sup = Supervisor(
            list(argv),
            env=env,
            log=log_path,
            compiled=compiled,
            stall=stall,
            # vLLM usually exits after a fatal error, but not always (a worker
            # dies, the API server waits): stop at once when the diagnosis is certain.
            kill_on_fatal=compiled is not None,
            grace=grace,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            on_event=on_event,
            on_stall=self._on_stall,
            on_note=on_note,
            subreaper=True,
            die_with_parent=True,  # kill -9 of relaunch must not leave the server holding its port
        )

    def _on_stall(self, stall: "Stall") -> None:
        self._stall = stall

    def start(self) -> None:
        self.started_wall = time.time()
        self.sup.start()
        self.log_path = self.sup.log_path or self.log_path

    @property
    def pid(self) -> int | None:
        return self.sup.pid

    @property
    def done(self) -> bool:
        return self.sup.done

    @property
    def exit_status(self) -> int | None:
        return self.sup.exit_status

    @property
    def stall(self) -> "Stall | None":
        return self._stall

    @property
    def stop_reason(self) -> str | None:
        return self.sup.stop_reason

    def members(self) -> list[int]:
        return self.sup.processes() if self.sup.proc is not None else []

    def request_stop(self, reason: str) -> None:
        if not self.sup.done:
            self.sup.request_stop(signal.SIGTERM, reason=reason)

    def kill_now(self) -> None:
        if not self.sup.done:
            self.sup.kill_now()

    def wait(self, timeout: float | None = None) -> int | None:
        return self.sup.wait(timeout)


class DetachedServer:
    """The server writes its own log and lives in its own session; it may outlive the runner."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], log_path: Path, *, stall: float | None, grace: float):
        self.argv = list(argv)
        self.env = dict(env)
        self.env.setdefault("PYTHONUNBUFFERED", "1")
        marker, self._marker_entry = procs.run_marker()
        self.env[procs.RUN_MARKER] = marker
        self._guard: OrphanGuard | None = None
        self.log_path = log_path
        self.stall_after = stall
        self.grace = grace
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_wall = 0.0
        self._stall: Stall | None = None
        self._size = -1
        self._quiet_since = time.monotonic()
        self._stopper: threading.Thread | None = None
        self._kill = threading.Event()
        self._returncode: int | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)  # may hold secrets
        from qwen_triage.live.orphan_guard import OrphanGuard

        self._guard = OrphanGuard(self.env[procs.RUN_MARKER]).start()
        try:
            self.started_wall = time.time()
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=subprocess.STDOUT, env=self.env,
                start_new_session=True,
            )
        except OSError:
            self._guard.disarm()
            raise
        finally:
            os.close(fd)
        self._guard.child(self.proc.pid)
        # A runner that exits normally has stopped the server or means it to stay (proven ready):
        # only a runner that dies on the way lets the guard stop it.
        atexit.register(self._guard.disarm)
        self._quiet_since = time.monotonic()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def _poll(self) -> None:
        if self.proc is None:
            return
        if self._returncode is None:
            rc = self.proc.poll()
            if rc is not None:
                self._returncode = rc
        if self.stall_after and self._stall is None and self._returncode is None:
            try:
                size = self.log_path.stat().st_size
            except OSError:
                size = self._size
            now = time.monotonic()
            if size != self._size:
                self._size, self._quiet_since = size, now
            elif now - self._quiet_since >= self.stall_after:
                from qwen_triage.live.stall import Stall

                self._stall = Stall(quiet=now - self._quiet_since, stage=None, stage_since=None, stage_line=None,
                                    last_lines=[])

    @property
    def done(self) -> bool:
        self._poll()
        return self._returncode is not None and not self.members()

    @property
    def exit_status(self) -> int | None:
        self._poll()
        return procs.exit_status(self._returncode) if self._returncode is not None else None

    @property
    def stall(self) -> "Stall | None":
        self._poll()
        return self._stall

    @property
    def stop_reason(self) -> str | None:
        return None

    def members(self) -> list[int]:
        if self.proc is None:
            return []
        found = {st.pid for st in procs.session_members(self.proc.pid)}
        found.update(st.pid for st in procs.marked(self._marker_entry, exclude=os.getpid()))
        return sorted(found)

    def _signal(self, sig: int) -> None:
        if self.proc is None:
            return
        session = procs.session_members(self.proc.pid)
        for pgrp in {st.pgrp for st in session}:
            try:
                os.killpg(pgrp, sig)
            except OSError:
                pass
        ours = {st.pid for st in session}
        for st in procs.marked(self._marker_entry, exclude=os.getpid()):
            if st.pid not in ours:  # double-forked out of the session
                try:
                    os.kill(st.pid, sig)
                except OSError:
                    pass

    def _terminate(self) -> None:
        self._signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        while self.members() and time.monotonic() < deadline and not self._kill.is_set():
            time.sleep(0.05)
        if self.members():
            self._signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()
            self._returncode = self.proc.returncode
        if self._guard is not None:
            self._guard.disarm()  # stopped here: nothing left for the guard

    def request_stop(self, reason: str) -> None:
        if self._stopper is None and self.proc is not None:
            self._stopper = threading.Thread(target=self._terminate, name="qwen-triage-stop", daemon=True)
            self._stopper.start()

    def kill_now(self) -> None:
        self._kill.set()
        self.request_stop("kill")

    def wait(self, timeout: float | None = None) -> int | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.proc is not None and self._returncode is None:
                try:
                    self._returncode = self.proc.wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    pass
            if self.done:
                return self.exit_status
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(0.05)


# --- triage ------------------------------------------------------------------------------


def kernel_window(since: float, until: float, run=subprocess.run) -> tuple[bytes | None, str]:
    """The kernel log between two wall-clock times (:mod:`qwen_triage.inputs.kernel`): (text or journal JSON,
    how it was read)."""
    got = kernel_log.read_window(kernel_log.Window(since, until), run)
    return got.text, got.how


def triage_attempt(
    log_path: Path, compiled: "CompiledPack", since: float, until: float, *, kernel: bool = True
) -> tuple["Report", list[str]]:
    """The attempt's log and the kernel log of its window, scanned as one report."""
    from qwen_triage.engine.scanner import Scanner
    from qwen_triage.inputs.file import open_source
    from qwen_triage.inputs.source import InputError, Source

    notes: list[str] = []
    scanner = Scanner(compiled)
    sources = []
    try:
        sources.append(open_source(str(log_path), 0))
    except InputError as exc:
        notes.append(f"log not readable: {exc}")
    if kernel:
        text, how = kernel_window(since, until)
        if text:
            sources.append(Source(name=f"kernel log ({how})", index=len(sources), stream=io.BytesIO(text)))
        elif text is None:
            notes.append(how)
    for src in sources:
        for _ in scanner.scan_source(src):
            pass
    return scanner.report(), notes


def stage_of(log_path: Path) -> tuple[str | None, str | None, str | None]:
    """(stage id, its label, its hint) the launch had reached, from its log."""
    from qwen_triage.live.stall import StageTracker

    try:
        data = log_path.read_bytes()
    except OSError:
        return None, None, None
    from qwen_triage.engine.normalize import ANSI_BYTES_RE

    tracker = StageTracker()
    tracker.feed_block(ANSI_BYTES_RE.sub(b"", data.replace(b"\r\n", b"\n")))
    cur = tracker.current
    if cur is None:
        return None, None, None
    return cur.stage.id, cur.stage.label, cur.stage.hint


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="seconds")
