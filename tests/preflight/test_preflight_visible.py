"""CUDA_VISIBLE_DEVICES as doctor, plan, the runner's launch checks and its fix plans read it: one parser
(`qwen_triage.visible_devices`) with CUDA's semantics."""

from __future__ import annotations

import pytest

from qwen_triage import visible_devices
from qwen_triage.preflight.machine.nvml import Gpu, GpuSnapshot, Memory
from qwen_triage.preflight.plan.gpus import gpus_to_plan
from qwen_triage.runner.layout import visible_indices

UUIDS = ["GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", "GPU-8932aaaa-0000-0000-0000-000000000001",
         "GPU-12345678-0000-0000-0000-000000000002"]


@pytest.mark.parametrize(
    ("value", "texts", "stopped", "hides_all"),
    [
        (None, [], None, False),
        ("", [], None, True),
        ("  ", [], None, True),
        ("2,1", ["2", "1"], None, False),
        (" 1 , 3 ", ["1", "3"], None, False),
        ("0,2,-1,1", ["0", "2"], "-1", False),  # the CUDA guide's own example
        ("-1", [], "-1", True),
        ("none", [], "none", True),
        ("NoDevFiles", [], "NoDevFiles", True),
        (",", [], "", True),
        ("0,,1", ["0"], "", False),
        ("1gpu2", ["1gpu2"], None, False),  # read like strtoul: 1
        ("GPU-8932f937,MIG-GPU-8932f937/1/0,MIG-4a1b", ["GPU-8932f937", "MIG-GPU-8932f937/1/0", "MIG-4a1b"], None, False),
        ("GPU-", [], "GPU-", True),
    ],
)
def test_parse(value, texts, stopped, hides_all) -> None:
    vd = visible_devices.parse(value)
    assert [d.text for d in vd.ids] == texts
    assert vd.stopped_at == stopped
    assert vd.hides_all is hides_all
    assert vd.unset is (value is None)


def test_parse_kinds() -> None:
    vd = visible_devices.parse("3,GPU-89,MIG-GPU-12/1/0,MIG-abcd")
    assert [(d.kind, d.index, d.uuid_prefix) for d in vd.ids] == [
        ("index", 3, None), ("gpu-uuid", None, "GPU-89"), ("mig", None, "GPU-12"), ("mig", None, None)]
    assert visible_devices.parse("1gpu2").ids[0].index == 1


@pytest.mark.parametrize("value", ["0,0", "1,2,1", "GPU-89,GPU-89", " 0 ,0"])
def test_a_repeat_hides_every_gpu(value) -> None:
    vd = visible_devices.parse(value)
    assert vd.hides_all and vd.duplicate is not None
    assert vd.indices(3, UUIDS) == []


def test_a_repeat_after_the_stop_does_not_count() -> None:
    vd = visible_devices.parse("0,-1,0")
    assert vd.duplicate is None and vd.indices(3) == [0]


@pytest.mark.parametrize(
    ("value", "want", "stopped"),
    [
        (None, [0, 1, 2], None),
        ("", [], None),
        ("2,0", [2, 0], None),
        ("2,0,5,1", [2, 0], "5"),  # an index beyond the GPUs stops the list, as CUDA does
        ("GPU-1234,0", [2, 0], None),  # a unique prefix
        ("GPU-8932,0", [], "GPU-8932"),  # two GPUs share the prefix: invalid from the start
        ("GPU-ffff", [], "GPU-ffff"),
        ("GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", [0], None),
    ],
)
def test_resolve(value, want, stopped) -> None:
    got = visible_devices.parse(value).resolve(3, UUIDS)
    assert got.indices == want and got.stopped_at == stopped


def test_resolve_same_gpu_by_index_and_uuid_hides_every_gpu() -> None:
    got = visible_devices.parse("0,GPU-8932f").resolve(3, UUIDS)
    assert got.indices == [] and got.duplicate == "GPU-8932f"


