"""Findings from a :class:`GpuSnapshot`: the cards, their memory, links and error counters.

The snapshot may be live NVML, a replayed recording or pasted nvidia-smi
output; the checks do not care which.
"""

from __future__ import annotations

import math
from collections import Counter

from qwen_triage.rulepack.actions import (
    BiosSetting,
    ExcludeGpu,
    Hardware,
    LowerGpuMemoryUtilization,
    ResetGpu,
    SetArg,
    SetEnv,
    StopProcess,
)
from qwen_triage.preflight.findings import CheckFinding, act, ev, fix
from qwen_triage.preflight.machine.nvml import Gpu, GpuSnapshot
from qwen_triage.preflight.machine.topology import kind
from qwen_triage.units import GiB, human
from qwen_triage.rulepack.schema import Severity

BUSY_BYTES = 1 * GiB
BUSY_SHARE = 0.05
REPLAY_WARN = 100


def where(snap: GpuSnapshot) -> str:
    """Evidence path: ``nvml`` for a live probe, else the file the snapshot came from."""
    return snap.source.split(": ", 1)[-1] if ": " in snap.source else snap.source


def _gpu(g: Gpu) -> str:
    return f"GPU {g.index} ({g.pci_bus_id})"


def _mixed(snap: GpuSnapshot, at: str) -> list[CheckFinding]:
    out: list[CheckFinding] = []
    names = Counter(g.name for g in snap.gpus)
    if len(names) > 1:
        majority, _ = names.most_common(1)[0]
        keep = ",".join(str(g.index) for g in snap.gpus if g.name == majority)
        ccs = {g.compute_capability for g in snap.gpus if g.compute_capability}
        mems = {g.memory.total for g in snap.gpus}
        text = ", ".join(f"{n} x{c}" for n, c in names.most_common())
        facts = {"models": dict(names), "compute_capabilities": sorted(ccs)}
        summary = f"Mixed GPU models: {text}."
        if len(ccs) > 1:
            summary += (
                f" Compute capabilities differ ({', '.join(sorted(ccs))}): vLLM picks one set of kernels and one "
                "attention backend for every rank, and tensor parallelism runs at the pace of the slowest card."
            )
        if len(mems) > 1:
            summary += f" Memory differs too: the smallest card ({human(min(mems))}) sets each rank's KV cache."
        out.append(
            CheckFinding(
                class_id="runtime.backend_mismatch",
                rule="preflight.doctor.mixed-gpus",
                title="mixed GPU models in one box",
                severity=Severity.warning if len(ccs) > 1 or len(mems) > 1 else Severity.info,
                summary=summary,
                facts=facts,
                evidence=[
                    ev(at, f"{_gpu(g)}: {g.name}, cc {g.compute_capability}, {human(g.memory.total)}")
                    for g in snap.gpus
                ],
                fix=[
                    fix("number GPUs as nvidia-smi does", act(SetEnv, name="CUDA_DEVICE_ORDER", value="PCI_BUS_ID")),
                    fix(
                        f"run tensor parallel over the {majority} cards only",
                        act(SetEnv, name="CUDA_VISIBLE_DEVICES", value=keep),
                    ),
                ],
            )
        )
    for name in names:
        same = [g for g in snap.gpus if g.name == name and g.vbios]
        vbios = Counter(g.vbios for g in same)
        if len(vbios) > 1:
            out.append(
                CheckFinding(
                    class_id="runtime.backend_mismatch",
                    rule="preflight.doctor.vbios-mixed",
                    title="same model, different VBIOS",
                    severity=Severity.info,
                    summary=f"{name}: VBIOS {', '.join(f'{v} x{c}' for v, c in vbios.most_common())} "
                    "(different batches or board vendors; clocks and power limits may differ).",
                    evidence=[ev(at, f"{_gpu(g)}: VBIOS {g.vbios}") for g in same],
                )
            )
    return out


