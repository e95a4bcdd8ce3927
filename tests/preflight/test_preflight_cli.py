"""The three commands through click: formats, exit status 0/1/2, one-line errors."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from qwen_triage.cli.preflight import COMMANDS

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "preflight"
ROOT = Path(__file__).resolve().parents[2]


@click.group()
def cli() -> None:
    """Stand-in for the main qwen-triage group."""


for _cmd in COMMANDS:
    cli.add_command(_cmd)


def run(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_command_names():
    assert [c.name for c in COMMANDS] == ["plan", "check-model", "doctor"]


# --- plan ----------------------------------------------------------------------------------------------


def test_plan_text():
    r = run("plan", "--model", "Qwen/Qwen2.5-32B-Instruct", "--gpus", "6", "--gpu-mem", "24GiB")
    assert r.exit_code == 0, r.output
    assert "TP 6 on all 6 GPUs is impossible" in r.stdout
    assert "Recommended  TP 2 x PP 3" in r.stdout
    assert "vllm serve Qwen/Qwen2.5-32B-Instruct --tensor-parallel-size 2 --pipeline-parallel-size 3" in r.stdout


def test_plan_json():
    r = run("plan", "-m", "Qwen/Qwen2.5-32B-Instruct", "--gpus", "6", "--gpu-mem", "24GiB", "--format", "json")
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    assert data["recommended"]["tp"] == 2 and data["recommended"]["pp"] == 3 and data["gpus"] == 6
    assert data["command"][:2] == ["vllm", "serve"]
    assert data["model"]["num_attention_heads" if False else "num_heads"] == 40


def test_plan_requested_layout_fails_with_1():
    r = run(
        "plan",
        "-m",
        "Qwen/Qwen2.5-32B-Instruct",
        "--gpus",
        "6",
        "--gpu-mem",
        "24GiB",
        "--tensor-parallel-size",
        "6",
        "--format",
        "json",
    )
    assert r.exit_code == 1
    d = json.loads(r.stdout)["diagnoses"][0]
    assert d["class"] == "config.tp_indivisible" and d["rule"] == "preflight.plan.tp-heads"


def test_plan_markdown():
    r = run("plan", "-m", "qwen3:32b", "--gpus", "4", "--gpu-mem", "48GiB", "--format", "markdown")
    assert r.exit_code == 0
    assert r.stdout.startswith("# Plan: qwen3:32b on 4 x 48.0 GiB") and "```sh" in r.stdout


def test_plan_from_snapshot_and_local_config(tmp_path):
    cfg = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 5120,
        "intermediate_size": 27648,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "num_hidden_layers": 64,
        "vocab_size": 152064,
        "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16",
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = run("plan", "-m", tmp_path, "--snapshot", FIXTURES / "snapshot-6x4090-pcie.json", "--format", "json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["gpus"] == 6 and data["topology_known"] and data["gpu_mem_bytes"] == 24564 * 2**20
    assert data["command"][2] == str(tmp_path)


@pytest.mark.parametrize(
    "args, reason",
    [
        (["--model", "Qwen/Qwen9-1B", "--gpus", "2", "--gpu-mem", "24GiB"], "unknown model"),
        (["--model", "Qwen/Qwen2.5-7B", "--gpus", "2", "--gpu-mem", "lots"], "cannot read size"),
        (["--model", "Qwen/Qwen2.5-7B", "--gpus", "2"], "cannot read the GPUs"),
    ],
)
def test_plan_bad_input_exits_2(args, reason):
    r = run("plan", *args)
    assert r.exit_code == 2
    assert reason in r.stderr and r.stderr.count("\n") == 1 and r.stderr.startswith("qwen-triage plan: ")


# --- check-model ----------------------------------------------------------------------------------------


def test_check_model_exit_codes(build, tmp_path):
    d = tmp_path / "m"
    build.model(d)
    ok = run("check-model", d)
    assert ok.exit_code == 0 and "No problems found." in ok.stdout
    os.truncate(d / "model-00002-of-00003.safetensors", 500)
    bad = run("check-model", d, "--format", "json")
    assert bad.exit_code == 1
    assert json.loads(bad.stdout)["diagnoses"][0]["class"] == "model.shard_corrupt"
    missing = run("check-model", tmp_path / "nowhere")
    assert missing.exit_code == 2 and "no such file" in missing.stderr


def test_check_model_sha256_alone_prints_sums(build, tmp_path):
    path = build.gguf(tmp_path / "m.gguf")
    r = run("check-model", path, "--sha256")
    assert r.exit_code == 0
    assert f"{hashlib.sha256(path.read_bytes()).hexdigest()}  m.gguf" in r.stdout.splitlines()


def test_check_model_sha256_file(build, tmp_path):
    path = build.gguf(tmp_path / "m.gguf")
    sums = tmp_path / "sums"
    sums.write_text(f"{'1' * 64}  m.gguf\n")
    r = run("check-model", path, "--sha256", sums, "--format", "markdown")
    assert r.exit_code == 1 and "sha256-mismatch" in r.stdout


# --- doctor ----------------------------------------------------------------------------------------------


def test_doctor_offline_json():
    r = run(
        "doctor",
        "--nvidia-smi",
        FIXTURES / "nvidia-smi-q-6gpu.xml",
        "--topo",
        FIXTURES / "topo-6gpu.txt",
        "--format",
        "json",
    )
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    assert data["offline"] and len(data["inventory"]["gpus"]["gpus"]) == 6
    assert {d["class"] for d in data["diagnoses"]} == {"memory.gpu_util_too_high", "hardware.pcie_error"}


def test_doctor_snapshot_text_and_model(build, tmp_path):
    d = tmp_path / "m"
    build.model(d)
    r = run("doctor", "--snapshot", FIXTURES / "snapshot-8xh100-nvlink.json", "--model", d)
    assert r.exit_code == 0, r.stdout
    assert "NVIDIA H100 80GB HBM3" in r.stdout and "Model files" in r.stdout and "Plan  TP" in r.stdout


def test_doctor_bad_input():
    r = run("doctor", "--snapshot", FIXTURES / "topo-6gpu.txt")
    assert r.exit_code == 2 and r.stderr.startswith("qwen-triage doctor: ") and r.stderr.count("\n") == 1
    r = run("doctor", "--record", "x.json", "--snapshot", FIXTURES / "snapshot-6x4090-pcie.json")
    assert r.exit_code == 2


def test_doctor_live_without_nvml():
    """This machine has no GPU: doctor says so and still reports the rest (exit 1 for the missing GPU)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("NVML loads here")
    except pytest.skip.Exception:
        raise
    except Exception:
        pass
    r = run("doctor", "--format", "json")
    data = json.loads(r.stdout)
    assert data["inventory"]["nvml_error"] and data["inventory"]["system"] and data["inventory"]["software"]
    assert "runtime.no_gpu_visible" in [d["class"] for d in data["diagnoses"]]
    assert r.exit_code == 1


def test_cli_import_is_light():
    code = (
        "import sys; import qwen_triage.cli.preflight; "
        "heavy = [m for m in ('pynvml', 'gguf', 'safetensors', 'numpy', 'rich', 'torch') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    assert out.stdout.strip() == ""


def test_plan_for_more_gpus_than_the_snapshot_has():
    r = run(
        "plan",
        "-m",
        "Qwen/Qwen2.5-7B-Instruct",
        "--snapshot",
        FIXTURES / "snapshot-6x4090-pcie.json",
        "--gpus",
        "8",
        "--format",
        "json",
    )
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    assert data["gpus"] == 8 and not data["topology_known"]
    assert [d["class"] for d in data["diagnoses"]] == ["config.insufficient_gpus"]
