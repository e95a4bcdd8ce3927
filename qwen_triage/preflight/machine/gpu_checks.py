"""Findings from a :class:`GpuSnapshot`: the cards, their memory, links and error counters.

The snapshot may be live NVML, a replayed recording or pasted nvidia-smi
output; the checks do not care which.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from qwen_triage.engine.check_finding import CheckFinding, finding
from qwen_triage.preflight.findings import act, ev, fix
from qwen_triage.preflight.machine.nvml import Gpu, GpuSnapshot
from qwen_triage.preflight.machine.topology import kind
from qwen_triage.report.model import FixOut
from qwen_triage.rulepack.actions import (
    BiosSetting,
    ExcludeGpu,
    Hardware,
    LowerGpuMemoryUtilization,
    ResetGpu,
    SetEnv,
    StopProcess,
)
from qwen_triage.units import GiB, human

BUSY_BYTES = 1 * GiB
BUSY_SHARE = 0.05
REPLAY_WARN = 100


def where(snap: GpuSnapshot) -> str:
    """Evidence path: ``nvml`` for a live probe, else the file the snapshot came from."""
    return snap.source.split(": ", 1)[-1] if ": " in snap.source else snap.source


def _gpu(g: Gpu) -> str:
    return f"GPU {g.index} ({g.pci_bus_id})"


def _on(g: Gpu, at: str, check_id: str, summary: str, seen: str, **kw: Any) -> CheckFinding:
    """A finding about one card: its summary and the one probe reading behind it, both led by the card's name."""
    return finding(check_id, f"{_gpu(g)}{summary}", evidence=[ev(at, f"{_gpu(g)}: {seen}")], **kw)


def _exclude(g: Gpu, step: str | None = None) -> FixOut:
    """The fix step that leaves card ``g`` out of the server's CUDA_VISIBLE_DEVICES."""
    return fix(step or f"leave GPU {g.index} out", act(ExcludeGpu, gpu=str(g.index)))


def _mixed(snap: GpuSnapshot, at: str) -> list[CheckFinding]:
    out: list[CheckFinding] = []
    names = Counter(g.name for g in snap.gpus)
    if len(names) > 1:
        majority, _ = names.most_common(1)[0]
        keep = ",".join(str(g.index) for g in snap.gpus if g.name == majority)
        ccs = {g.compute_capability for g in snap.gpus if g.compute_capability}
        mems = {g.memory.total for g in snap.gpus}
        text = ", ".join(f"{n} x{c}" for n, c in names.most_common())
        summary = f"Mixed GPU models: {text}."
        if len(ccs) > 1:
            summary += (
                f" Compute capabilities differ ({', '.join(sorted(ccs))}): vLLM picks one set of kernels and one "
                "attention backend for every rank, and tensor parallelism runs at the pace of the slowest card."
            )
        if len(mems) > 1:
            summary += f" Memory differs too: the smallest card ({human(min(mems))}) sets each rank's KV cache."
        out.append(
            finding(
                "preflight.doctor.mixed-gpus",
                summary,
                variant=None if len(ccs) > 1 or len(mems) > 1 else "alike",
                facts={"models": dict(names), "compute_capabilities": sorted(ccs)},
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
                finding(
                    "preflight.doctor.vbios-mixed",
                    f"{name}: VBIOS {', '.join(f'{v} x{c}' for v, c in vbios.most_common())} "
                    "(different batches or board vendors; clocks and power limits may differ).",
                    evidence=[ev(at, f"{_gpu(g)}: VBIOS {g.vbios}") for g in same],
                )
            )
    return out


def _busy_fix(g: Gpu, procs: list, max_util: float) -> list[FixOut]:
    """Free the card (stop its biggest holders), leave it out, or ask for less of it."""
    steps = [
        fix(
            f"stop pid {p.pid} ({p.name or '?'}) on GPU {g.index}",
            act(StopProcess, what=f"pid {p.pid} ({p.name or '?'}) on GPU {g.index}"),
        )
        for p in procs[:3]
    ]
    steps.append(_exclude(g))
    if max_util >= 0.3:
        steps.append(
            fix(f"or lower --gpu-memory-utilization to {max_util:g}", act(LowerGpuMemoryUtilization, to=max_util))
        )
    return steps


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
                    finding(
                        "preflight.doctor.gpu-processes",
                        f"{_gpu(g)}: {listed} ({human(g.memory.used)} in use).",
                        evidence=[ev(at, f"{_gpu(g)}: pid {p.pid} {p.name} {human(p.used_bytes)}") for p in procs],
                    )
                )
            continue
        holders = (
            ", ".join(f"pid {p.pid} ({p.name or '?'}, {human(p.used_bytes)})" for p in procs[:3])
            or "no process NVML can name"
        )
        max_util = math.floor((g.memory.free / total - 0.02) * 100) / 100
        out.append(
            finding(
                "preflight.doctor.gpu-busy",
                f"{_gpu(g)} has {human(g.memory.used)} in use by {holders}: {human(g.memory.free)} free, "
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
                fix=_busy_fix(g, procs, max_util),
            )
        )
    return out