def _busy(snap: GpuSnapshot, at: str, util: float) -> list[CheckFinding]:
    out = []
    for g in snap.gpus:
        total = g.memory.total
        if not total:
            continue
        need = util * total
        heavy = g.memory.used >= max(BUSY_BYTES, BUSY_SHARE * total)
        short = g.memory.free < need
        procs = sorted(g.processes, key=lambda p: -(p.used_bytes or 0))
        if not heavy and not short:
            if procs:
                listed = ", ".join(f"pid {p.pid} {p.name or '?'}" for p in procs)
                out.append(
                    CheckFinding(
                        class_id="memory.gpu_util_too_high",
                        rule="preflight.doctor.gpu-processes",
                        title="processes on a GPU",
                        severity=Severity.info,
                        summary=f"{_gpu(g)}: {listed} ({human(g.memory.used)} in use).",
                        evidence=[ev(at, f"{_gpu(g)}: pid {p.pid} {p.name} {human(p.used_bytes)}") for p in procs],
                    )
                )
            continue
        holders = (
            ", ".join(f"pid {p.pid} ({p.name or '?'}, {human(p.used_bytes)})" for p in procs[:3])
            or "no process NVML can name"
        )
        max_util = math.floor((g.memory.free / total - 0.02) * 100) / 100
        steps = [
            fix(
                f"stop pid {p.pid} ({p.name or '?'}) on GPU {g.index}",
                act(StopProcess, what=f"pid {p.pid} ({p.name or '?'}) on GPU {g.index}"),
            )
            for p in procs[:3]
        ]
        steps.append(fix(f"leave GPU {g.index} out", act(ExcludeGpu, gpu=str(g.index))))
        if max_util >= 0.3:
            steps.append(
                fix(f"or lower --gpu-memory-utilization to {max_util:g}", act(LowerGpuMemoryUtilization, to=max_util))
            )
        out.append(
            CheckFinding(
                class_id="memory.gpu_util_too_high",
                rule="preflight.doctor.gpu-busy",
                title="a GPU is already in use",
                severity=Severity.warning,
                summary=f"{_gpu(g)} has {human(g.memory.used)} in use by {holders}: {human(g.memory.free)} free, "
                f"less than the {human(need)} that --gpu-memory-utilization {util:g} asks for.",
                facts={
                    "gpu": g.index,
                    "used_bytes": g.memory.used,
                    "free_bytes": g.memory.free,
                    "pids": [p.pid for p in procs],
                },
                evidence=[
                    ev(at, f"{_gpu(g)}: {human(g.memory.used)} used, {human(g.memory.free)} free of {human(total)}")
                ]
                + [ev(at, f"{_gpu(g)}: pid {p.pid} {p.name or '?'} holds {human(p.used_bytes)}") for p in procs[:4]],
                fix=steps,
            )
        )
    return out


def _compute(snap: GpuSnapshot, at: str) -> list[CheckFinding]:
    out = []
    for g in snap.gpus:
        cc = g.compute_capability
        if cc and float(cc) < 7.0:
            out.append(
                CheckFinding(
                    class_id="runtime.backend_mismatch",
                    rule="preflight.doctor.cc-old",
                    title="GPU too old for vLLM",
                    severity=Severity.error,
                    summary=f"{_gpu(g)} {g.name} has compute capability {cc}; vLLM needs 7.0 or newer "
                    "(llama.cpp/Ollama still run on it).",
                    evidence=[ev(at, f"{_gpu(g)}: compute capability {cc}")],
                    fix=[fix(f"leave GPU {g.index} out", act(ExcludeGpu, gpu=str(g.index)))],
                )
            )
        if g.compute_mode == "Prohibited":
            out.append(
                CheckFinding(
                    class_id="runtime.no_gpu_visible",
                    rule="preflight.doctor.compute-prohibited",
                    title="GPU in Prohibited compute mode",
                    severity=Severity.error,
                    summary=f"{_gpu(g)} is in compute mode Prohibited: no CUDA context can be created on it.",
                    evidence=[ev(at, f"{_gpu(g)}: compute mode Prohibited")],
                    fix=[
                        fix(f"`nvidia-smi -i {g.index} -c DEFAULT` (as root)"),
                        fix(f"or leave GPU {g.index} out", act(ExcludeGpu, gpu=str(g.index))),
                    ],
                )
            )
        elif g.compute_mode and g.compute_mode.startswith("Exclusive"):
            out.append(
                CheckFinding(
                    class_id="runtime.no_gpu_visible",
                    rule="preflight.doctor.compute-exclusive",
                    title="GPU in exclusive compute mode",
                    severity=Severity.info,
                    summary=f"{_gpu(g)} is in {g.compute_mode} mode: a second process on it will fail to get "
                    "a context.",
                    evidence=[ev(at, f"{_gpu(g)}: compute mode {g.compute_mode}")],
                )
            )
        if g.mig_enabled:
            out.append(
                CheckFinding(
                    class_id="runtime.no_gpu_visible",
                    rule="preflight.doctor.mig",
                    title="MIG enabled",
                    severity=Severity.info,
                    summary=f"{_gpu(g)} has MIG enabled: processes see MIG slices, and tensor parallelism "
                    "cannot span them.",
                    evidence=[ev(at, f"{_gpu(g)}: MIG mode enabled")],
                )
            )
    return out


