"""`run --stall` and `attach` on a multi-rank job that hangs: when the ranks' timeouts end the silence, the same
analysis as `scan` (engine.hang) names the rank that stopped, live, while the job is still up; the summary and the
report carry it too.

The children are real processes: a replay of a genuine gloo torchrun recording (fixtures/hang, recorded by
scripts/hang_scenarios.py), and, where the real vLLM venv gives torch, torchrun itself.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.live.helpers import Live, fixture, qt_argv, read_pids

W4_SLEEP = ROOT / "fixtures" / "hang" / "w4-sleep" / "torchrun.log"  # rank 2 sleeps at step 3
STALL, HANG = "qwen-triage ▸ stall", "qwen-triage ▸ hang"


def test_run_names_the_rank_that_stopped_when_the_stall_ends(tmp_path) -> None:
    report = tmp_path / "r.json"
    live = Live(qt_argv("run", "--stall", "1", "--report", str(report), "--log", str(tmp_path / "run.log"), "--",
                        *fixture("replay_ranks.py", str(W4_SLEEP), "--stall-after", "rank 2 stalls",
                                 "--pause", "3", "--linger", "3")))
    try:
        stalled = live.err.wait_for(STALL, timeout=30)
        named = live.err.wait_for(HANG, timeout=30)
        alive_when_named = live.proc.poll() is None
        rc = live.wait(60)
    finally:
        live.kill()
    assert stalled < named and alive_when_named  # after the stall, before the job's end
    err = live.err.text
    block = err[err.index(HANG):].split("qwen-triage ▸", 2)[1]
    assert block.split("\n")[1].startswith("Hang: rank 2 ") and "stopped first in all_reduce" in block
    rows = {line.split()[0]: line for line in block.splitlines() if line.strip()[:1].isdigit()}
    assert set(rows) == {"0", "1", "2", "3"} and "culprit" in rows["2"] and "culprit" not in rows["0"]
    assert err.count(HANG) == 1  # said once: the torchrun summary that follows does not change the verdict
    assert rc == 1
    summary = err.split("qwen-triage ▸ summary", 1)[1]
    assert "Hang: rank 2" in summary and "a victim" in summary  # torchrun's Root Cause names rank 0
    hang = json.loads(report.read_text())["hang"]
    assert hang["culprit"]["rank"] == 2 and hang["culprit"]["collective"] == "all_reduce"
    assert _verdicts(hang) == _verdicts(_scanned(W4_SLEEP))
    assert _verdicts(hang) == _verdicts(_scanned(W4_SLEEP))  # the same analysis as `scan` of the same lines


def _verdicts(hang: dict) -> list[tuple]:
    return [(r["rank"], r["verdict"], r["collective"], r["exitcode"]) for r in hang["ranks"]]


def _scanned(path: Path) -> dict:
    out = subprocess.run(qt_argv("scan", "--format", "json", str(path)), capture_output=True, timeout=120)
    return json.loads(out.stdout)["hang"]


def test_a_healthy_multi_rank_run_names_no_culprit_live(tmp_path) -> None:
    healthy = ROOT / "fixtures" / "hang" / "w4-healthy" / "torchrun.log"
    report = tmp_path / "r.json"
    live = Live(qt_argv("run", "--stall", "1", "--report", str(report), "--log", str(tmp_path / "run.log"), "--",
                        *fixture("replay_ranks.py", str(healthy), "--stall-after", "step 2 rank",
                                 "--pause", "2", "--linger", "1", "--exit", "0")))
    try:
        rc = live.wait(60)
    finally:
        live.kill()
    assert rc == 0 and HANG not in live.err.text
    hang = json.loads(report.read_text())["hang"]
    assert hang is None or (hang["culprit"] is None and not hang["suspects"])


def test_attach_names_the_rank_that_stopped(tmp_path) -> None:
    logfile, pidfile, go = tmp_path / "job.log", tmp_path / "pids", tmp_path / "go"
    with open(logfile, "ab") as out:  # `torchrun … >> job.log 2>&1`
        job = subprocess.Popen(fixture("replay_ranks.py", str(W4_SLEEP), "--stall-after", "rank 2 stalls",
                                       "--pause", "0", "--go", str(go), "--linger", "3", "--pidfile", str(pidfile)),
                               stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        read_pids(pidfile, 1, proc=job)
        live = Live(qt_argv("attach", str(job.pid), "--format", "json"))
        live.err.wait_for("attached to", timeout=30)
        go.touch()  # the other ranks time out now
        live.err.wait_for(HANG, timeout=30)
        alive_when_named = job.poll() is None
        rc = live.wait(60)
    finally:
        job.kill()
        job.wait()
    assert alive_when_named
    assert "Hang: rank 2 " in live.err.text and "stopped first in all_reduce" in live.err.text
    assert rc == 1
    hang = json.loads(live.out.data)["hang"]
    assert hang["culprit"]["rank"] == 2 and hang["culprit"]["collective"] == "all_reduce"
    assert _verdicts(hang) == _verdicts(_scanned(W4_SLEEP))


# --- torchrun itself (torch from the real vLLM venv) ------------------------------------------------------------


def _torchrun() -> Path:
    venv = Path(os.environ.get("QWEN_TRIAGE_VLLM_VENV", Path.home() / ".cache/qwen-triage/vllm-venv"))
    torchrun = venv / "bin" / "torchrun"
    if not torchrun.exists():
        pytest.skip(f"no torch at {venv}: run scripts/setup-vllm.sh")
    return torchrun


@pytest.mark.vllm
def test_run_on_a_genuine_torchrun_hang(tmp_path) -> None:
    torchrun = _torchrun()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "VIRTUAL_ENV")}
    env.update(HANG_MODE="sleep", HANG_RANK="1", HANG_STEP="2", HANG_TIMEOUT="6", PYTHONPATH=str(ROOT))
    report = tmp_path / "r.json"
    live = Live(qt_argv("run", "--stall", "2", "--report", str(report), "--log", str(tmp_path / "run.log"), "--",
                        str(torchrun), "--nproc-per-node=4", "--master-addr=127.0.0.1", "--master-port=29571",
                        str(ROOT / "scripts" / "hang_worker.py")), env=env)
    try:
        live.err.wait_for(STALL, timeout=120)
        live.err.wait_for(HANG, timeout=120)
        rc = live.wait(120)
    finally:
        live.kill()
    assert rc == 1
    assert "Hang: rank 1 " in live.err.text and "stopped first in all_reduce" in live.err.text
    hang = json.loads(report.read_text())["hang"]
    assert hang["culprit"]["rank"] == 1
    assert sorted(r["rank"] for r in hang["ranks"]) == [0, 1, 2, 3]
