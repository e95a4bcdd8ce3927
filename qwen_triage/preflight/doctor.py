"""``doctor``: probe the GPUs, the system and the software, report findings plus an inventory.

Offline (``--nvidia-smi``/``--topo``/``--snapshot``) it judges the pasted
machine and skips the local system and software checks, which would describe
the wrong computer. When NVML cannot load, it says why, as a finding, and
goes on with everything else.

Its steps (:func:`check_model`, :func:`model_shape`, :func:`plan_model`,
:func:`merge_results`; the GPUs to plan for are
:func:`~qwen_triage.preflight.plan.gpus.gpus_to_plan`'s) are public because the runner's
launch checks run the same ones for one vLLM command; only what is about that
command (its settings, its port, the devices of a CPU build) stays in the runner.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from qwen_triage import visible_devices
from qwen_triage.engine.check_finding import CheckFinding
from qwen_triage.exits import Failure
from qwen_triage.preflight.findings import to_report
from qwen_triage.preflight.machine.gpu_checks import gpu_findings
from qwen_triage.preflight.machine.host_checks import nvml_finding, software_findings, system_findings
from qwen_triage.preflight.machine.nvml import GpuProbe, GpuSnapshot, NvmlUnavailable, PynvmlProbe
from qwen_triage.preflight.machine.smi import PastedDataError, pasted_snapshot
from qwen_triage.preflight.machine.software import SoftwareInfo, probe_software
from qwen_triage.preflight.machine.system import SystemInfo, gpu_numa_node, probe_system
from qwen_triage.preflight.model.check import CheckModelResult, ModelPathError, inspect_model
from qwen_triage.preflight.model.config import ModelConfig, ModelConfigError, load_model_config
from qwen_triage.preflight.output import PreflightOutput
from qwen_triage.preflight.plan.gpus import PlanGpus, gpus_to_plan
from qwen_triage.preflight.plan.layouts import plan_layouts
from qwen_triage.preflight.plan.models import PlanResult
from qwen_triage.report.model import Diagnosis, Observation
from qwen_triage.rulepack.spec import ClassSpec


class Inventory(BaseModel):
    """What doctor read of the machine; a part it could not read is None (NVML's reason in ``nvml_error``)."""

    model_config = ConfigDict(extra="forbid")

    gpus: GpuSnapshot | None = None
    nvml_error: str | None = Field(default=None, description="why NVML could not be read: '<kind>: <message>'")
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


# --- the steps doctor runs, which the runner's launch checks run too ---------------------------------


def check_model(
    model: str | None, classes: dict[str, ClassSpec] | None = None
) -> tuple[CheckModelResult | None, list[str]]:
    """``check-model`` on ``model`` when it is a path on this machine; otherwise a note says why not."""
    if not model:
        return None, []
    if not Path(model).expanduser().exists():
        return None, [f"check-model skipped: {model} is not a local directory (a hub name?)"]
    try:
        return inspect_model(model, classes=classes), []
    except ModelPathError as exc:
        return None, [f"check-model skipped: {exc}"]


def model_shape(model: str) -> tuple[ModelConfig | None, list[str]]:
    """The model's config (heads, layers, dtype...) for ``plan``; a note when it cannot be read."""
    try:
        return load_model_config(model), []
    except ModelConfigError as exc:
        return None, [f"plan skipped: {exc}"]


def plan_model(
    cfg: ModelConfig,
    gpus: int,
    gpu_mem_bytes: int | None,
    *,
    topology: list[list[str]] | None = None,
    compute_capabilities: list[str] | None = None,
    requested: tuple[int, int, int] | None = None,
    model_ref: str | None = None,
    classes: dict[str, ClassSpec] | None = None,
    **settings: Any,
) -> tuple[PlanResult | None, list[str]]:
    """``plan`` for ``gpus`` devices of ``gpu_mem_bytes``; ``settings`` are :func:`plan_layouts`'s launch settings
    (dtype, quantization, max_model_len, ...). None and a note when there is nothing to plan on."""
    if gpus < 1:
        return None, ["plan skipped: no GPU is visible (CUDA_VISIBLE_DEVICES hides them all)"]
    if not gpu_mem_bytes:
        return None, ["plan skipped: GPU memory sizes unknown (pass --gpu-mem to `plan`)"]
    result = plan_layouts(
        cfg,
        gpus,
        gpu_mem_bytes,
        topology=topology,
        compute_capabilities=compute_capabilities,
        requested=requested,
        model_ref=model_ref,
        classes=classes,
        **settings,
    )
    return result, []


def plan_on_gpus(
    model: str,
    gpus: PlanGpus,
    *,
    requested: tuple[int, int, int] | None = None,
    classes: dict[str, ClassSpec] | None = None,
    **settings: Any,
) -> tuple[PlanResult | None, list[str]]:
    """``plan`` for ``model`` on ``gpus`` (:func:`~qwen_triage.preflight.plan.gpus.gpus_to_plan`'s choice)."""
    cfg, notes = model_shape(model)
    if cfg is None:
        return None, notes
    return plan_model(
        cfg,
        gpus.count,
        gpus.memory_bytes,
        topology=gpus.topology,
        compute_capabilities=gpus.compute_capabilities,
        requested=requested,
        model_ref=model,
        classes=classes,
        **settings,
    )


Reported = tuple[list[Diagnosis], list[Observation]]


def merge_results(*parts: Reported | CheckModelResult | PlanResult | None) -> Reported:
    """The diagnoses and observations of every part (``to_report``'s pairs, or sub-results), the most severe
    first; parts keep their order among equals."""
    diagnoses: list[Diagnosis] = []
    observations: list[Observation] = []
    for part in parts:
        if part is None:
            continue
        d, o = part if isinstance(part, tuple) else (part.diagnoses, part.observations)
        diagnoses += d
        observations += o
    diagnoses.sort(key=lambda d: d.severity.rank)
    return diagnoses, observations


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
    classes: dict[str, ClassSpec] | None = None,
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
    findings: list[CheckFinding] = []
    inv = Inventory()
    if not offline:
        inv.system = probe_system(root, environ=environ, **({"statvfs": statvfs} if statvfs else {}))
        inv.software = software() if software else probe_software(environ)
    else:
        notes.append("offline: judging the pasted GPU data; this machine's system and software checks are skipped")
    try:
        snap = pasted_snapshot(gpu_probe if isinstance(gpu_probe, ReplayProbe) else None, nvidia_smi, topo)
    except PastedDataError as exc:
        raise DoctorInputError(str(exc)) from None
    if not offline:
        snap = _local_gpus(gpu_probe, inv, notes, findings)
    inv.gpus = snap = _with_numa(snap, inv.system, root)
    findings += _machine_findings(inv, gpu_memory_utilization, notes)

    model_check = plan = None
    if model:
        if check_files:
            model_check, model_notes = check_model(model, classes)
            notes += model_notes
        if snap is not None and snap.gpus and any(g.memory.total for g in snap.gpus):
            # a pasted machine is not seen through this shell's CUDA_VISIBLE_DEVICES
            gpus = gpus_to_plan(snap, None if offline else environ.get(visible_devices.ENV))
            plan, plan_notes = plan_on_gpus(
                model, gpus, requested=requested, classes=classes,
                max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
            )
            notes += plan_notes
        else:
            notes.append("plan check skipped: no GPU inventory")

    diagnoses, observations = merge_results(to_report(findings, classes), model_check, plan)
    return DoctorResult(offline=offline, inventory=inv, diagnoses=diagnoses, observations=observations,
                        notes=notes, model_check=model_check, plan=plan)


def _local_gpus(gpu_probe: GpuProbe | None, inv: Inventory, notes: list[str],
                findings: list[CheckFinding]) -> GpuSnapshot | None:
    """This machine's GPUs from NVML; when NVML cannot load, why, as a finding and a note."""
    try:
        return (gpu_probe or PynvmlProbe()).snapshot()
    except NvmlUnavailable as err:
        inv.nvml_error = f"{err.kind}: {err}"
        notes.append(f"NVML could not be loaded ({err}); GPU checks skipped, everything else reported")
        findings.append(nvml_finding(err, inv.system))
        return None


def _with_numa(snap: GpuSnapshot | None, system: SystemInfo | None, root: Path) -> GpuSnapshot | None:
    """Each GPU's NUMA node from sysfs where NVML did not say (this machine only)."""
    if snap is None or system is None:
        return snap
    gpus = [
        g if g.numa_node is not None else g.model_copy(update={"numa_node": gpu_numa_node(root, g.pci_bus_id)})
        for g in snap.gpus
    ]
    return snap.model_copy(update={"gpus": gpus})


def _machine_findings(inv: Inventory, util: float, notes: list[str]) -> list[CheckFinding]:
    """The GPU, system and software checks on the inventory."""
    snap = inv.gpus
    findings: list[CheckFinding] = []
    if snap is not None:
        findings += gpu_findings(snap, util=util, iommu=inv.system.iommu if inv.system else None)
    if inv.system is not None:
        findings += system_findings(inv.system, len(snap.gpus) if snap else None)
    if inv.software is not None:
        findings += software_findings(inv.software, snap)
        if not inv.software.packages.get("torch") and not inv.software.packages.get("vllm"):
            notes.append(
                "neither torch nor vLLM is installed in this Python: the software checks cover this environment only"
            )
    return findings


# --- the command ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DoctorOptions:
    """``qwen-triage doctor``'s options, as the command line gives them."""

    nvidia_smi: str | None = None
    topo: str | None = None
    snapshot: str | None = None
    """replay this recording instead of asking NVML"""
    record: str | None = None
    """write this machine's GPU snapshot here"""
    model: str | None = None
    requested: tuple[int, int, int] | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9


def run(options: DoctorOptions) -> DoctorResult:
    """``qwen-triage doctor``: :func:`probe` this machine (or the pasted one), and record its GPUs when asked.
    Bad usage or an unreadable file raises :class:`~qwen_triage.exits.Failure`."""
    from qwen_triage.preflight.machine.nvml import ReplayProbe, record

    o = options
    if o.record and (o.nvidia_smi or o.topo or o.snapshot):
        raise Failure("--record writes this machine's GPUs; it cannot be combined with --nvidia-smi/--topo/--snapshot")
    try:
        result = probe(gpu_probe=ReplayProbe(o.snapshot) if o.snapshot else None, nvidia_smi=o.nvidia_smi,
                       topo=o.topo, model=o.model, requested=o.requested, max_model_len=o.max_model_len,
                       gpu_memory_utilization=o.gpu_memory_utilization)
    except DoctorInputError as exc:
        raise Failure(str(exc)) from None
    if o.record:
        if result.inventory.gpus is None:
            raise Failure(f"nothing to record: {result.inventory.nvml_error or 'no GPU data'}")
        record(result.inventory.gpus, o.record)
        result.notes.append(f"GPU snapshot written to {o.record}")
    return result
