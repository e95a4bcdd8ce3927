"""The relaunch loop end to end, against fixtures/runner/bin/vllm (a fast stand-in that prints the real
vLLM 0.32 logs of fixtures/vllm-cpu and serves the OpenAI API when healthy).

Every test checks that no process it started is left: the processes inherit a
marker in their environment, and none may carry it at the end.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from qwen_triage.runner.fixplan import attempt_key
from qwen_triage.runner.runlog import read_journal
from qwen_triage.runner.deps import Deps
from qwen_triage.runner.loop import Run
from qwen_triage.runner.stops import _Stop
from qwen_triage.runner.profile import RunSettings
from qwen_triage.runner.render import Printer
from qwen_triage.runner.vllm.argv import parse_vllm_argv
from tests.runner.helpers import (
    FAKE_VLLM,
    break_model,
    free_port,
    kill_marked,
    make_model,
    wait_no_marked,
)
from tests.timelimits import wait_until
from tests.sigint import default_sigint


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    base = tmp_path_factory.mktemp("models")
    good = make_model(base / "good")
    missing = make_model(base / "missing", shards=2)
    break_model(missing, "missing")
    truncated = make_model(base / "truncated", shards=2)
    break_model(truncated, "truncated")
    return {"good": good, "missing": missing, "truncated": truncated}


@pytest.fixture
def marker():
    m = uuid.uuid4().hex
    yield m
    left = wait_no_marked(m, timeout=10)
    kill_marked(m)
    assert left == [], f"processes left behind: {left}"


class Harness:
    def __init__(self, tmp_path: Path, compiled, marker: str):
        self.tmp, self.compiled, self.marker = tmp_path, compiled, marker
        self.out = io.StringIO()
        self.run: Run | None = None

    def make(self, args: list[str], *, env: dict | None = None, **kw) -> Run:
        defaults = dict(apply=True, preflight=False, gpus=2, stop_when_ready=True, backoff=0, grace=2,
                        release_timeout=10, ready_timeout=20, stall=30, health_interval=0.3, request_timeout=2)
        defaults.update(kw)
        settings = RunSettings(
            launch=parse_vllm_argv([str(FAKE_VLLM), "serve", *args]),
            env={"VLLM_TARGET_DEVICE": "cpu", **(env or {})},
            journal=self.tmp / "journal.jsonl",
            log_dir=self.tmp / "runs",
            **defaults,
        )
        deps = Deps(compiled=lambda: self.compiled, printer=Printer(self.out), kernel_log=False,
                    base_env={**os.environ, "QWEN_TRIAGE_TEST_MARK": self.marker}, wait_poll=0.2)
        self.run = Run(settings, deps)
        return self.run

    @property
    def text(self) -> str:
        return self.out.getvalue()

    def journal(self, run_id: str) -> list[dict]:
        return list(read_journal(self.tmp / "journal.jsonl", run=run_id))


@pytest.fixture
def h(tmp_path, compiled, marker):
    return Harness(tmp_path, compiled, marker)


def test_two_failures_fixed_one_after_the_other(h, models):
    port = free_port()
    run = h.make([str(models["good"]), "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "4096",
                  "--tensor-parallel-size", "6"], env={"FAKE_VLLM_LINGER": "0.5"})
    res = run.go()
    assert res.exit_status == 0, h.text
    assert [a.outcome for a in res.attempts] == ["exited", "exited", "ready"]
    assert [d.class_ for d in res.attempts[0].diagnoses] == ["config.bad_argument"]
    assert [d.class_ for d in res.attempts[1].diagnoses] == ["config.tp_indivisible"]
    final = parse_vllm_argv(res.final_argv)
    assert (final.max_model_len, final.tensor_parallel_size, final.port) == (512, 2, port)
    assert res.final_env["VLLM_CPU_OMP_THREADS_BIND"].count("|") == 1
    # each attempt records what changed and why
    assert [c.name for c in res.attempts[1].changes] == ["--max-model-len"]
    assert "vllm.tp-heads-indivisible" in res.attempts[2].changes[0].reason
    recs = h.journal(res.run)
    assert [r["kind"] for r in recs] == ["run-start", "attempt", "attempt", "ready", "attempt", "run-end"]
    assert recs[-1]["outcome"] == "ready" and recs[-1]["final_argv"] == res.final_argv
    assert all(Path(r["log"]).exists() for r in recs if r["kind"] == "attempt")
    assert "working command" in h.text


# vLLM's own message, quoted by a client (issue 29): a relaunch argument must never come from a prompt
KV_PROMPT = ("ValueError: The model's max seq len (512) is larger than the maximum number of tokens that can be stored "
             "in KV cache (16). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
             "initializing the engine.")


def test_a_prompt_quoting_a_failure_neither_stops_nor_relaunches(h, models):
    port = free_port()
    run = h.make([str(models["good"]), "--host", "127.0.0.1", "--port", str(port)],
                 env={"FAKE_VLLM_PROMPT": f"my server said {KV_PROMPT} what now? NVRM: Xid (PCI:0000:3b:00): 79"})
    res = run.go()
    assert res.exit_status == 0, h.text
    assert [a.outcome for a in res.attempts] == ["ready"], h.text
    assert res.attempts[0].diagnoses == [] and res.attempts[0].changes == []
    assert "--max-model-len" not in res.final_argv


def test_preflight_fixes_before_the_first_launch(h, models):
    port = free_port()
    run = h.make([str(models["good"]), "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "4096",
                  "-tp", "6"], preflight=True)
    res = run.go()
    assert res.exit_status == 0, h.text
    assert [a.outcome for a in res.attempts] == ["ready"]  # TP 6 was never launched
    assert {c.name for c in res.attempts[0].changes} >= {"--max-model-len", "--tensor-parallel-size"}
    assert "[preflight.plan.tp-heads]" in h.text


def test_dry_run_launches_nothing(h, models):
    run = h.make([str(models["good"]), "--port", str(free_port()), "-tp", "6"], apply=False, preflight=True)
    res = run.go()
    assert res.exit_status == 0 and res.outcome == "dry-run" and res.attempts == []
    assert parse_vllm_argv(res.final_argv).tensor_parallel_size == 2
    assert "--tensor-parallel-size: 6 -> 2" in h.text


@pytest.mark.parametrize("which", ["missing", "truncated"])
@pytest.mark.parametrize("preflight", [True, False])
def test_shard_problems_stop_with_instructions(h, models, which, preflight):
    run = h.make([str(models[which]), "--host", "127.0.0.1", "--port", str(free_port())], preflight=preflight,
                 env={"FAKE_VLLM_LINGER": "0.5"})
    res = run.go()
    assert res.exit_status == 3, h.text
    assert len(res.attempts) == (0 if preflight else 1)  # never relaunched
    assert res.instructions and any("download" in i.lower() for i in res.instructions)
    assert "model-00002-of-00002.safetensors" in h.text
    assert "--wait-for-fix would wait" in h.text


def _listen(port: int) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def test_port_in_use_is_diagnosed_and_the_holder_named(h, models):
    port = free_port()
    holder = _listen(port)
    try:
        run = h.make([str(models["good"]), "--host", "127.0.0.1", "--port", str(port)])
        res = run.go()
    finally:
        holder.close()
    assert res.exit_status == 3, h.text
    assert len(res.attempts) == 1
    assert [d.class_ for d in res.attempts[0].diagnoses] == ["server.port_in_use"]
    assert f"port {port} is held by pid {os.getpid()}" in h.text
    assert all(a.argv == res.attempts[0].argv for a in res.attempts)  # no other port tried


def test_wait_for_fix_waits_for_the_port_then_launches(h, models):
    port = free_port()
    holder = _listen(port)
    threading.Timer(1.5, holder.close).start()
    run = h.make([str(models["good"]), "--host", "127.0.0.1", "--port", str(port)], preflight=True,
                 wait_for_fix=True, wait_timeout=20)
    res = run.go()
    assert res.exit_status == 0, h.text
    assert "the fix is in place" in h.text
    assert [a.outcome for a in res.attempts] == ["ready"]


def test_engine_death_after_ready_is_seen_by_readiness_and_restarted(h, models, tmp_path):
    port = free_port()
    run = h.make([str(models["good"]), "--host", "127.0.0.1", "--port", str(port)], stop_when_ready=False,
                 env={"FAKE_VLLM_COUNTER": str(tmp_path / "n"), "FAKE_VLLM_DIE_ON": "1", "FAKE_VLLM_DIE_AFTER": "1",
                      "FAKE_VLLM_LINGER": "0.5"})
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("r", run.go()))
    t.start()
    wait_until(lambda: h.text.count("is ready after") >= 2, 40, alive=t.is_alive, step=0.1)
    run.deps.stop.set()  # Ctrl-C
    t.join(30)
    res = result["r"]
    assert [a.outcome for a in res.attempts] == ["died-after-ready", "stopped"], h.text
    assert res.attempts[0].exit_status == 0  # vLLM exits 0 after its engine died
    assert res.attempts[0].ready_after is not None
    assert res.attempts[1].argv == res.attempts[0].argv  # the proven command, restarted as it was
    assert res.exit_status == 0
    assert "/health answers 503" in h.text or "exited with status 0 while serving" in h.text


def test_nccl_hang_then_debug_rerun_then_fix(h, models):
    port = free_port()
    run = h.make([str(models["good"]), "--host", "127.0.0.1", "--port", str(port), "-tp", "2"], stall=1.5,
                 env={"FAKE_VLLM_HANG": "nccl"})
    res = run.go()
    assert res.exit_status == 0, h.text
    assert [a.outcome for a in res.attempts] == ["stalled", "exited", "ready"]
    assert res.attempts[0].stage == "nccl"
    assert res.attempts[1].env["NCCL_DEBUG"] == "INFO"  # a rerun for evidence
    assert [d.class_ for d in res.attempts[1].diagnoses] == ["nccl.p2p_unsupported"]
    assert res.attempts[2].env["NCCL_P2P_DISABLE"] == "1"


def test_identical_attempt_is_never_launched(h, models, compiled):
    from qwen_triage.engine.scanner import scan_paths
    from tests.runner.helpers import VLLM_LOGS

    run = h.make([str(models["good"]), "--port", "18999", "--max-model-len", "4096"])
    run.machine, _ = None, None
    from qwen_triage.runner.launch_checks import model_config_for

    run.shape, _ = model_config_for(run.launch)
    fixed = parse_vllm_argv([str(FAKE_VLLM), "serve", str(models["good"]), "--port", "18999", "--max-model-len", "512"])
    run.failed[attempt_key(fixed, run.env)] = 1
    diags = scan_paths([str(VLLM_LOGS / "c-max-model-len.log")], compiled).diagnoses
    with pytest.raises(_Stop) as stop:
        run.next_launch(2, "exited", diags, proven=False)
    assert stop.value.outcome == "identical" and stop.value.status == 1


def test_no_cause_no_fix(h, models, tmp_path):
    # The engine dies before the runner could prove readiness: nothing in the log names a cause.
    run = h.make([str(models["good"]), "--host", "127.0.0.1", "--port", str(free_port())],
                 env={"FAKE_VLLM_COUNTER": str(tmp_path / "n"), "FAKE_VLLM_DIE_ON": "1", "FAKE_VLLM_DIE_AFTER": "0",
                      "FAKE_VLLM_STARTUP": "0"}, completion=False)
    res = run.go()
    if res.attempts[0].outcome == "ready":
        pytest.skip("the fake answered before it died")
    assert res.exit_status == 1 and res.outcome == "no-fix", h.text
    assert "observed: [vllm.engine-core-died]" in h.text


def test_attempts_limit(h, models):
    port = free_port()
    run = h.make([str(models["good"]), "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "4096",
                  "-tp", "6"], attempts=2)
    res = run.go()
    assert res.exit_status == 1 and res.outcome == "attempts-exhausted"
    assert len(res.attempts) == 2


# --- GPUs: NVML through a replayed snapshot ----------------------------------------------


class GrowingProbe:
    """A six-4090 snapshot whose cards ``busy`` hold 2 GiB more while the run's server is up."""

    def __init__(self, h: Harness, busy: list[int]):
        from qwen_triage.preflight.machine.nvml import ReplayProbe

        self.base = ReplayProbe(Path(__file__).resolve().parents[2] / "fixtures/preflight/snapshot-6x4090-pcie.json")
        self.h, self.busy = h, busy

    def snapshot(self):  # type: ignore[no-untyped-def]
        snap = self.base.snapshot()
        server = self.h.run.server if self.h.run else None
        if server is None or server.done:
            return snap
        gpus = [g.model_copy(update={"memory": g.memory.model_copy(update={"used": g.memory.used + 2 * 2**30})})
                if g.index in self.busy else g for g in snap.gpus]
        return snap.model_copy(update={"gpus": gpus})


