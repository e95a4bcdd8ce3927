"""Cross-check qwen_triage.runner.vllm.argv against vLLM's own argument parser.

Needs the real vLLM (CPU build) set up by scripts/setup-vllm.sh; skipped
without it. One subprocess parses every case with vLLM 0.32's parsers (the
``vllm serve`` subcommand and the ``api_server`` module's), and the typed views
of our parse must agree with the namespace vLLM builds.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from qwen_triage.runner.vllm.argv import parse_vllm_argv

pytestmark = pytest.mark.vllm

VENV = Path(os.environ.get("QWEN_TRIAGE_VLLM_VENV", Path.home() / ".cache/qwen-triage/vllm-venv"))
PY = VENV / "bin" / "python"

FIELDS = [
    "model", "host", "port", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
    "max_model_len", "gpu_memory_utilization", "dtype", "enforce_eager", "disable_custom_all_reduce",
]

PROBE = r"""
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.entrypoints.cli.serve import ServeSubcommand

fields, cases = json.load(sys.stdin)
out = []
for entry, args in cases:
    if entry == "serve":
        top = FlexibleArgumentParser(prog="vllm")
        sub = top.add_subparsers(required=False, dest="subparser")
        ServeSubcommand().subparser_init(sub)
        ns = top.parse_args(["serve", *args])
        if getattr(ns, "model_tag", None) is not None:
            ns.model = ns.model_tag
        defaults = vars(top.parse_args(["serve", "m"]))
    else:
        parser = make_arg_parser(FlexibleArgumentParser())
        ns = parser.parse_args(args)
        defaults = vars(parser.parse_args([]))
    out.append({"got": {k: getattr(ns, k, None) for k in fields}, "default": {k: defaults.get(k) for k in fields},
                "others": {k: v for k, v in vars(ns).items() if isinstance(v, (str, int, float, bool, list, type(None)))}})
print("@@PROBE@@" + json.dumps(out))
"""

M = "/models/Qwen2.5-7B-Instruct"
CASES: list[list[str]] = [
    ["vllm", "serve", M, "--host", "0.0.0.0", "--port", "8001", "-tp", "2", "-pp", "2", "-dp", "2"],
    ["vllm", "serve", M, "--tensor_parallel_size", "4", "--max_model_len=32k", "--gpu_memory_utilization=0.85"],
    ["vllm", "serve", M, "--max-model-len", "32K", "--dtype", "bfloat16", "--enforce-eager", "--disable-custom-all-reduce"],
    ["vllm", "serve", M, "--no-enforce-eager", "--no-disable-custom-all-reduce", "--port=9000", "--port", "9001"],
    ["vllm", "serve", "--model", M, "--served-model-name", "a", "b", "--trust-remote-code", "--seed", "-1"],
    ["vllm", "serve", "--enforce-eager", M, "-O3", "--compilation-config.mode", "3", "--max-model-len", "auto"],
    ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", M, "--port", "8002", "--tensor-parallel-size=2"],
    ["python", "-m", "vllm.entrypoints.openai.api_server", f"--model={M}", "--enforce_eager", "--max_model_len", "4096",
     "--pipeline_parallel_size=2", "--gpu-memory-utilization", "0.5", "--host", "127.0.0.1"],
]


@pytest.fixture(scope="module")
def vllm_parses():
    if not PY.exists():
        pytest.skip(f"no vLLM venv at {VENV}: run scripts/setup-vllm.sh")
    cases = []
    for argv in CASES:
        launch = parse_vllm_argv(argv)
        cases.append([launch.entry.value, [t for a in launch.args for t in a.tokens()]])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(VLLM_TARGET_DEVICE="cpu", HF_HUB_OFFLINE="1", PYTHONNOUSERSITE="1")
    proc = subprocess.run(
        [str(PY), "-c", PROBE], input=json.dumps([FIELDS, cases]), capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("@@PROBE@@"))
    return json.loads(line[len("@@PROBE@@"):])


@pytest.mark.parametrize("i", range(len(CASES)))
def test_typed_views_match_vllm(vllm_parses, i):
    ours = parse_vllm_argv(CASES[i])
    theirs = vllm_parses[i]
    for f in FIELDS:
        mine = getattr(ours, f)
        if mine is None:
            assert theirs["got"][f] == theirs["default"][f], f"{f}: we say not given, vLLM has {theirs['got'][f]!r}"
        else:
            assert mine == theirs["got"][f], f"{f}: ours {mine!r}, vLLM {theirs['got'][f]!r}"


def test_other_args_seen_by_vllm(vllm_parses):
    # case 4: --served-model-name takes two values, --seed a negative one.
    others = vllm_parses[4]["others"]
    assert others["served_model_name"] == ["a", "b"]
    assert others["seed"] == -1
    assert others["trust_remote_code"] is True
    assert vllm_parses[5]["others"]["optimization_level"] in (3, "3")
