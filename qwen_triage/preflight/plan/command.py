"""``qwen-triage plan``: which tensor x pipeline x data parallel layouts work for a model on N GPUs.

The GPUs come from ``--gpus``/``--gpu-mem``, a pasted machine (``--snapshot``, ``--nvidia-smi``,
``--topo``) or NVML, in that order of say, and are chosen by the one policy
(:func:`~qwen_triage.preflight.plan.gpus.gpus_to_plan`) doctor and the runner use too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from qwen_triage.exits import Failure
from qwen_triage.preflight.plan.models import PlanResult

if TYPE_CHECKING:
    from qwen_triage.preflight.plan.gpus import PlanGpus


@dataclass(frozen=True)
class PlanOptions:
    """``qwen-triage plan``'s options, as the command line gives them."""

    model: str
    gpus: int | None = None
    gpu_mem: str | None = None
    """memory per GPU as written (``24GiB``); None: the smallest GPU found"""
    dtype: str = "auto"
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    enforce_eager: bool = False
    requested: tuple[int, int, int] | None = None
    topo: str | None = None
    snapshot: str | None = None
    nvidia_smi: str | None = None


def run(options: PlanOptions, environ: Mapping[str, str] = os.environ) -> PlanResult:
    """Plan ``options.model``; bad input, or no way to know the GPUs, raises :class:`~qwen_triage.exits.Failure`."""
    from qwen_triage.preflight.model.config import ModelConfigError, load_model_config
    from qwen_triage.preflight.plan.layouts import plan_layouts
    from qwen_triage.units import SizeError, parse_size

    o = options
    try:
        cfg = load_model_config(o.model)
        mem_bytes = parse_size(o.gpu_mem) if o.gpu_mem is not None else None
    except (ModelConfigError, SizeError) as exc:
        raise Failure(str(exc)) from None
    gpus, detected = o.gpus, None
    topology: list[list[str]] | None = None
    ccs: list[str] | None = None
    seen = _gpus_seen(o, environ, need_probe=gpus is None or mem_bytes is None)
    if seen is not None and seen.visible:
        if mem_bytes is None:
            mem_bytes = seen.memory_bytes
            if mem_bytes is None:
                raise Failure("the GPU data has no memory sizes; pass --gpu-mem")
        topology, ccs, gpus = seen.topology, seen.compute_capabilities, seen.count
        # fewer visible than planned for is worth a finding
        detected = seen.visible if seen.visible < seen.count else None
    if gpus is None or mem_bytes is None:
        raise Failure("pass --gpus and --gpu-mem (no GPU data to read them from)")
    return plan_layouts(
        cfg, gpus, mem_bytes,
        dtype=o.dtype, quantization=o.quantization, kv_cache_dtype=o.kv_cache_dtype, max_model_len=o.max_model_len,
        gpu_memory_utilization=o.gpu_memory_utilization, enforce_eager=o.enforce_eager, topology=topology,
        compute_capabilities=ccs, requested=o.requested, model_ref=o.model, detected_gpus=detected,
    )


def _gpus_seen(o: PlanOptions, environ: Mapping[str, str], need_probe: bool) -> PlanGpus | None:
    """The GPUs to plan for: the pasted machine's, else (when ``--gpus``/``--gpu-mem`` leave a gap) NVML's as the
    server would see them through ``CUDA_VISIBLE_DEVICES``; None when neither is asked for."""
    from qwen_triage import visible_devices
    from qwen_triage.preflight.machine.nvml import NvmlUnavailable, PynvmlProbe, ReplayProbe
    from qwen_triage.preflight.machine.smi import PastedDataError, pasted_snapshot
    from qwen_triage.preflight.plan.gpus import gpus_to_plan

    try:
        snap = pasted_snapshot(ReplayProbe(o.snapshot) if o.snapshot else None, o.nvidia_smi, o.topo)
    except PastedDataError as exc:
        raise Failure(str(exc)) from None
    if snap is not None:
        return gpus_to_plan(snap, None, o.gpus)  # another machine: this shell's CUDA_VISIBLE_DEVICES is not its
    if not need_probe:
        return None
    try:
        snap = PynvmlProbe().snapshot()
    except NvmlUnavailable as exc:
        raise Failure(f"cannot read the GPUs (NVML: {exc}); pass --gpus and --gpu-mem") from None
    return gpus_to_plan(snap, environ.get(visible_devices.ENV), o.gpus)