def _compute(snap: GpuSnapshot, at: str) -> list[CheckFinding]:
    out = []
    for g in snap.gpus:
        cc = g.compute_capability
        if cc and float(cc) < 7.0:
            out.append(_on(g, at, "preflight.doctor.cc-old",
                           f" {g.name} has compute capability {cc}; vLLM needs 7.0 or newer "
                           "(llama.cpp/Ollama still run on it).",
                           f"compute capability {cc}", fix=[_exclude(g)]))
        if g.compute_mode == "Prohibited":
            out.append(_on(g, at, "preflight.doctor.compute-prohibited",
                           " is in compute mode Prohibited: no CUDA context can be created on it.",
                           "compute mode Prohibited",
                           fix=[fix(f"`nvidia-smi -i {g.index} -c DEFAULT` (as root)"),
                                _exclude(g, f"or leave GPU {g.index} out")]))
        elif g.compute_mode and g.compute_mode.startswith("Exclusive"):
            out.append(_on(g, at, "preflight.doctor.compute-exclusive",
                           f" is in {g.compute_mode} mode: a second process on it will fail to get a context.",
                           f"compute mode {g.compute_mode}"))
        if g.mig_enabled:
            out.append(_on(g, at, "preflight.doctor.mig",
                           " has MIG enabled: processes see MIG slices, and tensor parallelism cannot span them.",
                           "MIG mode enabled"))
    return out


