"""Preflight for a relaunch: ``check-model``, ``doctor`` and ``plan`` applied to one vLLM command.

Before any minutes go into loading weights: the model directory is checked,
the GPUs (and /dev/shm, free GPU memory) are probed through ``doctor``, the
requested layout is judged by ``plan`` against the GPUs the server will see,
and the port is tried. Everything comes back as :class:`Diagnosis` objects
with fix steps, exactly like a triaged log, so one plan builder handles both.

The steps are doctor's own (:mod:`qwen_triage.preflight.doctor`: ``probe``,
``check_model``, ``model_shape``, ``plan_model``, ``merge_results``); this module
only adds what is about one launch command: its settings turned into ``plan``'s,
the devices of a CPU build, its port, a profile's expected GPU count.

How many devices to plan for:

* NVML works: the GPUs the server will see, by the one policy ``plan`` and ``doctor``
  use too (:func:`qwen_triage.preflight.plan.gpus.gpus_to_plan`: ``CUDA_VISIBLE_DEVICES``
  in the server's environment as CUDA reads it, empty: none; the smallest card's memory);
* no NVML (vLLM's CPU build, or a broken driver): ``--gpus N``, else the
  profile's ``expected_gpus``, else the command's own TP x PP x DP; memory per
  device is ``gpu_memory_gib`` or, for the CPU build, host RAM shared evenly
  (the CPU build's workers are processes on the one host). TP across CPU
  workers is allowed; ``plan`` then only judges the shape (heads, KV heads,
  layers), which is what vLLM refuses on.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from pydantic import BaseModel, ConfigDict, Field

from qwen_triage import visible_devices
from qwen_triage.engine.check_finding import CheckFinding, finding
from qwen_triage.preflight.doctor import check_model, merge_results, model_shape, plan_model, probe
from qwen_triage.preflight.findings import act, ev, fix, load_classes, to_report
from qwen_triage.preflight.machine.nvml import GpuProbe, GpuSnapshot
from qwen_triage.preflight.model.config import ModelConfig
from qwen_triage.preflight.plan.checks import bf16_finding, no_bf16_cc
from qwen_triage.preflight.plan.gpus import gpus_to_plan
from qwen_triage.preflight.plan.models import PlanResult
from qwen_triage.report.model import Diagnosis, Observation
from qwen_triage.rulepack.actions import CheckPort, ChooseLayout, FreePort
from qwen_triage.runner import probes
from qwen_triage.runner.layout import is_cpu_build, requested
from qwen_triage.runner.vllm.argv import VllmLaunch
from qwen_triage.units import GiB

if TYPE_CHECKING:
    from qwen_triage.runner.fixplan import PlanContext

# doctor findings about qwen-triage's own Python (its torch build), not the server's.
_NOT_THE_SERVERS = {"preflight.doctor.driver-cuda"}


class Machine(BaseModel):
    """The devices a launch runs on, as far as the runner can tell."""

    model_config = ConfigDict(extra="forbid")

    gpus: int = Field(description="devices to plan for")
    gpu_mem_bytes: int
    memory_known: bool = Field(default=True, description="False: gpu_mem_bytes is a stand-in (no NVML, no --gpu-mem)")
    source: str = Field(description="where the count came from, in words")
    cpu_build: bool = False
    nvml: bool = False
    visible: list[int] = Field(default_factory=list, description="NVML indices the server sees, in its order")
    snapshot: GpuSnapshot | None = Field(default=None, description="every GPU NVML reports (None without NVML)")
    compute_capabilities: list[str] = Field(default_factory=list, description="of the visible GPUs, in their order")
    topology: list[list[str]] | None = Field(default=None, description="nvidia-smi topo -m labels, visible GPUs")
    host_memory_bytes: int | None = None

    @property
    def all_gpus(self) -> int:
        return len(self.snapshot.gpus) if self.snapshot else 0

    @property
    def pci_bus_ids(self) -> list[str]:
        """Of every GPU, by NVML index."""
        return [g.pci_bus_id for g in self.snapshot.gpus] if self.snapshot else []

    def seen_through(self, cvd: str | None) -> Machine:
        """The same machine as a server with ``CUDA_VISIBLE_DEVICES`` ``cvd`` sees it (after a GPU is left out):
        :func:`~qwen_triage.preflight.plan.gpus.gpus_to_plan`'s policy; NVML's GPUs only."""
        if self.snapshot is None:
            return self
        seen = gpus_to_plan(self.snapshot, cvd)
        return self.model_copy(update={
            "gpus": seen.count, "visible": list(seen.indices), "topology": seen.topology,
            "gpu_mem_bytes": seen.memory_bytes or self.gpu_mem_bytes,
            "compute_capabilities": seen.compute_capabilities,
        })


class PreflightResult(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    machine: Machine
    diagnoses: list[Diagnosis] = Field(default_factory=list)
    observations: list[Observation] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    plan: PlanResult | None = None
    shape: ModelConfig | None = Field(default=None, description="the model's shape, when it could be read")
    snapshot: GpuSnapshot | None = None


class DeviceHints(TypedDict, total=False):
    """What the runner is told about the devices besides what NVML says: its ``--gpus`` and ``--gpu-mem``,
    the profile's expected GPU count, and the probe to ask (a recording in tests)."""

    gpus: int | None
    expected_gpus: int | None
    gpu_memory_gib: float | None
    gpu_probe: GpuProbe | None