def _pcie(snap: GpuSnapshot, at: str) -> list[CheckFinding]:
    out = []
    slow_gen: list[Gpu] = []
    for g in snap.gpus:
        p = g.pcie
        if p.width_current and p.width_max and p.width_current < p.width_max:
            out.append(
                CheckFinding(
                    class_id="hardware.pcie_error",
                    rule="preflight.doctor.pcie-width",
                    title="GPU link narrower than it can be",
                    severity=Severity.warning,
                    summary=f"{_gpu(g)} runs at PCIe x{p.width_current} of x{p.width_max}: a slot wired for fewer "
                    "lanes (or a riser/bifurcation setting) cuts its host bandwidth to "
                    f"{p.width_current}/{p.width_max}; tensor-parallel all-reduces and weight loading through it "
                    "slow down.",
                    facts={"gpu": g.index, "width": p.width_current, "width_max": p.width_max},
                    evidence=[
                        ev(
                            at,
                            f"{_gpu(g)}: PCIe link width x{p.width_current} (max x{p.width_max}), gen "
                            f"{p.gen_current} (max {p.gen_max})",
                        )
                    ],
                    fix=[
                        fix(
                            f"move GPU {g.index} to an x16 slot, reseat it, check the riser",
                            act(Hardware, what=f"GPU {g.index} at {g.pci_bus_id}: x16 slot, reseat, riser"),
                        ),
                        fix(
                            "check the slot's bifurcation / link width setting in the BIOS",
                            act(BiosSetting, setting="PCIe slot width / bifurcation"),
                        ),
                    ],
                )
            )
        elif p.width_current and p.width_current <= 4:
            out.append(
                CheckFinding(
                    class_id="hardware.pcie_error",
                    rule="preflight.doctor.pcie-narrow",
                    title="GPU on a narrow link",
                    severity=Severity.info,
                    summary=f"{_gpu(g)} is on a PCIe x{p.width_current} link (NVML reports no wider maximum).",
                    evidence=[ev(at, f"{_gpu(g)}: PCIe x{p.width_current}")],
                )
            )
        if p.gen_current and p.gen_max and p.gen_current < p.gen_max:
            slow_gen.append(g)
        if p.replay_counter:
            out.append(
                CheckFinding(
                    class_id="hardware.pcie_error",
                    rule="preflight.doctor.pcie-replays",
                    title="PCIe replays on a GPU link",
                    severity=Severity.warning if p.replay_counter >= REPLAY_WARN else Severity.info,
                    summary=f"{_gpu(g)} has {p.replay_counter} PCIe replays since boot: the link is retrying transfers "
                    "(signal integrity: riser, slot, cable).",
                    evidence=[ev(at, f"{_gpu(g)}: PCIe replay counter {p.replay_counter}")],
                    fix=[
                        fix(
                            f"reseat GPU {g.index}, replace its riser",
                            act(Hardware, what=f"GPU {g.index}: reseat, riser"),
                        )
                    ],
                )
            )
    if slow_gen:
        # Idle cards drop to gen 1 to save power, so this is only worth knowing.
        out.append(
            CheckFinding(
                class_id="hardware.pcie_error",
                rule="preflight.doctor.pcie-gen",
                title="PCIe links below their top generation",
                severity=Severity.info,
                summary=f"{len(slow_gen)} GPU(s) link below their top PCIe generation "
                f"({', '.join(f'GPU {g.index} gen {g.pcie.gen_current}/{g.pcie.gen_max}' for g in slow_gen)}): "
                "normal while idle (power saving); check again under load.",
                evidence=[ev(at, f"{_gpu(g)}: PCIe gen {g.pcie.gen_current} (max {g.pcie.gen_max})") for g in slow_gen],
            )
        )
    return out


