"""`qwen-triage relaunch` against the real vLLM 0.32 (CPU build) and the tiny Qwen2 model.

Needs scripts/setup-vllm.sh (CI runs it first); skipped without the venv. Every
vLLM start costs 12-40 s on a 2-core machine, so the scenarios are few and each
is bounded: --ready-timeout for the server, a timeout on the runner process.
Each test runs the command line as a user would, in its own session, with a
marker in its environment; no process carrying the marker may be left.

Scenarios (fixtures/vllm-cpu/README.md has the facts they rely on):
  * TP 6 on the 4-head model: preflight refuses it and plans TP 2 (dry run);
    without preflight, the real failure is diagnosed and TP 2 reaches ready;
  * --max-model-len 4096 > 512: lowered to 512 and relaunched; then the engine core
    SIGKILLed after ready: seen through /health, relaunched (one server, two troubles);
  * a missing shard (caught by preflight) and a truncated shard (caught from
    the real failure): diagnosed, not relaunched, exit 3 with the instructions;
  * the port in use: diagnosed, the holder named, no other port taken.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Callable

import pytest

from qwen_triage.runner.runlog import read_journal
from qwen_triage.runner.vllm.argv import parse_vllm_argv
from tests.runner.helpers import (
    TINY_MODEL,
    VLLM_VENV,
    break_model,
    free_port,
    kill_marked,
    split_model,
    wait_no_marked,
)
from tests.sigint import default_sigint
from tests.timelimits import scaled

pytestmark = [pytest.mark.vllm, pytest.mark.xdist_group("vllm-server")]  # one server at a time (conftest)

VLLM = VLLM_VENV / "bin" / "vllm"
RUN_TIMEOUT = 240  # seconds (scaled) a runner may go without progress: no output, no log line, no journal entry
READY_TIMEOUT = "150"  # one attempt; a TP 2 start took 40 s on a loaded 2-core machine
# float32: vLLM's CPU GEMM takes its AMX kernels for bf16/fp16 weights wherever torch reports AMX, and a VM that
# lists AMX without granting it kills the worker with SIGILL on the first forward pass (seen on this machine kind)
COMMON = ["--max-model-len", "256", "--enforce-eager", "--kv-cache-memory-bytes", "64M", "--dtype", "float32"]
TIMES: dict[str, float] = {}


@pytest.fixture(scope="module", autouse=True)
def _vllm_present():
    if not VLLM.exists() or not (TINY_MODEL / "config.json").exists():
        pytest.skip(f"no vLLM venv at {VLLM_VENV} or no tiny model at {TINY_MODEL}: run scripts/setup-vllm.sh")


@pytest.fixture(scope="module", autouse=True)
def _report_times():
    yield
    if TIMES:
        lines = [f"  {k}: {v:.1f} s" for k, v in TIMES.items()]
        print("\nreal vLLM relaunch scenarios:\n" + "\n".join(lines) + f"\n  total: {sum(TIMES.values()):.1f} s")


class Descendants:
    """Every process below ``root`` seen while it runs (polled), so one that outlives it can be found.

    vLLM renames its engine and workers with setproctitle, which overwrites
    their /proc/PID/environ: the environment marker alone cannot find them.
    """

    def __init__(self, root: int):
        self.root = root
        self.seen: dict[int, tuple[float, str]] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._poll, daemon=True)
        self._t.start()

    def _poll(self) -> None:
        import psutil

        while not self._stop.wait(0.3):
            try:
                kids = psutil.Process(self.root).children(recursive=True)
            except psutil.Error:
                return
            for k in kids:
                try:
                    self.seen.setdefault(k.pid, (k.create_time(), k.name()))
                except psutil.Error:
                    pass

    def named(self, prefix: str) -> list[int]:
        """Live processes whose current name (or title) starts with ``prefix``; vLLM renames them after start."""
        import psutil

        out = []
        for pid in list(self.seen):
            try:
                p = psutil.Process(pid)
                title = " ".join(p.cmdline())
                if self._same(pid) and (p.name().startswith(prefix) or title.startswith(prefix)):
                    out.append(pid)
            except psutil.Error:
                continue
        return out

    def _same(self, pid: int) -> bool:
        import psutil

        try:
            return psutil.Process(pid).create_time() == self.seen[pid][0]
        except psutil.Error:
            return False

    def alive(self) -> list[tuple[int, str]]:
        return [(pid, name) for pid, (_, name) in self.seen.items() if self._same(pid)]

    def kill(self) -> None:
        self._stop.set()
        for pid, _ in self.alive():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


RUNNERS: list["Runner"] = []


class Runner:
    """One `qwen-triage relaunch` process; stderr is collected line by line as it comes."""

    def __init__(self, args: list[str], tmp: Path, marker: str):
        self.journal = tmp / "journal.jsonl"
        self.logs = tmp / "runs"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "VIRTUAL_ENV")}
        env.update(QWEN_TRIAGE_TEST_MARK=marker, XDG_STATE_HOME=str(tmp / "state"))
        base = [sys.executable, "-m", "qwen_triage", "relaunch", "--journal", str(self.journal),
                "--log-dir", str(self.logs), "--ready-timeout", READY_TIMEOUT, "--backoff", "0",
                "--grace", "10", "--env", "VLLM_TARGET_DEVICE=cpu", "--env", "HF_HUB_OFFLINE=1",
                "--env", "PYTHONNOUSERSITE=1"]
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(base + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True, preexec_fn=default_sigint)  # abort() sends SIGINT
        self.err: list[str] = []
        self.out: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True),
                         threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True)]
        for t in self._readers:
            t.start()
        self.tree = Descendants(self.proc.pid)
        RUNNERS.append(self)

    @staticmethod
    def _read(stream, lines: list[str]) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            lines.append(line)

    @property
    def text(self) -> str:
        return "".join(self.err)

    def progress(self) -> tuple[int, ...]:
        """What changes while the runner works: its output, its journal, the logs of its attempts."""
        logs = sum(f.stat().st_size for f in self.logs.rglob("*") if f.is_file()) if self.logs.exists() else 0
        journal = self.journal.stat().st_size if self.journal.exists() else 0
        return len(self.err), len(self.out), logs, journal

    def _until(self, done: Callable[[], bool], quiet: float) -> bool:
        """Wait for ``done`` while the runner lives and makes progress: the limit is ``scaled(quiet)``
        seconds with nothing new (not a fixed time for the whole run, which a loaded machine misses)."""
        last, since = self.progress(), time.monotonic()
        while not done():
            if self.proc.poll() is not None:
                return done()
            now = self.progress()
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since > scaled(quiet):
                return False
            time.sleep(0.2)
        return True

    def wait_for(self, needle: str, count: int = 1, timeout: float = RUN_TIMEOUT) -> None:
        if not self._until(lambda: self.text.count(needle) >= count, timeout):
            raise AssertionError(f"no {needle!r} (x{count}) in:\n{self.text}")

    def finish(self, timeout: float = RUN_TIMEOUT) -> tuple[int, str]:
        """The runner's status and stdout once it exits; fails when it has made no progress for ``timeout`` (scaled)."""
        if not self._until(lambda: self.proc.poll() is not None, timeout):
            self.abort()
            raise AssertionError(f"relaunch made no progress for {timeout} s (scaled):\n{self.text}")
        for t in self._readers:
            t.join(5)
        return self.proc.returncode, "".join(self.out)

    def abort(self) -> None:
        """A failed test: Ctrl-C for the runner (it stops its server), then SIGKILL for whatever is left."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.tree.kill()

    def records(self) -> list[dict]:
        return list(read_journal(self.journal))

    def attempts(self) -> list[dict]:
        return [r for r in self.records() if r["kind"] == "attempt"]


@pytest.fixture
def marker():
    """No process of the test may outlive it: neither one that carries the marker nor one below a runner."""
    m = uuid.uuid4().hex
    RUNNERS.clear()
    yield m
    for r in RUNNERS:
        r.abort()
    deadline = time.monotonic() + scaled(15)
    left = wait_no_marked(m, timeout=15)
    tree = [p for r in RUNNERS for p in r.tree.alive()]
    while tree and time.monotonic() < deadline:
        time.sleep(0.2)
        tree = [p for r in RUNNERS for p in r.tree.alive()]
    kill_marked(m)
    for r in RUNNERS:
        r.tree.kill()
    assert left == [] and tree == [], f"processes left behind: {left + tree}"


def serve(model: Path, port: int, *extra: str) -> list[str]:
    return ["--", str(VLLM), "serve", str(model), "--host", "127.0.0.1", "--port", str(port), *COMMON, *extra]


def _timed(name: str, t0: float) -> None:
    TIMES[name] = time.monotonic() - t0


def test_tp6_preflight_refuses_and_plans(tmp_path, marker):
    t0 = time.monotonic()
    for gpus, tp in (("2", 2), ("6", 4)):
        r = Runner(["--gpus", gpus, *serve(TINY_MODEL, free_port(), "--tensor-parallel-size", "6")], tmp_path, marker)
        code, out = r.finish(60)
        assert code == 0, r.text
        assert "[preflight.plan.tp-heads]" in r.text
        assert f"--tensor-parallel-size: 6 -> {tp}" in r.text
        assert parse_vllm_argv(_argv_of(out)).tensor_parallel_size == tp
        assert r.attempts() == []  # a dry run launches nothing
    _timed("TP 6, preflight (dry run x2)", t0)


def _argv_of(out: str) -> list[str]:
    """The command the runner printed on stdout, without its VAR=value prefix."""
    import shlex

    words = shlex.split(out.strip().splitlines()[-1])
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        words.pop(0)
    return words


def test_tp6_real_failure_then_ready(tmp_path, marker):
    t0 = time.monotonic()
    r = Runner(["--apply", "--no-preflight", "--gpus", "2", "--stop-when-ready",
                *serve(TINY_MODEL, free_port(), "--tensor-parallel-size", "6")], tmp_path, marker)
    code, out = r.finish()
    _timed("TP 6 -> TP 2, no preflight", t0)
    assert code == 0, r.text
    a = r.attempts()
    assert [x["outcome"] for x in a] == ["exited", "ready"], r.text
    assert a[0]["diagnoses"][0]["rule"] == "vllm.tp-heads-indivisible"
    assert parse_vllm_argv(a[1]["argv"]).tensor_parallel_size == 2
    assert a[1]["env"]["VLLM_CPU_OMP_THREADS_BIND"].count("|") == 1
    assert "completed" in r.text  # one real completion
    assert parse_vllm_argv(_argv_of(out)).tensor_parallel_size == 2


def test_missing_shard_caught_before_launch(tmp_path, marker):
    t0 = time.monotonic()
    model = split_model(TINY_MODEL, tmp_path / "tiny-missing")
    gone = break_model(model, "missing")
    r = Runner(["--apply", *serve(model, free_port())], tmp_path, marker)
    code, _ = r.finish(60)
    _timed("missing shard (preflight)", t0)
    assert code == 3, r.text
    assert r.attempts() == []  # never launched
    assert gone.name in r.text and "preflight.model.shard-missing" in r.text
    assert "needs you" in r.text
    assert gone.exists() is False and (model / "model-00001-of-00002.safetensors").exists()  # nothing touched


def test_truncated_shard_from_the_real_failure(tmp_path, marker):
    t0 = time.monotonic()
    model = split_model(TINY_MODEL, tmp_path / "tiny-truncated")
    cut = break_model(model, "truncated")
    size = cut.stat().st_size
    r = Runner(["--apply", "--no-preflight", *serve(model, free_port())], tmp_path, marker)
    code, _ = r.finish()
    _timed("truncated shard, no preflight", t0)
    assert code == 3, r.text
    a = r.attempts()
    assert len(a) == 1, r.text  # diagnosed, not relaunched
    assert a[0]["diagnoses"][0]["class"] == "model.shard_corrupt"
    assert f"{cut.name} is truncated" in r.text  # check-model named the file
    assert "[destructive]" in r.text
    assert cut.stat().st_size == size  # the runner never touches model files
    end = [x for x in r.records() if x["kind"] == "run-end"][-1]
    assert end["outcome"] == "needs-user" and end["instructions"]


def test_port_in_use_names_the_holder(tmp_path, marker):
    t0 = time.monotonic()
    port = free_port()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import socket,sys,time; s=socket.socket(); "
         "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', int(sys.argv[1]))); "
         "s.listen(); print('up', flush=True); time.sleep(600)", str(port)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "QWEN_TRIAGE_TEST_MARK": marker})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "up"
        r = Runner(["--apply", "--no-preflight", *serve(TINY_MODEL, port)], tmp_path, marker)
        code, _ = r.finish()
    finally:
        holder.kill()
        holder.wait()
    _timed("port in use, no preflight", t0)
    assert code == 3, r.text
    a = r.attempts()
    assert len(a) == 1 and a[0]["diagnoses"][0]["class"] == "server.port_in_use", r.text
    assert f"port {port} is held by pid {holder.pid}" in r.text, r.text
    assert str(port) in a[0]["argv"]  # no other port taken


def test_max_model_len_lowered_then_the_engine_killed_after_ready_is_relaunched(tmp_path, marker):
    """Two troubles of one server in a row, as a user meets them (each real start costs 20-40 s here):
    --max-model-len 4096 > 512 fails at config and is lowered to 512; once that server is ready its
    engine core is SIGKILLed, /health sees it, and the same command is launched again."""
    t0 = time.monotonic()
    args = [x for x in serve(TINY_MODEL, free_port()) if x != "256"]
    args[args.index("--max-model-len") + 1 : args.index("--max-model-len") + 1] = ["4096"]
    r = Runner(["--apply", "--no-preflight", "--health-interval", "1", *args], tmp_path, marker)
    try:
        r.wait_for("attempt 2 is ready")
        time.sleep(0.5)  # one more poll of the process tree
        engines = r.tree.named("VLLM::EngineCor")
        assert len(engines) == 1, [(pid, " ".join(__import__("psutil").Process(pid).cmdline())) for pid, _ in r.tree.alive()]
        os.kill(engines[0], signal.SIGKILL)
        r.wait_for("attempt 3 is ready")
        r.proc.send_signal(signal.SIGINT)  # Ctrl-C: stop the server and the runner
        code, _ = r.finish(60)
    finally:
        r.abort()
    _timed("--max-model-len 4096 -> 512, then engine SIGKILL after ready -> relaunch", t0)
    assert code == 0, r.text
    a = r.attempts()
    assert [x["outcome"] for x in a] == ["exited", "died-after-ready", "stopped"], r.text
    assert a[0]["diagnoses"][0]["rule"] == "vllm.max-model-len-gt-derived"
    assert parse_vllm_argv(a[1]["argv"]).max_model_len == 512
    assert a[1]["ready_after"] is not None and a[2]["argv"] == a[1]["argv"]
    assert "/health answers 503" in r.text or "exited with status 0 while serving" in r.text