def _hints(given: dict[str, Any]) -> tuple[int | None, int | None, float | None, GpuProbe | None]:
    """The hints in a fixed order; a name DeviceHints does not know is a TypeError, as a keyword would be."""
    unknown = set(given) - set(DeviceHints.__annotations__)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    return given.get("gpus"), given.get("expected_gpus"), given.get("gpu_memory_gib"), given.get("gpu_probe")


def probe_machine(
    launch: VllmLaunch, env: Mapping[str, str], *, classes: dict[str, Any] | None = None,
    **hints: Unpack[DeviceHints],
) -> tuple[Machine, list[Diagnosis], list[Observation], list[str], GpuSnapshot | None]:
    """Run ``doctor`` for the server's environment; the machine, doctor's diagnoses, notes."""
    gpus, expected_gpus, gpu_memory_gib, gpu_probe = _hints(dict(hints))
    cpu = is_cpu_build(env)
    util = launch.gpu_memory_utilization or 0.9
    result = probe(gpu_probe=gpu_probe, gpu_memory_utilization=util, environ=env, classes=classes)
    notes = [n for n in result.notes if not n.startswith("neither torch nor vLLM")]
    diagnoses = [d for d in result.diagnoses if d.rule not in _NOT_THE_SERVERS]
    observations = list(result.observations)
    snap = result.inventory.gpus
    host_mem = result.inventory.system.host_memory_bytes if result.inventory.system else None
    if cpu:
        # NVML is not expected on the CPU build: its absence is no finding.
        nvml_rules = {"preflight.doctor.nvml-unavailable", "preflight.doctor.nvml-missing", "preflight.doctor.no-gpus"}
        diagnoses = [d for d in diagnoses if d.rule not in nvml_rules]
        notes = [n for n in notes if not n.startswith("NVML could not be loaded")]

    if snap is not None and snap.gpus and not cpu:
        # seen_through sizes the devices by the smallest visible card; the fallback is for cards NVML gave no size.
        machine = Machine(
            gpus=len(snap.gpus),
            gpu_mem_bytes=int((gpu_memory_gib or 80) * GiB),
            source="NVML",
            nvml=True,
            snapshot=snap,
            host_memory_bytes=host_mem,
        ).seen_through(env.get(visible_devices.ENV))
        machine.source = f"NVML: {machine.gpus} of {len(snap.gpus)} GPUs visible to the server"
        if gpus is not None and gpus != machine.gpus:
            notes.append(f"--gpus {gpus} ignored: NVML shows {machine.gpus} GPUs for this server")
        return machine, diagnoses, observations, notes, snap

    tp, pp, dp = requested(launch)
    if gpus is not None:
        count, where = gpus, f"--gpus {gpus}"
    elif expected_gpus is not None:
        count, where = expected_gpus, f"the profile's expected_gpus {expected_gpus}"
    else:
        count, where = tp * pp * dp, f"the command's TP x PP x DP = {tp * pp * dp}"
    kind = "CPU build: devices are worker processes" if cpu else "no NVML"
    if gpu_memory_gib is not None:
        mem = int(gpu_memory_gib * GiB)
    elif host_mem:
        mem = host_mem // count
    else:
        mem = 16 * GiB
    if not cpu and gpu_memory_gib is None:
        notes.append("GPU memory unknown without NVML: memory fit is not judged (pass --gpu-mem)")
        mem = max(mem, 1024 * GiB)
    machine = Machine(
        gpus=count,
        gpu_mem_bytes=mem,
        memory_known=cpu or gpu_memory_gib is not None,
        source=f"{where} ({kind})",
        cpu_build=cpu,
        visible=list(range(count)),
        host_memory_bytes=host_mem,
    )
    return machine, diagnoses, observations, notes, snap