def _nvlink(snap: GpuSnapshot, at: str) -> list[CheckFinding]:
    out = []
    for g in snap.gpus:
        active = [link for link in g.nvlinks if link.active]
        down = [link for link in g.nvlinks if not link.active]
        if active and down:
            out.append(
                CheckFinding(
                    class_id="hardware.nvlink_error",
                    rule="preflight.doctor.nvlink-down",
                    title="NVLink links down",
                    severity=Severity.warning,
                    summary=f"{_gpu(g)}: {len(down)} of {len(g.nvlinks)} NVLink links are inactive.",
                    evidence=[ev(at, f"{_gpu(g)}: NVLink {link.link} inactive") for link in down],
                    fix=[
                        fix(
                            "reseat the NVLink bridge / service the baseboard",
                            act(Hardware, what=f"NVLink on GPU {g.index}"),
                        )
                    ],
                )
            )
        errors = [link for link in g.nvlinks if (link.crc_errors or 0) + (link.replay_errors or 0) > 0]
        if errors:
            out.append(
                CheckFinding(
                    class_id="hardware.nvlink_error",
                    rule="preflight.doctor.nvlink-errors",
                    title="NVLink error counters",
                    severity=Severity.warning,
                    summary=f"{_gpu(g)}: NVLink CRC/replay errors on link(s) "
                    f"{', '.join(str(link.link) for link in errors)}.",
                    evidence=[
                        ev(at, f"{_gpu(g)}: NVLink {link.link} CRC {link.crc_errors}, replay {link.replay_errors}")
                        for link in errors
                    ],
                    fix=[fix("service the NVLink bridge", act(Hardware, what=f"NVLink on GPU {g.index}"))],
                )
            )
    return out


def _memory_health(snap: GpuSnapshot, at: str) -> list[CheckFinding]:
    out = []
    for g in snap.gpus:
        if g.ecc.volatile_uncorrected:
            out.append(
                CheckFinding(
                    class_id="hardware.xid_fatal",
                    rule="preflight.doctor.ecc-uncorrected",
                    title="uncorrectable ECC errors since the last reset",
                    severity=Severity.error,
                    summary=f"{_gpu(g)} has {g.ecc.volatile_uncorrected} uncorrectable ECC error(s) since the last "
                    "driver load: results on it cannot be trusted until it is reset.",
                    evidence=[ev(at, f"{_gpu(g)}: volatile uncorrectable ECC {g.ecc.volatile_uncorrected}")],
                    fix=[
                        fix(f"drain and reset GPU {g.index}", act(ResetGpu, gpu=str(g.index))),
                        fix("meanwhile leave it out", act(ExcludeGpu, gpu=str(g.index))),
                    ],
                )
            )
        elif g.ecc.aggregate_uncorrected:
            out.append(
                CheckFinding(
                    class_id="hardware.xid_fatal",
                    rule="preflight.doctor.ecc-history",
                    title="uncorrectable ECC errors in the GPU's history",
                    severity=Severity.info,
                    summary=f"{_gpu(g)} has {g.ecc.aggregate_uncorrected} uncorrectable ECC error(s) over its "
                    "lifetime.",
                    evidence=[ev(at, f"{_gpu(g)}: aggregate uncorrectable ECC {g.ecc.aggregate_uncorrected}")],
                )
            )
        r = g.remapped_rows
        if r is None:
            continue
        if r.failure:
            out.append(
                CheckFinding(
                    class_id="hardware.xid_fatal",
                    rule="preflight.doctor.remap-failure",
                    title="row remapping failed",
                    severity=Severity.critical,
                    summary=f"{_gpu(g)}: row remapping failed (no spare rows left): the card needs service/RMA.",
                    evidence=[ev(at, f"{_gpu(g)}: remapped rows failure = yes")],
                    fix=[fix(f"leave GPU {g.index} out and open an RMA", act(ExcludeGpu, gpu=str(g.index)))],
                )
            )
        elif r.pending:
            out.append(
                CheckFinding(
                    class_id="hardware.xid_fatal",
                    rule="preflight.doctor.remap-pending",
                    title="row remapping pending",
                    severity=Severity.error,
                    summary=f"{_gpu(g)}: a row remap is pending; it takes effect at the next GPU reset.",
                    evidence=[ev(at, f"{_gpu(g)}: remapped rows pending = yes ({r.uncorrectable} uncorrectable)")],
                    fix=[fix(f"reset GPU {g.index} when idle", act(ResetGpu, gpu=str(g.index)))],
                )
            )
        elif r.uncorrectable:
            out.append(
                CheckFinding(
                    class_id="hardware.xid_fatal",
                    rule="preflight.doctor.remap-history",
                    title="rows remapped after uncorrectable errors",
                    severity=Severity.info,
                    summary=f"{_gpu(g)}: {r.uncorrectable} row(s) remapped after uncorrectable errors (handled).",
                    evidence=[ev(at, f"{_gpu(g)}: remapped rows uncorrectable {r.uncorrectable}")],
                )
            )
    return out