@pytest.mark.parametrize("value", ["MIG-GPU-8932f937/1/0", "MIG-4a1b2c3d", "GPU-1234"])
def test_what_cannot_be_mapped_to_whole_gpus(value) -> None:
    """MIG slices are not whole GPUs, and UUIDs need the GPUs' UUIDs: no mapping, every GPU is kept."""
    vd = visible_devices.parse(value)
    assert vd.resolve(3, [] if value == "GPU-1234" else UUIDS).indices is None
    assert vd.indices(3) == [0, 1, 2]


def _snap(n: int) -> GpuSnapshot:
    gpus = [
        Gpu(index=i, name="H100", pci_bus_id=f"0000:{i:02d}:00.0", uuid=UUIDS[i % 3],
            memory=Memory(total=(80 + i) * 2**30, used=0, free=(80 + i) * 2**30))
        for i in range(n)
    ]
    topo = [["X" if a == b else f"L{a}{b}" for b in range(n)] for a in range(n)]
    return GpuSnapshot(source="test", gpus=gpus, topology=topo)


def test_visible_gpus_renumbers_and_cuts_the_topology() -> None:
    got = gpus_to_plan(_snap(4), "3,1,9")
    assert got.indices == (3, 1)
    assert got.topology == [["X", "L31"], ["L13", "X"]]


def test_visible_gpus_maps_uuids() -> None:
    assert gpus_to_plan(_snap(3), "GPU-1234,GPU-8932f").indices == (2, 0)


@pytest.mark.parametrize("cvd", [None, "0,1,2", "MIG-GPU-8932f937/1/0"])
def test_visible_gpus_keeps_every_gpu(cvd) -> None:
    snap = _snap(3)
    got = gpus_to_plan(snap, cvd)
    assert got.indices == (0, 1, 2) and got.topology == snap.topology


@pytest.mark.parametrize("cvd", ["", " ", ",", "-1", "0,0"])
def test_visible_gpus_empty_means_no_gpu(cvd) -> None:
    got = gpus_to_plan(_snap(3), cvd)
    assert got.indices == () and got.count == 0 and got.memory_bytes is None


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({}, [0, 1, 2]),
        ({"CUDA_VISIBLE_DEVICES": ""}, []),
        ({"CUDA_VISIBLE_DEVICES": "2,x,0"}, [2]),
        ({"CUDA_VISIBLE_DEVICES": "2,0"}, [2, 0]),
        ({"CUDA_VISIBLE_DEVICES": "GPU-1"}, [0, 1, 2]),
    ],
)
def test_runner_visible_indices(env, want) -> None:
    assert visible_indices(env, 3) == want


def test_runner_visible_indices_with_uuids() -> None:
    assert visible_indices({"CUDA_VISIBLE_DEVICES": "GPU-1234"}, 3, UUIDS) == [2]


@pytest.mark.parametrize(
    ("cvd", "rule", "said"),
    [
        ("", "preflight.doctor.cuda-visible-empty", "CUDA sees no GPU."),
        ("-1", "preflight.doctor.cuda-visible-empty", "invalid entry '-1'"),
        ("0,0", "preflight.doctor.cuda-visible-empty", "listed twice"),
        ("0,GPU-8932f", "preflight.doctor.cuda-visible-empty", "listed twice"),  # GPU 0 by index and by UUID
        ("0,7,1", "preflight.doctor.cuda-visible-range", "after 7"),
        ("0,-1,1", "preflight.doctor.cuda-visible-range", "after -1"),
    ],
)
def test_doctor_reads_the_value_as_cuda_does(cvd, rule, said) -> None:
    from qwen_triage.preflight.machine.host_checks import software_findings
    from qwen_triage.preflight.machine.software import SoftwareInfo

    got = software_findings(SoftwareInfo(python="3.11", env={"CUDA_VISIBLE_DEVICES": cvd}), _snap(3))
    assert [f.rule for f in got] == [rule]
    assert said in got[0].summary
    if rule.endswith("range"):
        assert got[0].fix[0].action["value"] == "0,1"