def _pcie_width(g: Gpu, at: str) -> CheckFinding:
    p = g.pcie
    return _on(
        g, at, "preflight.doctor.pcie-width",
        f" runs at PCIe x{p.width_current} of x{p.width_max}: a slot wired for fewer "
        "lanes (or a riser/bifurcation setting) cuts its host bandwidth to "
        f"{p.width_current}/{p.width_max}; tensor-parallel all-reduces and weight loading through it slow down.",
        f"PCIe link width x{p.width_current} (max x{p.width_max}), gen {p.gen_current} (max {p.gen_max})",
        facts={"gpu": g.index, "width": p.width_current, "width_max": p.width_max},
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


def _pcie(snap: GpuSnapshot, at: str) -> list[CheckFinding]:
    out = []
    slow_gen: list[Gpu] = []
    for g in snap.gpus:
        p = g.pcie
        if p.width_current and p.width_max and p.width_current < p.width_max:
            out.append(_pcie_width(g, at))
        elif p.width_current and p.width_current <= 4:
            out.append(_on(g, at, "preflight.doctor.pcie-narrow",
                           f" is on a PCIe x{p.width_current} link (NVML reports no wider maximum).",
                           f"PCIe x{p.width_current}"))
        if p.gen_current and p.gen_max and p.gen_current < p.gen_max:
            slow_gen.append(g)
        if p.replay_counter:
            out.append(_on(g, at, "preflight.doctor.pcie-replays",
                           f" has {p.replay_counter} PCIe replays since boot: the link is retrying transfers "
                           "(signal integrity: riser, slot, cable).",
                           f"PCIe replay counter {p.replay_counter}",
                           variant=None if p.replay_counter >= REPLAY_WARN else "few",
                           fix=[fix(f"reseat GPU {g.index}, replace its riser",
                                    act(Hardware, what=f"GPU {g.index}: reseat, riser"))]))
    if slow_gen:
        # Idle cards drop to gen 1 to save power, so this is only worth knowing.
        out.append(
            finding(
                "preflight.doctor.pcie-gen",
                f"{len(slow_gen)} GPU(s) link below their top PCIe generation "
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
        service = act(Hardware, what=f"NVLink on GPU {g.index}")
        if active and down:
            out.append(
                finding(
                    "preflight.doctor.nvlink-down",
                    f"{_gpu(g)}: {len(down)} of {len(g.nvlinks)} NVLink links are inactive.",
                    evidence=[ev(at, f"{_gpu(g)}: NVLink {link.link} inactive") for link in down],
                    fix=[fix("reseat the NVLink bridge / service the baseboard", service)],
                )
            )
        errors = [link for link in g.nvlinks if (link.crc_errors or 0) + (link.replay_errors or 0) > 0]
        if errors:
            out.append(
                finding(
                    "preflight.doctor.nvlink-errors",
                    f"{_gpu(g)}: NVLink CRC/replay errors on link(s) {', '.join(str(link.link) for link in errors)}.",
                    evidence=[
                        ev(at, f"{_gpu(g)}: NVLink {link.link} CRC {link.crc_errors}, replay {link.replay_errors}")
                        for link in errors
                    ],
                    fix=[fix("service the NVLink bridge", service)],
                )
            )
    return out


def _ecc(g: Gpu, at: str) -> CheckFinding | None:
    if g.ecc.volatile_uncorrected:
        return _on(g, at, "preflight.doctor.ecc-uncorrected",
                   f" has {g.ecc.volatile_uncorrected} uncorrectable ECC error(s) since the last "
                   "driver load: results on it cannot be trusted until it is reset.",
                   f"volatile uncorrectable ECC {g.ecc.volatile_uncorrected}",
                   fix=[fix(f"drain and reset GPU {g.index}", act(ResetGpu, gpu=str(g.index))),
                        _exclude(g, "meanwhile leave it out")])
    if g.ecc.aggregate_uncorrected:
        return _on(g, at, "preflight.doctor.ecc-history",
                   f" has {g.ecc.aggregate_uncorrected} uncorrectable ECC error(s) over its lifetime.",
                   f"aggregate uncorrectable ECC {g.ecc.aggregate_uncorrected}")
    return None


def _remap(g: Gpu, at: str) -> CheckFinding | None:
    r = g.remapped_rows
    if r is None:
        return None
    if r.failure:
        return _on(g, at, "preflight.doctor.remap-failure",
                   ": row remapping failed (no spare rows left): the card needs service/RMA.",
                   "remapped rows failure = yes", fix=[_exclude(g, f"leave GPU {g.index} out and open an RMA")])
    if r.pending:
        return _on(g, at, "preflight.doctor.remap-pending",
                   ": a row remap is pending; it takes effect at the next GPU reset.",
                   f"remapped rows pending = yes ({r.uncorrectable} uncorrectable)",
                   fix=[fix(f"reset GPU {g.index} when idle", act(ResetGpu, gpu=str(g.index)))])
    if r.uncorrectable:
        return _on(g, at, "preflight.doctor.remap-history",
                   f": {r.uncorrectable} row(s) remapped after uncorrectable errors (handled).",
                   f"remapped rows uncorrectable {r.uncorrectable}")
    return None


def _memory_health(snap: GpuSnapshot, at: str) -> list[CheckFinding]:
    return [f for g in snap.gpus for f in (_ecc(g, at), _remap(g, at)) if f is not None]


def _p2p(snap: GpuSnapshot, at: str, iommu: str | None) -> list[CheckFinding]:
    """Peer-to-peer between the cards, as NVML reports it against the links they have."""
    topo, p2p = snap.topology or [], snap.p2p or []
    out: list[CheckFinding] = []
    n = len(topo)
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    broken_nv = [(a, b) for a, b in pairs if kind(topo[a][b]) == "NV" and p2p[a][b] != "OK"]
    if broken_nv:
        out.append(finding("preflight.doctor.p2p-nvlink",
                           f"{len(broken_nv)} NVLink pair(s) report P2P status other than OK.",
                           evidence=[ev(at, f"GPU{a}-GPU{b}: {topo[a][b]}, P2P {p2p[a][b]}")
                                     for a, b in broken_nv[:5]]))
    pcie_ok = [(a, b) for a, b in pairs if kind(topo[a][b]) != "NV" and p2p[a][b] == "OK"]
    if pcie_ok and iommu == "on":
        out.append(finding("preflight.doctor.iommu-p2p",
                           "GPUs do peer-to-peer over PCIe while the IOMMU is on (not passthrough): with ACS "
                           "redirecting P2P through the root complex, NCCL can hang or corrupt data. Run NCCL's "
                           "tests or start with NCCL_P2P_DISABLE=1 to compare.",
                           evidence=[ev(at, f"GPU{a}-GPU{b}: {topo[a][b]}, P2P OK") for a, b in pcie_ok[:3]]))
    no_p2p = [(a, b) for a, b in pairs if p2p[a][b] not in ("OK", "X")]
    if no_p2p and len(no_p2p) == len(pairs):
        out.append(finding("preflight.doctor.p2p-none",
                           f"no GPU pair supports P2P ({p2p[no_p2p[0][0]][no_p2p[0][1]]}): NCCL copies through host "
                           "memory and vLLM turns its custom all-reduce off; expected on GeForce cards.",
                           evidence=[ev(at, f"GPU{a}-GPU{b}: P2P {p2p[a][b]}") for a, b in no_p2p[:3]]))
    return out


def _topology(snap: GpuSnapshot, at: str, iommu: str | None) -> list[CheckFinding]:
    out: list[CheckFinding] = []
    topo = snap.topology
    if not topo:
        return out
    n = len(topo)
    sys_pairs = [(a, b) for a in range(n) for b in range(a + 1, n) if kind(topo[a][b]) == "SYS"]
    if sys_pairs:
        out.append(
            finding(
                "preflight.doctor.topo-sockets",
                f"{len(sys_pairs)} GPU pair(s) connect only through the inter-socket link (SYS): keep each "
                "tensor-parallel group on one socket and let pipeline stages cross (`qwen-triage plan` places them).",
                evidence=[ev(at, f"GPU{a}-GPU{b}: SYS") for a, b in sys_pairs[:5]],
            )
        )
    if snap.p2p:
        out += _p2p(snap, at, iommu)
    return out


def gpu_findings(snap: GpuSnapshot, *, util: float = 0.9, iommu: str | None = None) -> list[CheckFinding]:
    at = where(snap)
    if not snap.gpus:
        return [finding("preflight.doctor.no-gpus", "NVML loaded but lists no GPU.", evidence=[ev(at, "0 GPUs")])]
    return (
        _mixed(snap, at)
        + _busy(snap, at, util)
        + _compute(snap, at)
        + _pcie(snap, at)
        + _nvlink(snap, at)
        + _memory_health(snap, at)
        + _topology(snap, at, iommu)
    )