@pytest.mark.parametrize("busy, outcome, status", [([0, 1], "ready", 0), ([0], "gpus-idle", 3)])
def test_every_gpu_of_the_layout_must_work(h, models, busy, outcome, status):
    port = free_port()
    run = h.make([str(models["good"]), "--host", "127.0.0.1", "--port", str(port), "-tp", "2"], env={},
                 preflight=True, gpus=None, release_timeout=3)
    # not the CPU build: NVML (replayed) decides, six 24 GiB cards
    run.s.env.pop("VLLM_TARGET_DEVICE", None)
    run.env.pop("VLLM_TARGET_DEVICE", None)
    run.deps.base_env.pop("VLLM_TARGET_DEVICE", None)
    run.deps.gpu_probe = GrowingProbe(h, busy)
    res = run.go()
    assert res.exit_status == status, h.text
    assert res.attempts[0].outcome == outcome
    if outcome == "gpus-idle":
        assert "GPU(s) 1 hold no memory of the server" in h.text
        assert [d.rule for d in res.attempts[0].diagnoses] == ["runner.gpus-idle"]
    else:
        assert "every GPU of the layout holds memory for the server" in h.text


def test_kernel_log_of_the_window_is_triaged_with_the_attempt(tmp_path, compiled, monkeypatch):
    from qwen_triage.runner import attempt
    calls = []

    def fake_run(cmd, **kw):  # journalctl has nothing; dmesg has an Xid inside the window and one outside
        calls.append(cmd[0])
        if cmd[0] == "journalctl":
            return subprocess.CompletedProcess(cmd, 0, b"", b"")
        out = (b"2025-01-01T09:00:00,000000+00:00 NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
               b"2025-01-01T10:00:05,000000+00:00 NVRM: Xid (PCI:0000:89:00): 79, pid=1234, name=VLLM::Worker_TP1, "
               b"GPU has fallen off the bus.\n")
        return subprocess.CompletedProcess(cmd, 0, out, b"")

    from datetime import datetime, timezone

    t = datetime(2025, 1, 1, 10, 0, 0, tzinfo=timezone.utc).timestamp()
    text, how = attempt.kernel_window(t, t + 30, run=fake_run)
    assert calls == ["journalctl", "dmesg"] and how == "dmesg"
    assert b"0000:89:00" in text and b"0000:3b:00" not in text
    log = tmp_path / "attempt-1.log"
    log.write_text("(Worker_TP1 pid=1234) ERROR 01-01 10:00:05 [multiproc_executor.py:1] WorkerProc hit an issue\n")
    monkeypatch.setattr(attempt, "kernel_window", lambda a, b: (text, how))
    report, notes = attempt.triage_attempt(log, compiled, t, t + 30)
    xid = [d for d in report.diagnoses if d.class_ == "hardware.xid_fatal"]
    assert xid and xid[0].facts.get("pci", "").endswith("89:00")
    assert any(i.name.startswith("kernel log") for i in report.inputs)


