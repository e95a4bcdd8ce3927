"""Shared by the live tests: run qwen-triage as a real process and watch its output as it comes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import psutil

from tests.conftest import ROOT
from tests.sigint import default_sigint
from tests.timelimits import scaled, wait_until

LIVE = ROOT / "fixtures" / "live"
RULES = LIVE / "rules"
FAKEBIN = LIVE / "fakebin"
PY = sys.executable
BANNER = "qwen-triage ▸ diagnosis"


def qt_argv(*args: str) -> list[str]:
    return [PY, "-m", "qwen_triage", *args]


def fixture(name: str, *args: str) -> list[str]:
    return [PY, str(LIVE / name), *args]


class Stream:
    """Reads a pipe on a thread, keeping every byte and the time each line arrived."""

    def __init__(self, pipe) -> None:  # type: ignore[no-untyped-def]
        self.data = bytearray()
        self.lines: list[tuple[float, str]] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self.thread.start()

    def _read(self, pipe) -> None:  # type: ignore[no-untyped-def]
        for raw in iter(pipe.readline, b""):
            now = time.time()
            with self.lock:
                self.data += raw
                self.lines.append((now, raw.decode("utf-8", "replace")))
        pipe.close()

    @property
    def text(self) -> str:
        with self.lock:
            return self.data.decode("utf-8", "replace")

    def first(self, needle: str) -> float | None:
        """Arrival time of the first line containing ``needle``."""
        with self.lock:
            return next((t for t, line in self.lines if needle in line), None)

    def wait_for(self, needle: str, timeout: float = 10.0) -> float:
        """When ``needle`` arrived; fails at once when the pipe ended without it (the process is gone)."""
        t = wait_until(lambda: self.first(needle), timeout, alive=self.thread.is_alive)
        if t is None:
            ended = "the stream ended" if not self.thread.is_alive() else f"within {timeout} s (scaled)"
            raise AssertionError(f"{needle!r} did not appear: {ended}; got:\n{self.text[-4000:]}")
        return t

    def join(self, timeout: float = 10.0) -> None:
        self.thread.join(scaled(timeout))


class Live:
    """qwen-triage (or anything) started as a real process, its stdout and stderr read as they come."""

    def __init__(self, argv: list[str], *, new_session: bool = True, env: dict[str, str] | None = None,
                 stdin: int | None = subprocess.DEVNULL, cwd: Path | None = None) -> None:
        self.started = time.time()
        self.proc = subprocess.Popen(
            argv,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd or ROOT,
            start_new_session=new_session,
            preexec_fn=default_sigint,  # ctrl_c() must reach it even from a suite started with `&`
        )
        self.out = Stream(self.proc.stdout)
        self.err = Stream(self.proc.stderr)

    def wait(self, timeout: float = 30.0) -> int:
        rc = self.proc.wait(scaled(timeout))
        self.out.join()
        self.err.join()
        return rc

    def ctrl_c(self) -> None:
        """What a terminal does on Ctrl-C: SIGINT to the foreground process group (ours)."""
        os.killpg(self.proc.pid, 2)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()


def read_pids(pidfile: Path, count: int, timeout: float = 10.0,
              proc: subprocess.Popen | None = None) -> dict[int, str]:  # type: ignore[type-arg]
    """The first ``count`` pids the fixture wrote; the wait ends early when ``proc`` (which writes them) exited."""

    def pids() -> dict[int, str]:
        pairs = [line.split(" ", 1) for line in pidfile.read_text().splitlines() if " " in line] \
            if pidfile.exists() else []
        return {int(p): role for p, role in pairs} if len(pairs) >= count else {}

    found = wait_until(pids, timeout, alive=None if proc is None else (lambda: proc.poll() is None))
    if not found:
        raise AssertionError(f"only {pidfile.read_text() if pidfile.exists() else 'no'} pids after {timeout} s"
                             + ("" if proc is None or proc.poll() is None else f" (exited {proc.returncode})"))
    return found


def running(pid: int) -> bool:
    """True while the process exists in any form, zombie included: 'gone' means reaped."""
    return psutil.pid_exists(pid)


def assert_all_gone(pids: dict[int, str], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        left = {p: r for p, r in pids.items() if running(p)}
        if not left:
            return
        time.sleep(0.05)
    details = []
    for p, role in left.items():
        try:
            pr = psutil.Process(p)
            details.append(f"{p} {role} status={pr.status()} ppid={pr.ppid()}")
        except psutil.NoSuchProcess:
            pass
    if details:
        for p in left:  # do not leave them behind for the next test
            try:
                os.kill(p, 9)
            except OSError:
                pass
        raise AssertionError("processes left behind: " + "; ".join(details))


def flat(text: str) -> str:
    """Rendered panels without their borders and line breaks: for substring checks across wraps."""
    import re

    return re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─]", " ", text))


def env_with(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


def eventually(check: Callable[[], bool], timeout: float = 5.0, step: float = 0.02) -> bool:
    return bool(wait_until(check, timeout, step=step))
