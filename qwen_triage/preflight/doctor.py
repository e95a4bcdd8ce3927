"""``doctor``: probe the GPUs, the system and the software, report findings plus an inventory.

Offline (``--nvidia-smi``/``--topo``/``--snapshot``) it judges the pasted
machine and skips the local system and software checks, which would describe
the wrong computer. When NVML cannot load, it says why, as a finding, and
goes on with everything else.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from qwen_triage.preflight.model.check import CheckModelResult, inspect_model
from qwen_triage.preflight.findings import Finding, to_report
from qwen_triage.preflight.machine.gpu_checks import gpu_findings
from qwen_triage.preflight.machine.host_checks import nvml_finding, software_findings, system_findings
from qwen_triage.preflight.model.config import ModelConfigError, load_model_config
from qwen_triage.preflight.machine.nvml import GpuProbe, GpuSnapshot, NvmlUnavailable, PynvmlProbe
from qwen_triage.preflight.output import PreflightOutput
from qwen_triage.preflight.plan.layouts import PlanResult, plan_layouts
from qwen_triage.preflight.machine.smi import merge_topology, parse_nvidia_smi_xml, parse_topo_matrix
from qwen_triage.preflight.machine.software import SoftwareInfo, cuda_visible_indices, probe_software
from qwen_triage.preflight.machine.system import SystemInfo, gpu_numa_node, probe_system
from qwen_triage.report.model import Diagnosis, Observation
from qwen_triage.rulepack.schema import FailureClass


class Inventory(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gpus: GpuSnapshot | None = None
    nvml_error: str | None = None
    system: SystemInfo | None = None
    software: SoftwareInfo | None = None


class DoctorResult(PreflightOutput):
    kind: str = "doctor"
    offline: bool = False
    inventory: Inventory
    diagnoses: list[Diagnosis] = Field(default_factory=list)
    observations: list[Observation] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    model_check: CheckModelResult | None = None
    plan: PlanResult | None = None


class DoctorInputError(ValueError):
    """A pasted file could not be read; the CLI exits 2."""


def visible_gpus(snap: GpuSnapshot, cvd: str | None) -> GpuSnapshot:
    """The GPUs a launched server will see, renumbered from 0 (numeric CUDA_VISIBLE_DEVICES only)."""
    indices = cuda_visible_indices(cvd)
    if not indices:
        return snap
    keep = [i for i in indices if i < len(snap.gpus)]
    gpus = [snap.gpus[i] for i in keep]
    topo = [[snap.topology[a][b] for b in keep] for a in keep] if snap.topology else None
    return snap.model_copy(update={"gpus": gpus, "topology": topo})


def _plan_for(
    model: str,
    snap: GpuSnapshot,
    util: float,
    max_model_len: int | None,
    requested: tuple[int, int, int] | None,
    classes,
) -> tuple[PlanResult | None, list[str]]:
    try:
        cfg = load_model_config(model)
    except ModelConfigError as exc:
        return None, [f"plan skipped: {exc}"]
    sizes = [g.memory.total for g in snap.gpus if g.memory.total]
    if not sizes:
        return None, ["plan skipped: GPU memory sizes unknown (pass --gpu-mem to `plan`)"]
    result = plan_layouts(
        cfg,
        len(snap.gpus),
        min(sizes),
        max_model_len=max_model_len,
        gpu_memory_utilization=util,
        topology=snap.topology,
        compute_capabilities=[g.compute_capability or "" for g in snap.gpus],
        requested=requested,
        model_ref=model,
        classes=classes,
    )
    return result, []


def probe(
    *,
    gpu_probe: GpuProbe | None = None,
    nvidia_smi: str | Path | None = None,
    topo: str | Path | None = None,
    model: str | None = None,
    gpu_memory_utilization: float = 0.9,
    max_model_len: int | None = None,
    requested: tuple[int, int, int] | None = None,
    root: Path = Path("/"),
    environ: Mapping[str, str] | None = None,
    statvfs: Callable[[str], Any] | None = None,
    software: Callable[[], SoftwareInfo] | None = None,
    check_files: bool = True,
    classes: dict[str, FailureClass] | None = None,
) -> DoctorResult:
    """Probe this machine (or, given ``nvidia_smi``/``topo``/a replaying ``gpu_probe``, another one).

    Returns the inventory and the findings as diagnoses. Raises
    :class:`DoctorInputError` when a pasted file cannot be read.
    """
    from qwen_triage.preflight.findings import load_classes
    from qwen_triage.preflight.machine.nvml import ReplayProbe

    classes = load_classes() if classes is None else classes
    environ = os.environ if environ is None else environ
    offline = nvidia_smi is not None or topo is not None or isinstance(gpu_probe, ReplayProbe)
    notes: list[str] = []
    findings: list[Finding] = []
    inv = Inventory()

    if not offline:
        inv.system = probe_system(root, environ=environ, **({"statvfs": statvfs} if statvfs else {}))
        inv.software = software() if software else probe_software(environ)
    else:
        notes.append("offline: judging the pasted GPU data; this machine's system and software checks are skipped")

    snap: GpuSnapshot | None = None
    try:
        if nvidia_smi is not None:
            snap = parse_nvidia_smi_xml(
                Path(nvidia_smi).read_text(encoding="utf-8"), source=f"nvidia-smi: {nvidia_smi}"
            )
        elif isinstance(gpu_probe, ReplayProbe):
            snap = gpu_probe.snapshot()
        if topo is not None:
            snap = merge_topology(snap, parse_topo_matrix(Path(topo).read_text(encoding="utf-8")), f"topo: {topo}")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DoctorInputError(str(exc)) from None

    if not offline:
        try:
            snap = (gpu_probe or PynvmlProbe()).snapshot()
        except NvmlUnavailable as err:
            inv.nvml_error = f"{err.kind}: {err}"
            notes.append(f"NVML could not be loaded ({err}); GPU checks skipped, everything else reported")
            findings.append(nvml_finding(err, inv.system))
    if snap is not None and inv.system is not None:
        # NUMA from sysfs where NVML did not say.
        gpus = [
            g if g.numa_node is not None else g.model_copy(update={"numa_node": gpu_numa_node(root, g.pci_bus_id)})
            for g in snap.gpus
        ]
        snap = snap.model_copy(update={"gpus": gpus})
    inv.gpus = snap

    if snap is not None:
        iommu = inv.system.iommu if inv.system else None
        findings += gpu_findings(snap, util=gpu_memory_utilization, iommu=iommu)
    if inv.system is not None:
        findings += system_findings(inv.system, len(snap.gpus) if snap else None)
    if inv.software is not None:
        findings += software_findings(inv.software, snap)
        if not inv.software.packages.get("torch") and not inv.software.packages.get("vllm"):
            notes.append(
                "neither torch nor vLLM is installed in this Python: the software checks cover this environment only"
            )

    model_check = None
    plan = None
    if model:
        if check_files and Path(model).expanduser().exists():
            model_check = inspect_model(model, classes=classes)
        if snap is not None and snap.gpus and any(g.memory.total for g in snap.gpus):
            visible = visible_gpus(snap, environ.get("CUDA_VISIBLE_DEVICES") if not offline else None)
            plan, plan_notes = _plan_for(model, visible, gpu_memory_utilization, max_model_len, requested, classes)
            notes += plan_notes
        else:
            notes.append("plan check skipped: no GPU inventory")

    diagnoses, observations = to_report(findings, classes)
    for sub in (model_check, plan):
        if sub is not None:
            diagnoses += sub.diagnoses
            observations += sub.observations
    diagnoses.sort(key=lambda d: d.severity.rank)
    return DoctorResult(
        offline=offline,
        inventory=inv,
        diagnoses=diagnoses,
        observations=observations,
        notes=notes,
        model_check=model_check,
        plan=plan,
    )
