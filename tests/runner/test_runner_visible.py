"""The runner reads CUDA_VISIBLE_DEVICES as CUDA does: set but empty is no GPU, never "every GPU".

Before the one parser (`qwen_triage.visible_devices`) the runner's layout treated an empty value as all
GPUs and planned a layout on cards the server would never see. Recorded NVML snapshot, no vLLM needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_triage.preflight.machine.nvml import ReplayProbe
from qwen_triage.preflight.model.config import load_model_config
from qwen_triage.runner.launch_checks import plan_context, probe_machine, run_preflight
from qwen_triage.runner.layout import visible_indices
from qwen_triage.runner.vllm.argv import parse_vllm_argv

SNAP = Path(__file__).resolve().parents[2] / "fixtures" / "preflight" / "snapshot-6x4090-pcie.json"
MODEL = "Qwen/Qwen2.5-32B-Instruct"


def launch(*more: str):
    return parse_vllm_argv(["vllm", "serve", MODEL, "--max-model-len", "32768", *more])


@pytest.mark.parametrize("empty", ["", "  "])
def test_empty_value_is_no_gpu_in_the_layout(empty):
    assert visible_indices({"CUDA_VISIBLE_DEVICES": empty}, 6) == []
    assert visible_indices({}, 6) == [0, 1, 2, 3, 4, 5]


def test_empty_value_machine_has_no_gpu():
    machine, *_ = probe_machine(launch("-tp", "2"), {"CUDA_VISIBLE_DEVICES": ""}, gpu_probe=ReplayProbe(SNAP))
    assert machine.nvml and machine.all_gpus == 6
    assert machine.visible == [] and machine.gpus == 0


def test_empty_value_preflight_does_not_plan_on_all_gpus():
    pre = run_preflight(launch("-tp", "2"), {"CUDA_VISIBLE_DEVICES": ""}, gpu_probe=ReplayProbe(SNAP),
                        check_port=False)
    assert pre.plan is None
    assert pre.notes[0].startswith("planning for 0 device(s)")
    assert any("no GPU is visible" in n for n in pre.notes)


def test_replan_under_an_empty_value_finds_no_layout():
    full, *_ = probe_machine(launch(), {}, gpu_probe=ReplayProbe(SNAP))
    shape = load_model_config(MODEL)
    ctx = plan_context(full, shape, {})
    assert ctx.replan is not None
    assert ctx.replan(launch("-tp", "2", "-pp", "3"), {"CUDA_VISIBLE_DEVICES": ""}) is None
    four = ctx.replan(launch("-tp", "2", "-pp", "3"), {"CUDA_VISIBLE_DEVICES": "2,3,4,5"})
    assert four is not None and four.tp * four.pp * four.dp == 4
    six = ctx.replan(launch("-tp", "2", "-pp", "3"), {})
    assert six is not None and six.tp * six.pp * six.dp == 6


def test_a_listed_gpu_out_of_range_stops_the_list():
    """CUDA ignores everything after the first invalid entry: 9 on a six-GPU box hides GPU 1 too."""
    machine, *_ = probe_machine(launch(), {"CUDA_VISIBLE_DEVICES": "3,9,1"}, gpu_probe=ReplayProbe(SNAP))
    assert machine.visible == [3] and machine.gpus == 1