def model_config_for(launch: VllmLaunch) -> tuple[ModelConfig | None, str | None]:
    """The model's shape (doctor's :func:`model_shape`); the note says why when it cannot be read."""
    cfg, notes = model_shape(launch.model or "")
    return cfg, (notes[0] if notes else None)


_QUANT_PRESETS = {"awq", "gptq", "gptq-int8", "fp8", "bitsandbytes"}
_DTYPES = ("auto", "float16", "half", "bfloat16", "float32", "float")


def plan_settings(launch: VllmLaunch) -> dict[str, Any]:
    """This command's options as ``plan``'s settings (what it would pass to ``plan_layouts``)."""
    quant = launch.get("--quantization")
    return {
        "dtype": launch.dtype if launch.dtype in _DTYPES else "auto",
        "quantization": quant if quant in _QUANT_PRESETS else None,
        "kv_cache_dtype": launch.get("--kv-cache-dtype") or "auto",
        "max_model_len": launch.max_model_len if launch.max_model_len and launch.max_model_len > 0 else None,
        "gpu_memory_utilization": launch.gpu_memory_utilization or 0.9,
        "enforce_eager": bool(launch.enforce_eager),
    }


def plan_for(
    cfg: ModelConfig,
    machine: Machine,
    launch: VllmLaunch,
    want: tuple[int, int, int] | None = None,
    classes: dict[str, Any] | None = None,
) -> PlanResult | None:
    """doctor's ``plan`` for this command's settings on ``machine``; ``want`` turns its layout's problems into
    diagnoses. None when the machine has no device to plan on (``CUDA_VISIBLE_DEVICES`` hides every GPU)."""
    plan, _ = plan_model(
        cfg,
        machine.gpus,
        machine.gpu_mem_bytes,
        topology=machine.topology,
        compute_capabilities=machine.compute_capabilities or None,
        requested=want,
        model_ref=launch.model,
        classes=classes,
        **plan_settings(launch),
        **({} if machine.memory_known else {"memory_known": False}),
    )
    return plan


def plan_context(machine: Machine | None, shape: ModelConfig | None, base_env: Mapping[str, str]) -> "PlanContext":
    """What the fix-plan builder may consult; its re-planner plans on the GPUs the launch's env leaves visible."""
    from qwen_triage.runner.fixplan import PlanContext
    from qwen_triage.runner.layout import choose_layout

    def replan(launch: VllmLaunch, env: dict[str, str]):
        assert machine is not None and shape is not None
        m = machine.seen_through({**base_env, **env}.get(visible_devices.ENV))
        plan = plan_for(shape, m, launch)
        return choose_layout(plan, requested(launch)) if plan is not None else None

    return PlanContext(
        base_env=dict(base_env),
        replan=replan if shape is not None and machine is not None else None,
        pci_to_index={pci: i for i, pci in enumerate(machine.pci_bus_ids)} if machine else {},
        gpu_count=machine.all_gpus if machine and machine.nvml else None,
        model_max_len=shape.max_position_embeddings if shape else None,
    )


