"""Parsing what users paste: `nvidia-smi -q -x` and `nvidia-smi topo -m`."""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_triage.preflight.machine.smi import (
    SmiParseError,
    compute_capability_for,
    merge_topology,
    parse_nvidia_smi_xml,
    parse_topo_matrix,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "preflight"
MiB = 2**20


def test_nvidia_smi_xml():
    snap = parse_nvidia_smi_xml((FIXTURES / "nvidia-smi-q-6gpu.xml").read_text())
    assert snap.driver_version == "550.127.05" and snap.cuda_driver_version == "12.4"
    assert len(snap.gpus) == 6
    g = snap.gpus[2]
    assert g.name == "NVIDIA GeForce RTX 4090" and g.pci_bus_id == "00000000:1D:00.0"
    assert g.compute_capability == "8.9"  # from the architecture: this XML does not print it
    assert g.memory.total == 24564 * MiB and g.memory.used == 21618 * MiB and g.memory.reserved == 346 * MiB
    assert [(p.pid, p.name, p.used_bytes) for p in g.processes] == [(3012447, "/opt/venv/bin/python3", 21600 * MiB)]
    assert (snap.gpus[4].pcie.width_current, snap.gpus[4].pcie.width_max) == (8, 16)
    assert snap.gpus[0].pcie.gen_current == 1 and snap.gpus[0].pcie.gen_max == 4
    assert g.ecc.enabled is None and g.remapped_rows is None and g.persistence_mode is True


def test_topo_matrix_with_nics_and_escapes():
    topo = parse_topo_matrix((FIXTURES / "topo-6gpu.txt").read_text())
    assert topo.gpus == [f"GPU{i}" for i in range(6)]
    assert topo.matrix[0] == ["X", "PHB", "PHB", "SYS", "SYS", "SYS"]
    assert topo.matrix[5][3] == "PHB"
    assert topo.numa == [0, 0, 0, 1, 1, 1]
    assert topo.cpu_affinity[3] == "24-47,72-95"


def test_topo_with_spaces_instead_of_tabs():
    text = """        GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      NV12    NV12    NV12    0-31    0               N/A
GPU1    NV12     X      NV12    NV12    0-31    0               N/A
GPU2    NV12    NV12     X      NV12    32-63   1               N/A
GPU3    NV12    NV12    NV12     X      32-63   1               N/A
"""
    topo = parse_topo_matrix(text)
    assert topo.matrix[1] == ["NV12", "X", "NV12", "NV12"] and topo.numa == [0, 0, 1, 1]


def test_merge_topology_alone():
    topo = parse_topo_matrix((FIXTURES / "topo-6gpu.txt").read_text())
    snap = merge_topology(None, topo, "topo: x")
    assert len(snap.gpus) == 6 and snap.topology == topo.matrix and snap.gpus[4].numa_node == 1


@pytest.mark.parametrize(
    "text",
    ["", "<html/>", "<nvidia_smi_log></nvidia_smi_log>", "<nvidia_smi_log><gpu"],
)
def test_bad_xml(text):
    with pytest.raises(SmiParseError):
        parse_nvidia_smi_xml(text)


def test_bad_topo():
    with pytest.raises(SmiParseError):
        parse_topo_matrix("Fri Nov 14 nvidia-smi: command not found\n")
    with pytest.raises(SmiParseError):
        parse_topo_matrix("\tGPU0\tGPU1\nGPU0\t X \tPHB\n")


@pytest.mark.parametrize(
    "name, arch, cc",
    [
        ("NVIDIA H100 80GB HBM3", "Hopper", "9.0"),
        ("NVIDIA A100-SXM4-80GB", "Ampere", "8.0"),
        ("NVIDIA GeForce RTX 3090", "Ampere", "8.6"),
        ("NVIDIA GeForce RTX 4090", None, "8.9"),
        ("Tesla T4", None, "7.5"),
        ("Tesla V100-SXM2-32GB", None, "7.0"),
        ("NVIDIA L40S", "Ada Lovelace", "8.9"),
        ("Some Future GPU", "Blackwell", "10.0"),
    ],
)
def test_compute_capability_from_name(name, arch, cc):
    assert compute_capability_for(name, arch) == cc
