"""Issue 10, item 17: no invented figures when GPU memory is unknown; a missing local model path is an error.

Before: ``relaunch --gpus 4 -- vllm serve Qwen/Qwen2.5-32B-Instruct -tp 3`` without NVML printed
"plan's own pick is TP 1 x 4 replicas (... 107 max-length sequence(s) per replica)" — the 107 came from
a stand-in memory size; and ``relaunch -- vllm serve ./x`` said "(a hub name?)" and exited 0.
"""

from __future__ import annotations

import re
import subprocess
import sys

from qwen_triage.preflight.model.config import load_model_config
from qwen_triage.preflight.plan.layouts import plan_layouts
from qwen_triage.runner.launch_checks import missing_local_model
from qwen_triage.runner.vllm.argv import parse_vllm_argv
from qwen_triage.units import GiB
from tests.conftest import ROOT


def _relaunch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "qwen_triage", "relaunch", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=120, env={**os.environ, **(env or {})})


def test_plan_with_unknown_memory_gives_no_figures() -> None:
    cfg = load_model_config("Qwen/Qwen2.5-32B-Instruct")
    plan = plan_layouts(cfg, 4, 1024 * GiB, memory_known=False)
    assert plan.gpu_mem_gib is None and not plan.memory_known
    assert plan.recommended is not None and "sequence" not in plan.recommended.why
    assert "memory unknown" in plan.recommended.why
    for x in plan.layouts:
        assert x.max_concurrent_seqs is None and x.kv_cache_tokens is None and x.total_concurrent_seqs is None
        assert not any("tokens per replica" in t or "at once" in t for t in x.tradeoffs)
    known = plan_layouts(cfg, 4, 80 * GiB)
    assert known.memory_known and "sequence" in known.recommended.why  # type: ignore[union-attr]


def test_relaunch_without_nvml_prints_no_invented_sequence_counts() -> None:
    r = _relaunch("--gpus", "4", "--", "vllm", "serve", "Qwen/Qwen2.5-32B-Instruct", "-tp", "3")
    text = r.stdout + r.stderr
    if "NVML:" in text and "no NVML" not in text:
        return  # a machine with GPUs: memory is known there
    assert not re.search(r"\d+ max-length sequence", text), text
    assert "1024" not in text


def test_missing_local_model_path_is_an_error() -> None:
    for model in ("./no-such-model", "../no-such-model", "/no/such/model", "~/no-such-model-qt"):
        assert missing_local_model(parse_vllm_argv(["vllm", "serve", model]))
    assert missing_local_model(parse_vllm_argv(["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"])) is None
    assert missing_local_model(parse_vllm_argv(["vllm", "serve", str(ROOT)])) is None
    r = _relaunch("--", "vllm", "serve", "./x-does-not-exist")
    assert r.returncode == 2, r.stdout + r.stderr
    err = [ln for ln in (r.stdout + r.stderr).splitlines() if "error" in ln]
    assert len(err) == 1 and "./x-does-not-exist" in err[0] and "does not exist" in err[0]
    assert "hub name" not in r.stdout + r.stderr