def port_finding(launch: VllmLaunch, holders: list[probes.PortHolder]) -> CheckFinding:
    port = launch.effective_port
    who = "; ".join(h.describe() for h in holders) or "a process this user cannot see"
    return finding(
        "runner.preflight.port-in-use",
        f"port {port} is held by {who}; vLLM would exit at once with 'Address already in use'. "
        "The runner does not move the server to another port: its clients would not find it.",
        facts={"port": port, "holders": [h.model_dump() for h in holders]},
        evidence=[ev(f"port {port}", f"bind({probes.bind_host(launch.host) or '0.0.0.0'}, {port}): address in use")],
        fix=[
            fix(f"see who holds port {port}", act(CheckPort, port=str(port))),
            fix(f"stop {who}, or choose another --port for the server and its clients", act(FreePort, port=str(port))),
        ],
    )


def _unused_gpus_finding(launch: VllmLaunch, expected: int) -> CheckFinding:
    tp, pp, dp = requested(launch)
    used = tp * pp * dp
    return finding(
        "runner.preflight.gpus-unused",
        f"TP {tp} x PP {pp} x DP {dp} = {used} GPU(s), but the profile expects {expected}: "
        "the others would sit idle (the 'only one card is working' launch).",
        facts={"used": used, "expected": expected},
        evidence=[ev("command line", f"--tensor-parallel-size {tp} --pipeline-parallel-size {pp}")],
        fix=[fix(f"choose a layout for {expected} GPUs", act(ChooseLayout))],
    )


def missing_local_model(launch: VllmLaunch) -> str | None:
    """The one-line reason when the model is written as a local path (``./``, ``../``, ``/``, ``~/``)
    that does not exist: a typo there is not a hub name, and launching would only fail later."""
    model = launch.model
    if not model or not model.startswith(("./", "../", "/", "~/")) and model not in (".", ".."):
        return None
    path = Path(model).expanduser()
    if path.exists():
        return None
    return f"the model {model} is a local path and it does not exist (from {Path.cwd()})"


def run_preflight(
    launch: VllmLaunch, env: Mapping[str, str], *, check_port: bool = True, **hints: Unpack[DeviceHints]
) -> PreflightResult:
    """Every check that can run before the launch; ``env`` is the server's full environment."""
    classes = load_classes()
    expected_gpus = _hints(dict(hints))[1]
    machine, diagnoses, observations, notes, snap = probe_machine(launch, env, classes=classes, **hints)
    notes.insert(0, f"planning for {machine.gpus} device(s): {machine.source}")
    findings: list[CheckFinding] = []

    check, check_notes = check_model(launch.model, classes)
    notes += check_notes

    cfg, why = model_config_for(launch)
    plan = None
    if cfg is not None:
        plan = plan_for(cfg, machine, launch, requested(launch), classes)
        if plan is None:
            notes.append("plan skipped: no GPU is visible to the server (CUDA_VISIBLE_DEVICES hides them all)")
        else:
            notes += [f"plan: {n}" for n in plan.notes]
            old = no_bf16_cc(machine.compute_capabilities)
            if old and not launch.dtype and plan.dtype == "float16" and cfg.dtype == "bfloat16":
                findings.append(bf16_finding(old, from_checkpoint=True, rule="runner.preflight.bf16-gpu"))
    elif why:
        notes.append(why)

    if expected_gpus is not None and machine.gpus >= expected_gpus:
        tp, pp, dp = requested(launch)
        if tp * pp * dp < expected_gpus:
            findings.append(_unused_gpus_finding(launch, expected_gpus))
    if expected_gpus is not None and machine.nvml and machine.gpus < expected_gpus:
        notes.append(f"the profile expects {expected_gpus} GPUs but only {machine.gpus} are visible: "
                     "planning for those (check `nvidia-smi` and the kernel log for a lost card)")

    if check_port:
        try:
            taken = probes.port_in_use(launch.host, launch.effective_port)
        except OSError as exc:
            taken = False
            notes.append(f"port check failed: {exc}")
        if taken:
            findings.append(port_finding(launch, probes.port_holders(launch.effective_port)))

    diagnoses, observations = merge_results((diagnoses, observations), check, plan, to_report(findings, classes))
    return PreflightResult(machine=machine, diagnoses=diagnoses, observations=observations, notes=notes, plan=plan,
                           shape=cfg, snapshot=snap)
