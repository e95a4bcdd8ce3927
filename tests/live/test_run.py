"""`qwen-triage run` with real child processes, real signals and real files."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.live.helpers import (
    BANNER,
    RULES,
    Live,
    assert_all_gone,
    fixture,
    flat,
    qt_argv,
    read_pids,
)
from tests.timelimits import scaled

# api-server + engine-core + six workers
HANG_PROCESSES = 8


def test_diagnosis_prints_live_within_a_second_and_everything_is_kept(tmp_path) -> None:
    log, stamp, report = tmp_path / "run.log", tmp_path / "stamp", tmp_path / "report.json"
    live = Live(
        qt_argv("run", "--log", str(log), "--report", str(report), "--stall", "0", "--",
                *fixture("vllm_tp6_heads.py", "--stamp", str(stamp), "--linger", "1.5"))
    )
    seen = live.err.wait_for(BANNER, timeout=15)
    child_alive_when_seen = live.proc.poll() is None
    rc = live.wait()
    latency = seen - float(stamp.read_text())
    print(f"evidence line -> diagnosis on stderr: {latency * 1000:.0f} ms")
    assert latency < scaled(1.0)
    assert child_alive_when_seen  # printed while the child was still running, not at its exit
    assert rc == 1  # the child's exit status

    direct = subprocess.run(fixture("vllm_tp6_heads.py", "--speed", "0"), capture_output=True)
    assert live.out.data == direct.stdout  # stdout: byte for byte, nothing of ours
    err = live.err.text
    pos = 0
    for line in direct.stderr.decode().splitlines():  # stderr: the child's lines, in order
        pos = err.index(line, pos) + len(line)
    # the log: everything, stdout and stderr in the order they came (the fixture pauses between them)
    assert log.read_bytes() == direct.stdout + direct.stderr

    r = json.loads(report.read_text())
    d = r["diagnoses"][0]
    assert d["class"] == "config.tp_indivisible" and d["facts"] == {"heads": 40, "tp": 6}
    assert d["evidence"][0]["path"] == str(log) and d["evidence"][0]["line"] == 25
    assert "the child exited with status 1" in r["notes"]
    assert "summary" in err and "Tensor-parallel size does not divide" in err


def test_pass_through_is_byte_exact(tmp_path) -> None:
    expect = tmp_path / "expect"
    expect.mkdir()
    subprocess.run(fixture("passthrough_bytes.py", "--expect", str(expect)), check=True)
    log = tmp_path / "bytes.log"
    live = Live(qt_argv("run", "-q", "--log", str(log), "--", *fixture("passthrough_bytes.py")))
    assert live.wait() == 7
    assert live.out.data == (expect / "stdout.bin").read_bytes()
    assert live.err.data == (expect / "stderr.bin").read_bytes()
    assert log.read_bytes() == (expect / "merged.bin").read_bytes()


@pytest.mark.parametrize(("sig", "status"), [("SEGV", 139), ("KILL", 137)])
def test_exit_status_of_a_child_killed_by_a_signal(tmp_path, sig: str, status: int) -> None:
    live = Live(qt_argv("run", "--rules", str(RULES), "--log", str(tmp_path / "r.log"), "--stall", "0", "--",
                        *fixture("ollama_runner_crash.py", "--signal", sig)))
    assert live.wait() == status
    err = live.err.text
    assert f"killed by signal {status - 128} (SIG{sig})" in err
    assert BANNER in err and "memory.gpu_oom" in err  # diagnosed live, from the runner's last words


def test_stall_report_names_the_stage_and_ctrl_c_leaves_no_process(tmp_path) -> None:
    pidfile = tmp_path / "pids"
    live = Live(qt_argv("run", "--stall", "2", "--grace", "3", "--log", str(tmp_path / "r.log"), "--",
                        *fixture("vllm_nccl_hang.py", "--pidfile", str(pidfile))))
    try:
        pids = read_pids(pidfile, HANG_PROCESSES, proc=live.proc)
        live.err.wait_for("qwen-triage ▸ stall", timeout=10)
        time.sleep(0.2)
        err = flat(live.err.text)
        assert "in stage “NCCL / distributed init”" in err  # the workers' last words, not the heartbeat
        assert "vLLM is using nccl==2.26.2" in err
        assert "NCCL_DEBUG=INFO" in err  # the stage's hint
        assert "Waiting for 1 local, 0 remote core engine proc(s) to start. [x" in err  # folded heartbeats
        assert live.proc.poll() is None  # a stall is reported, not acted on
        live.ctrl_c()
        rc = live.wait(20)
    finally:
        live.kill()
    assert rc == 128 + signal.SIGINT  # the API server died of the forwarded SIGINT
    assert_all_gone(pids)
    # issue 29 §3: the stall is the run's finding and heads the summary, with its stage; never "No diagnosis"
    summary = flat(live.err.text).split("summary", 1)[-1]
    headline = summary.split("Stalled: ", 1)[-1].split("No known failure matched", 1)[0]
    assert summary.lstrip(" ─").startswith("Stalled: no output for") and "NCCL / distributed init" in headline
    assert "No diagnosis" not in summary
    assert "[stall] no output for" in summary and "hint:" in summary


def test_sigterm_kills_the_whole_tree_even_workers_that_ignore_it_or_escaped(tmp_path) -> None:
    pidfile = tmp_path / "pids"
    live = Live(qt_argv("run", "--stall", "0", "--grace", "1", "--log", str(tmp_path / "r.log"), "--",
                        *fixture("vllm_nccl_hang.py", "--pidfile", str(pidfile), "--ignore-term", "--escape")))
    try:
        pids = read_pids(pidfile, HANG_PROCESSES, proc=live.proc)
        time.sleep(0.8)  # descendants are noted twice a second
        started = time.monotonic()
        live.proc.send_signal(signal.SIGTERM)  # to qwen-triage alone, as `kill PID` or systemd would
        rc = live.wait(20)
        took = time.monotonic() - started
    finally:
        live.kill()
    assert rc == 128 + signal.SIGTERM
    assert "SIGKILL to" in live.err.text
    assert took < scaled(6)
    assert_all_gone(pids)


def test_processes_left_behind_by_an_exited_child_are_stopped(tmp_path) -> None:
    pidfile = tmp_path / "pids"
    live = Live(qt_argv("run", "--stall", "0", "--grace", "0.5", "--log", str(tmp_path / "r.log"), "--",
                        *fixture("vllm_nccl_hang.py", "--pidfile", str(pidfile), "--exit-after", "1.2")))
    try:
        pids = read_pids(pidfile, HANG_PROCESSES, proc=live.proc)
        rc = live.wait(20)
    finally:
        live.kill()
    assert rc == 1
    assert "left 7 process(es) running" in live.err.text
    assert_all_gone(pids)


def test_kill_on_fatal_stops_the_child_at_once(tmp_path) -> None:
    started = time.monotonic()
    live = Live(qt_argv("run", "--kill-on-fatal", "--grace", "2", "--stall", "0", "--log", str(tmp_path / "r.log"),
                        "--", *fixture("vllm_tp6_heads.py", "--linger", "60")))
    try:
        rc = live.wait(30)
    finally:
        live.kill()
    assert time.monotonic() - started < scaled(10)
    assert rc == 128 + signal.SIGTERM
    assert "--kill-on-fatal: stopping the child" in live.err.text


def test_kill_on_fatal_never_rests_on_a_client_s_prompt(tmp_path) -> None:
    # issue 29: prompts quoting an Xid, an OOM, vLLM's KV-cache message and an NCCL error, logged by the request
    # logger of a healthy server: the server keeps serving and exits by itself
    report = tmp_path / "report.json"
    live = Live(qt_argv("run", "--kill-on-fatal", "--grace", "2", "--stall", "0", "--log", str(tmp_path / "r.log"),
                        "--report", str(report), "--",
                        *fixture("vllm_prompts_quote_failures.py", "--linger", "1.5")))
    try:
        rc = live.wait(60)
    finally:
        live.kill()
    assert "--kill-on-fatal" not in live.err.text
    assert rc == 0, live.err.text
    assert json.loads(report.read_text())["diagnoses"] == []


def test_command_not_found_is_127_and_nothing_is_left(tmp_path) -> None:
    proc = subprocess.run(qt_argv("run", "--log", str(tmp_path / "x.log"), "--", "/no/such/command", "--flag"),
                          capture_output=True, timeout=60)
    assert proc.returncode == 127
    assert b"cannot run '/no/such/command'" in proc.stderr


def test_default_log_is_named_by_time_and_command(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    proc = subprocess.run(qt_argv("run", "--stall", "0", "--", sys.executable, "-c", "print('hello')"),
                          capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == b"hello\n"
    logs = list((tmp_path / "qwen-triage" / "runs").glob("*.log"))
    assert len(logs) == 1 and logs[0].read_bytes() == b"hello\n"
    assert logs[0].name.endswith("-python.log") and logs[0].name[:8].isdigit()


API_DRIVER = r"""
import json, signal, sys, time
from qwen_triage.engine.scanner import compile_pack
from qwen_triage.live.supervisor import Supervisor

