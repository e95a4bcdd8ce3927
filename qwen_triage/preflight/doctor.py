"""``doctor``: probe the GPUs, the system and the software, report findings plus an inventory.

Offline (``--nvidia-smi``/``--topo``/``--snapshot``) it judges the pasted
machine and skips the local system and software checks, which would describe
the wrong computer. When NVML cannot load, it says why, as a finding, and
goes on with everything else.

Its steps (:func:`check_model`, :func:`model_shape`, :func:`plan_model`,
:func:`visible_gpus`, :func:`merge_results`) are public because the runner's
launch checks run the same ones for one vLLM command; only what is about that
command (its settings, its port, the devices of a CPU build) stays in the runner.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from qwen_triage import visible_devices
from qwen_triage.preflight.model.check import CheckModelResult, ModelPathError, inspect_model
from qwen_triage.preflight.findings import CheckFinding, to_report
from qwen_triage.preflight.machine.gpu_checks import gpu_findings
from qwen_triage.preflight.machine.host_checks import nvml_finding, software_findings, system_findings
from qwen_triage.preflight.model.config import ModelConfig, ModelConfigError, load_model_config
from qwen_triage.preflight.machine.nvml import GpuProbe, GpuSnapshot, NvmlUnavailable, PynvmlProbe
from qwen_triage.preflight.output import PreflightOutput
from qwen_triage.preflight.plan.layouts import PlanResult, plan_layouts
from qwen_triage.preflight.machine.smi import merge_topology, parse_nvidia_smi_xml, parse_topo_matrix
from qwen_triage.preflight.machine.software import SoftwareInfo, probe_software
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
    """The GPUs a launched server will see through ``CUDA_VISIBLE_DEVICES`` ``cvd``, in CUDA's order.

    Read by :mod:`qwen_triage.visible_devices`: unset is every GPU, empty none; GPU UUIDs are matched
    against NVML's; MIG devices are not whole GPUs, so every GPU is kept for them.
    """
    keep = visible_devices.parse(cvd).resolve(len(snap.gpus), [g.uuid for g in snap.gpus]).indices
    if keep is None or keep == list(range(len(snap.gpus))):
        return snap
    gpus = [snap.gpus[i] for i in keep]
    topo = [[snap.topology[a][b] for b in keep] for a in keep] if snap.topology else None
    return snap.model_copy(update={"gpus": gpus, "topology": topo})


# --- the steps doctor runs, which the runner's launch checks run too ---------------------------------


def check_model(
    model: str | None, classes: dict[str, FailureClass] | None = None
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
    classes: dict[str, FailureClass] | None = None,
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


def plan_on_snapshot(
    model: str,
    snap: GpuSnapshot,
    *,
    requested: tuple[int, int, int] | None = None,
    classes: dict[str, FailureClass] | None = None,
    **settings: Any,
) -> tuple[PlanResult | None, list[str]]:
    """``plan`` for ``model`` on the GPUs of ``snap`` (already narrowed by :func:`visible_gpus`)."""
    cfg, notes = model_shape(model)
    if cfg is None:
        return None, notes
    sizes = [g.memory.total for g in snap.gpus if g.memory.total]
    return plan_model(
        cfg,
        len(snap.gpus),
        min(sizes) if sizes else None,
        topology=snap.topology,
        compute_capabilities=[g.compute_capability or "" for g in snap.gpus],
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
    findings: list[CheckFinding] = []
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
        if check_files:
            model_check, model_notes = check_model(model, classes)
            notes += model_notes
        if snap is not None and snap.gpus and any(g.memory.total for g in snap.gpus):
            visible = visible_gpus(snap, environ.get(visible_devices.ENV) if not offline else None)
            plan, plan_notes = plan_on_snapshot(
                model, visible, requested=requested, classes=classes,
                max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
            )
            notes += plan_notes
        else:
            notes.append("plan check skipped: no GPU inventory")

    diagnoses, observations = merge_results(to_report(findings, classes), model_check, plan)
    return DoctorResult(
        offline=offline,
        inventory=inv,
        diagnoses=diagnoses,
        observations=observations,
        notes=notes,
        model_check=model_check,
        plan=plan,
    )
