"""Which GPUs to plan for, from a snapshot: one policy (`preflight.plan.gpus.gpus_to_plan`) for `plan`,
`doctor` and the runner's launch checks, which used to derive it three times with three answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_triage.preflight.doctor import probe
from qwen_triage.preflight.machine.nvml import Gpu, GpuSnapshot, Memory, ReplayProbe
from qwen_triage.preflight.plan.command import PlanOptions, run
from qwen_triage.preflight.plan.gpus import gpus_to_plan
from qwen_triage.runner.launch_checks import plan_for, probe_machine
from qwen_triage.preflight.model.config import load_model_config
from qwen_triage.runner.vllm.argv import parse_vllm_argv

MIXED = Path(__file__).resolve().parents[2] / "fixtures" / "preflight" / "snapshot-mixed-4090-3090.json"
MODEL = "Qwen/Qwen2.5-7B-Instruct"
GiB = 2**30


def _snap(sizes: list[int], ccs: list[str | None] | None = None, topology: bool = True) -> GpuSnapshot:
    n = len(sizes)
    gpus = [Gpu(index=i, name="GPU", pci_bus_id=f"0000:{i:02d}:00.0", uuid=f"GPU-{i:08x}",
                compute_capability=(ccs or ["8.9"] * n)[i], memory=Memory(total=s, used=0, free=s))
            for i, s in enumerate(sizes)]
    topo = [["X" if a == b else f"L{a}{b}" for b in range(n)] for a in range(n)] if topology else None
    return GpuSnapshot(source="test", gpus=gpus, topology=topo)


def test_the_smallest_card_the_server_sees_sizes_every_device() -> None:
    got = gpus_to_plan(_snap([24 * GiB, 12 * GiB, 48 * GiB]), "2,0")
    assert got.indices == (2, 0) and got.count == 2 and got.visible == 2
    assert got.memory_bytes == 24 * GiB  # GPU 1 (12 GiB) is hidden: it does not count
    assert got.topology == [["X", "L20"], ["L02", "X"]]


def test_a_count_takes_the_first_of_the_visible_gpus() -> None:
    got = gpus_to_plan(_snap([24 * GiB, 12 * GiB, 48 * GiB], ["8.9", "7.5", "9.0"]), None, count=2)
    assert got.indices == (0, 1) and got.count == 2 and got.visible == 3
    assert got.memory_bytes == 12 * GiB and got.compute_capabilities == ["8.9", "7.5"]


def test_more_devices_than_visible_are_planned_as_asked_without_links() -> None:
    got = gpus_to_plan(_snap([24 * GiB, 24 * GiB]), None, count=4)
    assert got.count == 4 and got.visible == 2 and got.indices == (0, 1)
    assert got.topology is None  # two of the four devices have no row: no link is judged


def test_cards_without_a_size_do_not_count_and_none_known_is_none() -> None:
    assert gpus_to_plan(_snap([0, 16 * GiB])).memory_bytes == 16 * GiB
    assert gpus_to_plan(_snap([0, 0])).memory_bytes is None


def test_a_partial_matrix_judges_no_link() -> None:
    snap = _snap([24 * GiB] * 3)
    snap = snap.model_copy(update={"topology": [row[:2] for row in snap.topology[:2]]})
    assert gpus_to_plan(snap).topology is None
    assert gpus_to_plan(snap, "1,0").topology == [["X", "L10"], ["L01", "X"]]


def test_plan_doctor_and_the_runner_plan_the_same_gpus() -> None:
    """One recorded mixed machine (4090s and 3090s): the three callers plan the same devices, memory and layout."""
    by_plan = run(PlanOptions(model=MODEL, snapshot=str(MIXED)))
    by_doctor = probe(gpu_probe=ReplayProbe(MIXED), model=MODEL, check_files=False).plan
    launch = parse_vllm_argv(["vllm", "serve", MODEL])
    machine, *_ = probe_machine(launch, {}, gpu_probe=ReplayProbe(MIXED))
    by_runner = plan_for(load_model_config(MODEL), machine, launch)
    assert by_doctor is not None and by_runner is not None
    want = gpus_to_plan(ReplayProbe(MIXED).snapshot())
    for plan in (by_plan, by_doctor, by_runner):
        assert (plan.gpus, plan.gpu_mem_bytes, plan.topology_known) == (want.count, want.memory_bytes, True)
    assert by_plan.recommended == by_doctor.recommended == by_runner.recommended


@pytest.mark.parametrize("cvd", ["3,1", ""])
def test_the_runner_sees_the_gpus_through_the_servers_variable(cvd: str) -> None:
    snap = ReplayProbe(MIXED).snapshot()
    machine, *_ = probe_machine(parse_vllm_argv(["vllm", "serve", MODEL]), {"CUDA_VISIBLE_DEVICES": cvd},
                                gpu_probe=ReplayProbe(MIXED))
    want = gpus_to_plan(snap, cvd)
    assert machine.visible == list(want.indices)
    assert (machine.gpus, machine.topology, machine.compute_capabilities) == (
        want.count, want.topology, want.compute_capabilities)