events, stalls, stages, chunks = [], [], [], []
def broken_listener(ev):
    events.append(ev.class_)
    raise RuntimeError("a listener that fails must not stop anything")

sup = Supervisor(
    [sys.executable, sys.argv[1], "--pidfile", sys.argv[2]],
    log=sys.argv[3], compiled=compile_pack(), stall=2.0, grace=1.0, subreaper=True,  # six workers start first
    on_event=broken_listener, on_stall=stalls.append, on_stage=lambda s: stages.append(s.stage.id),
    on_output=lambda stream, data: chunks.append(stream),
)
sup.start()
deadline = time.monotonic() + 15
while not stalls and time.monotonic() < deadline:
    time.sleep(0.05)
procs = sup.processes()
status = sup.stop()
print(json.dumps({"status": status, "procs": procs, "stall_stage": stalls[0].stage.id if stalls else None,
                  "stages": stages, "events": events, "left": sup.processes(), "streams": sorted(set(chunks)),
                  "notes": sup.report().notes}))
"""


def test_supervisor_api_without_the_cli(tmp_path) -> None:
    pidfile, log = tmp_path / "pids", tmp_path / "api.log"
    proc = subprocess.run(
        [sys.executable, "-c", API_DRIVER, str(fixture("vllm_nccl_hang.py")[1]), str(pidfile), str(log)],
        capture_output=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    out = json.loads(proc.stdout.decode().splitlines()[-1])
    assert out["status"] == 128 + signal.SIGTERM
    assert len(out["procs"]) == HANG_PROCESSES and out["left"] == []
    assert out["stall_stage"] == "nccl"
    assert out["stages"][:2] == ["start", "workers"] and "nccl" in out["stages"]
    assert out["streams"] == [1, 2] or out["streams"] == [1]
    assert b"vLLM is using nccl" in log.read_bytes()
    assert any("stall:" in n for n in out["notes"])
    assert_all_gone(read_pids(pidfile, HANG_PROCESSES))


def test_triage_failure_does_not_touch_output_or_log(tmp_path, monkeypatch, live_compiled) -> None:
    from qwen_triage.live.live_report import Sink
    from qwen_triage.live.session import LiveSession
    from qwen_triage.live.supervisor import Supervisor

    def broken(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("matcher exploded")

    monkeypatch.setattr(LiveSession, "_feed_lines", broken)
    out_r, out_w = __import__("os").pipe()
    notes: list[str] = []
    sup = Supervisor(fixture("vllm_tp6_heads.py", "--speed", "0"), log=tmp_path / "l.log", compiled=live_compiled,
                     stdout=Sink(out_w), on_note=notes.append)
    sup.start()
    assert sup.wait(30) == 1
    __import__("os").close(out_w)
    with open(out_r, "rb") as f:
        forwarded = f.read()
    direct = subprocess.run(fixture("vllm_tp6_heads.py", "--speed", "0"), capture_output=True)
    assert forwarded == direct.stdout
    assert sorted(tmp_path.joinpath("l.log").read_bytes().splitlines()) == sorted(
        (direct.stdout + direct.stderr).splitlines())
    assert any("live triage stopped on an internal error" in n for n in notes)
    assert sup.stage is not None  # stage tracking and last lines carry on without the engine
