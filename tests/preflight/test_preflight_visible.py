"""CUDA_VISIBLE_DEVICES as doctor, the runner's preflight and its fix plans read it."""

from __future__ import annotations

import pytest

from qwen_triage.preflight.doctor import visible_gpus
from qwen_triage.preflight.machine.nvml import Gpu, GpuSnapshot, Memory
from qwen_triage.preflight.machine.software import cuda_visible_indices
from qwen_triage.runner.layout import visible_indices
from qwen_triage.runner.launch_checks import _visible


@pytest.mark.parametrize(
    ("cvd", "want"),
    [(None, None), ("", None), ("2,0", [2, 0]), (" 1 , 3 ", [1, 3]), (",", []), ("GPU-1234,0", None), ("MIG-x", None)],
)
def test_cuda_visible_indices(cvd, want) -> None:
    assert cuda_visible_indices(cvd) == want


def _snap(n: int) -> GpuSnapshot:
    gpus = [
        Gpu(index=i, name="H100", pci_bus_id=f"0000:{i:02d}:00.0", memory=Memory(total=(80 + i) * 2**30, used=0, free=(80 + i) * 2**30))
        for i in range(n)
    ]
    topo = [["X" if a == b else f"L{a}{b}" for b in range(n)] for a in range(n)]
    return GpuSnapshot(source="test", gpus=gpus, topology=topo)


def test_visible_gpus_renumbers_and_cuts_the_topology() -> None:
    snap = visible_gpus(_snap(4), "3,1,9")
    assert [g.index for g in snap.gpus] == [3, 1]
    assert snap.topology == [["X", "L31"], ["L13", "X"]]


@pytest.mark.parametrize("cvd", [None, "", ",", "GPU-1234"])
def test_visible_gpus_keeps_every_gpu_when_it_cannot_map(cvd) -> None:
    snap = _snap(3)
    assert visible_gpus(snap, cvd) is snap


@pytest.mark.parametrize(
    ("cvd", "want"), [(None, [0, 1, 2]), ("", [0, 1, 2]), ("2,0,5", [2, 0]), (",", []), ("GPU-1", [0, 1, 2])]
)
def test_runner_visible(cvd, want) -> None:
    assert _visible(cvd, 3) == want


@pytest.mark.parametrize(
    ("env", "want"),
    [({}, [0, 1, 2]), ({"CUDA_VISIBLE_DEVICES": ""}, [0, 1, 2]), ({"CUDA_VISIBLE_DEVICES": "2,x,0"}, [2, 0])],
)
def test_runner_visible_indices(env, want) -> None:
    assert visible_indices(env, 3) == want