def _topology(snap: GpuSnapshot, at: str, iommu: str | None) -> list[CheckFinding]:
    out: list[CheckFinding] = []
    topo = snap.topology
    if not topo:
        return out
    n = len(topo)
    sys_pairs = [(a, b) for a in range(n) for b in range(a + 1, n) if kind(topo[a][b]) == "SYS"]
    nvlink_pairs = [(a, b) for a in range(n) for b in range(a + 1, n) if kind(topo[a][b]) == "NV"]
    if sys_pairs:
        out.append(
            CheckFinding(
                class_id="nccl.p2p_unsupported",
                rule="preflight.doctor.topo-sockets",
                title="GPUs on different CPU sockets",
                severity=Severity.info,
                summary=f"{len(sys_pairs)} GPU pair(s) connect only through the inter-socket link (SYS): keep each "
                "tensor-parallel group on one socket and let pipeline stages cross (`qwen-triage plan` places them).",
                evidence=[ev(at, f"GPU{a}-GPU{b}: SYS") for a, b in sys_pairs[:5]],
            )
        )
    p2p = snap.p2p
    if p2p:
        broken_nv = [(a, b) for a, b in nvlink_pairs if p2p[a][b] != "OK"]
        if broken_nv:
            out.append(
                CheckFinding(
                    class_id="nccl.p2p_unsupported",
                    rule="preflight.doctor.p2p-nvlink",
                    title="P2P unavailable between NVLink-connected GPUs",
                    severity=Severity.warning,
                    summary=f"{len(broken_nv)} NVLink pair(s) report P2P status other than OK.",
                    evidence=[ev(at, f"GPU{a}-GPU{b}: {topo[a][b]}, P2P {p2p[a][b]}") for a, b in broken_nv[:5]],
                    fix=[fix("work around until fixed", act(SetEnv, name="NCCL_P2P_DISABLE", value="1"))],
                )
            )
        pcie_ok = [(a, b) for a in range(n) for b in range(a + 1, n) if kind(topo[a][b]) != "NV" and p2p[a][b] == "OK"]
        if pcie_ok and iommu == "on":
            out.append(
                CheckFinding(
                    class_id="nccl.p2p_unsupported",
                    rule="preflight.doctor.iommu-p2p",
                    title="PCIe P2P with the IOMMU on",
                    severity=Severity.warning,
                    summary="GPUs do peer-to-peer over PCIe while the IOMMU is on (not passthrough): with ACS "
                    "redirecting P2P through the root complex, NCCL can hang or corrupt data. Run NCCL's "
                    "tests or start "
                    "with NCCL_P2P_DISABLE=1 to compare.",
                    evidence=[ev(at, f"GPU{a}-GPU{b}: {topo[a][b]}, P2P OK") for a, b in pcie_ok[:3]],
                    fix=[
                        fix("test with P2P off", act(SetEnv, name="NCCL_P2P_DISABLE", value="1")),
                        fix("and vLLM's custom all-reduce off", act(SetArg, arg="--disable-custom-all-reduce")),
                        fix(
                            "set iommu=pt or disable ACS on the PCIe switches",
                            act(BiosSetting, setting="IOMMU passthrough / ACS off"),
                        ),
                    ],
                )
            )
        no_p2p = [(a, b) for a in range(n) for b in range(a + 1, n) if p2p[a][b] not in ("OK", "X")]
        if no_p2p and len(no_p2p) == n * (n - 1) // 2:
            out.append(
                CheckFinding(
                    class_id="nccl.p2p_unsupported",
                    rule="preflight.doctor.p2p-none",
                    title="no GPU peer-to-peer",
                    severity=Severity.info,
                    summary=f"no GPU pair supports P2P ({p2p[no_p2p[0][0]][no_p2p[0][1]]}): NCCL copies through host "
                    "memory and vLLM turns its custom all-reduce off; expected on GeForce cards.",
                    evidence=[ev(at, f"GPU{a}-GPU{b}: P2P {p2p[a][b]}") for a, b in no_p2p[:3]],
                )
            )
    return out


def gpu_findings(snap: GpuSnapshot, *, util: float = 0.9, iommu: str | None = None) -> list[CheckFinding]:
    at = where(snap)
    if not snap.gpus:
        return [
            CheckFinding(
                class_id="runtime.no_gpu_visible",
                rule="preflight.doctor.no-gpus",
                title="NVML lists no GPUs",
                severity=Severity.error,
                summary="NVML loaded but lists no GPU.",
                evidence=[ev(at, "0 GPUs")],
                fix=[fix("pass --gpus all to the container; check CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES")],
            )
        ]
    return (
        _mixed(snap, at)
        + _busy(snap, at, util)
        + _compute(snap, at)
        + _pcie(snap, at)
        + _nvlink(snap, at)
        + _memory_health(snap, at)
        + _topology(snap, at, iommu)
    )
