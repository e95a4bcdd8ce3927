"""Profiles, option merging, the journal and the printed summary (no vLLM needed)."""

from __future__ import annotations

import io
import json

import pytest

from qwen_triage.runner.runlog import (
    AttemptRecord,
    DiagnosisBrief,
    Journal,
    RunRecord,
    read_journal,
)
from qwen_triage.redact import mask_argv
from qwen_triage.runner.main import RelaunchOptions, settings_from
from qwen_triage.runner.profile import ProfileError, command_from, load_profile
from qwen_triage.runner.render import Printer, command_text
from qwen_triage.runner.vllm.argv import parse_vllm_argv
from qwen_triage.runner.vllm.diff import Change



def test_profile_full(tmp_path):
    p = tmp_path / "six.yaml"
    p.write_text(
        "command: NCCL_DEBUG=WARN vllm serve /models/q --tensor-parallel-size 6 --port 8000\n"
        "env: {NCCL_P2P_DISABLE: 1, FLAG: true}\n"
        "expected_gpus: 6\n"
        "health_url: http://127.0.0.1:8000/health\n"
        "attempts: 4\n"
        "stall: 120\n"
    )
    s = settings_from(RelaunchOptions(profile_path=str(p), limits={"attempts": None, "backoff": 1.0},
                                      journal_path=str(tmp_path / "j")))
    assert s.launch.tensor_parallel_size == 6 and s.launch.model == "/models/q"
    assert s.env == {"NCCL_P2P_DISABLE": "1", "FLAG": "1", "NCCL_DEBUG": "WARN"}
    assert (s.expected_gpus, s.attempts, s.stall, s.backoff) == (6, 4, 120, 1.0)
    assert s.health_url == "http://127.0.0.1:8000/health"
    assert not s.apply and s.preflight


def test_profile_list_command_and_cli_override(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("command: [python, -m, vllm.entrypoints.openai.api_server, --model, /m, --port=9000]\n")
    assert load_profile(p).command[0] == "python"
    s = settings_from(RelaunchOptions(command=("vllm", "serve", "/other", "--port", "1"), profile_path=str(p),
                                       env_pairs=("A=b",)))
    assert s.launch.model == "/other" and s.env == {"A": "b"}


@pytest.mark.parametrize(
    "text, where",
    [
        ("command: vllm serve m\nattempts: 0\n", ":2:"),
        ("command: vllm serve m\nbogus: 1\n", ":2:"),
        ("command: vllm serve m\ncommand: x\n", "duplicate key"),
        ("health_url: ftp://x\n", "health_url"),
        ("- a\n", "mapping"),
    ],
)
def test_profile_errors_point_at_the_line(tmp_path, text, where):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ProfileError, match=where):
        load_profile(p)


def test_command_errors():
    with pytest.raises(ProfileError, match="no command"):
        command_from(None, [])
    with pytest.raises(ProfileError, match="not a vLLM launch"):
        command_from(None, ["ollama", "serve"])
    launch, env = command_from(None, ["CUDA_VISIBLE_DEVICES=0,1", "vllm", "serve", "m"])
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1"} and launch.model == "m"


def test_conflicting_options():
    with pytest.raises(ProfileError, match="exclude"):
        settings_from(RelaunchOptions(command=("vllm", "serve", "m"), detach=True, stop_when_ready=True))
    with pytest.raises(ProfileError, match="dry runs"):
        settings_from(RelaunchOptions(command=("vllm", "serve", "m"), gpu_snapshot="x.json", apply=True))


def test_journal_appends_and_masks(tmp_path):
    j = Journal(tmp_path / "j" / "journal.jsonl")
    j.append(RunRecord(kind="run-start", run="r1", time="t", argv=["vllm", "serve", "m", "--api-key", "s3"],
                       env={"HF_TOKEN": "hf_x", "A": "1"}))
    j.append(AttemptRecord(run="r1", attempt=1, key="k", argv=["vllm", "serve", "m", "--api-key=s3"], env={},
                           started="t", outcome="exited", exit_status=1,
                           diagnoses=[DiagnosisBrief(class_="c", rule="r", title="t", severity="error")]))
    j.append(RunRecord(kind="run-end", run="r2", time="t"))
    recs = list(read_journal(j.path, run="r1"))
    assert [r["kind"] for r in recs] == ["run-start", "attempt"]
    assert recs[0]["argv"][-1] == "***" and recs[0]["env"] == {"HF_TOKEN": "***", "A": "1"}
    assert recs[1]["argv"][-1] == "--api-key=***"
    assert recs[1]["diagnoses"][0]["class"] == "c"
    assert all(json.loads(line) for line in j.path.read_text().splitlines())


def test_mask_argv():
    assert mask_argv(["--api-key", "a", "b", "--port", "1"]) == ["--api-key", "***", "***", "--port", "1"]
    assert mask_argv(["--hf_token=x"]) == ["--hf_token=***"]


def test_summary_and_command_text():
    buf = io.StringIO()
    recs = [
        AttemptRecord(run="r", attempt=1, key="a", argv=["vllm"], env={}, started="t", seconds=9.1, outcome="exited",
                      exit_status=1, diagnoses=[DiagnosisBrief(class_="config.tp_indivisible", rule="x", title="t",
                                                               severity="error")]),
        AttemptRecord(run="r", attempt=2, key="b", argv=["vllm"], env={}, started="t", seconds=40.0, ready_after=39.7,
                      outcome="ready", exit_status=0,
                      changes=[Change(kind="arg", name="--tensor-parallel-size", before="6", after="2", reason="r")]),
    ]
    Printer(buf).summary(recs)
    lines = buf.getvalue().splitlines()
    assert lines[0].split() == ["#", "outcome", "time", "ready", "exit", "diagnoses", "changed"]
    assert lines[1].split() == ["1", "exited", "9.1s", "-", "1", "config.tp_indivisible", "-"]
    assert lines[2].split() == ["2", "ready", "40.0s", "39.7s", "0", "-", "--tensor-parallel-size"]
    launch = parse_vllm_argv(["vllm", "serve", "/m x", "--api-key", "k"])
    assert command_text(launch, {"B": "2", "A": "a b"}) == "A='a b' B=2 vllm serve '/m x' --api-key \"$VLLM_API_KEY\""