def test_kernel_log_unreadable_is_a_note():
    from qwen_triage.runner.attempt import kernel_window

    def denied(cmd, **kw):
        if cmd[0] == "journalctl":
            raise FileNotFoundError("journalctl")
        return subprocess.CompletedProcess(cmd, 1, b"", b"dmesg: read kernel buffer failed: Operation not permitted\n")

    text, how = kernel_window(0, 1, run=denied)
    assert text is None and "Operation not permitted" in how


# --- the command line: signals, detach -------------------------------------------------


def _cli(args: list[str], marker: str, tmp_path: Path, **kw) -> subprocess.Popen:
    env = {**os.environ, "QWEN_TRIAGE_TEST_MARK": marker, "XDG_STATE_HOME": str(tmp_path / "state")}
    return subprocess.Popen([sys.executable, "-m", "qwen_triage", "relaunch", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=default_sigint, **kw)


def test_cli_ctrl_c_before_ready(tmp_path, marker, models):
    port = free_port()
    p = _cli(["--apply", "--no-preflight", "--env", "VLLM_TARGET_DEVICE=cpu", "--env", "FAKE_VLLM_STARTUP=60",
              "--", str(FAKE_VLLM), "serve", str(models["good"]), "--host", "127.0.0.1", "--port", str(port)],
             marker, tmp_path)
    assert p.stderr is not None
    seen = []
    for line in p.stderr:  # wait until the server is starting
        seen.append(line)
        if line.startswith("  log: "):
            break
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    err = "".join(seen) + err
    assert p.returncode == 130, err
    assert "interrupted before the server was ready" in err


def test_cli_detach_leaves_the_server_running(tmp_path, marker, models):
    port = free_port()
    p = _cli(["--apply", "--detach", "--no-preflight", "--env", "VLLM_TARGET_DEVICE=cpu", "--journal",
              str(tmp_path / "j.jsonl"), "--", str(FAKE_VLLM), "serve", str(models["good"]), "--host", "127.0.0.1",
              "--port", str(port)], marker, tmp_path)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    lines = dict(line.split("=", 1) for line in out.splitlines() if "=" in line and line[:3] in ("PID", "LOG"))
    pid = int(lines["PID"])
    try:
        from qwen_triage.runner.readiness import Endpoint, health

        assert health(Endpoint(base=f"http://127.0.0.1:{port}"), timeout=2).ok  # still serving after we left
        assert Path(lines["LOG"]).read_text().count("Application startup complete") == 1
        rec = [r for r in read_journal(tmp_path / "j.jsonl") if r["kind"] == "run-end"][-1]
        assert rec["outcome"] == "detached"
    finally:
        os.killpg(pid, signal.SIGTERM)


def test_cli_ctrl_c_during_startup_launches_nothing(tmp_path, marker, models):
    # Ctrl-C before any launch (while the rule pack loads): no server, exit 130.
    p = _cli(["--apply", "--no-preflight", "--env", "VLLM_TARGET_DEVICE=cpu", "--", str(FAKE_VLLM), "serve",
              str(models["good"]), "--port", str(free_port())], marker, tmp_path)
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    # 130 from the runner; -SIGINT or click's "Aborted!" (1) when it came before the runner's handler
    assert p.returncode in (130, -signal.SIGINT, 1), err
    assert "attempt 1 is ready" not in err


def test_cli_bad_profile_exits_2(tmp_path, marker):
    prof = tmp_path / "p.yaml"
    prof.write_text("command: vllm serve m\nattempts: 99\n")
    p = _cli(["--profile", str(prof)], marker, tmp_path)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 2 and "p.yaml:2:" in err
