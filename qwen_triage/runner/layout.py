"""Pick the parallel layout for a relaunch from ``plan``'s verdicts, closest to what the user asked.

``qwen-triage plan`` recommends the layout with the best throughput, which is
often several replicas (``--data-parallel-size``). The runner repairs a
command; it does not redesign a deployment. So among the layouts ``plan``
calls valid it keeps the user's replica count and uses as many of the requested
GPUs as it can, then follows ``plan``'s own order (TP before PP, TP groups on
fast links, the larger KV cache). Only when no layout keeps the replica count
does it take ``plan``'s recommendation. ``plan``'s pick is shown as a note when
it differs.

On vLLM's CPU build the "GPUs" are worker processes; each needs its own
OpenMP core group (``VLLM_CPU_OMP_THREADS_BIND``, one ``|``-separated group per
rank), and vLLM's default of reserving one core per rank leaves nothing on a
small machine, so the reservation is set to 0.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from qwen_triage import visible_devices
from qwen_triage.preflight.plan.models import Layout, PlanResult, label
from qwen_triage.runner.vllm.argv import VllmLaunch

LAYOUT_ARGS = ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size")


class LayoutChoice(BaseModel):
    tp: int
    pp: int
    dp: int
    max_model_len: int | None = None  # set when only a shorter context fits
    why: str
    plan_differs: str | None = None  # plan's own recommendation, when it is another layout

    @property
    def world(self) -> int:
        return self.tp * self.pp

    def label(self) -> str:
        return label(self)  # type: ignore[arg-type]


def requested(launch: VllmLaunch) -> tuple[int, int, int]:
    return (launch.tensor_parallel_size or 1, launch.pipeline_parallel_size or 1, launch.data_parallel_size or 1)


def _plan_order(x: Layout) -> tuple:
    # plan's scoring, minus its preference for replicas
    return (x.pp, bool(x.tp_crosses_slow_link), -(x.kv_cache_tokens or 0), x.tp)


def choose_layout(plan: PlanResult, want: tuple[int, int, int]) -> LayoutChoice | None:
    """The valid layout closest to ``want`` (tp, pp, dp); None when ``plan`` found nothing that runs."""
    tp, pp, dp = want
    wanted_gpus = min(tp * pp * dp, plan.gpus)
    valid = [x for x in plan.layouts if x.valid]
    same_dp = [x for x in valid if x.dp == dp and x.gpus_used <= wanted_gpus]
    rec = plan.recommended
    if same_dp:
        best = sorted(same_dp, key=lambda x: (-x.gpus_used, *_plan_order(x)))[0]
        why = f"{label(best)} on {best.gpus_used} of {plan.gpus} GPUs"
        if (best.tp, best.pp, best.dp) == (tp, pp, dp):
            why = f"{label(best)} is valid"
        elif best.gpus_used < wanted_gpus:
            why += f": no valid layout with {'these replicas on ' if dp > 1 else ''}{wanted_gpus} GPUs"
        choice = LayoutChoice(tp=best.tp, pp=best.pp, dp=best.dp, why=why)
    elif rec is not None:
        chosen = plan.layout(rec.tp, rec.pp, rec.dp)
        max_len = None
        if chosen is not None and not chosen.valid and chosen.codes == ["kv-short"]:
            max_len = (chosen.kv_cache_tokens or 0) // 1024 * 1024 or None
        choice = LayoutChoice(tp=rec.tp, pp=rec.pp, dp=rec.dp, max_model_len=max_len, why=f"plan: {rec.why}")
    else:
        return None
    if rec is not None and (rec.tp, rec.pp, rec.dp) != (choice.tp, choice.pp, choice.dp):
        choice.plan_differs = f"{label(rec)} ({rec.why})"
    return choice


# --- CPU build ----------------------------------------------------------------------

CPU_BIND = "VLLM_CPU_OMP_THREADS_BIND"
CPU_RESERVED = "VLLM_CPU_NUM_OF_RESERVED_CPU"


def visible_indices(env: Mapping[str, str], count: int, uuids: Sequence[str | None] = ()) -> list[int]:
    """The NVML indices ``CUDA_VISIBLE_DEVICES`` in ``env`` leaves visible, in its order, read as CUDA reads it
    (:mod:`qwen_triage.visible_devices`): unset is all ``count``, empty (or invalid from its first entry) is none.
    GPU UUIDs are mapped with ``uuids`` (by NVML index); MIG devices, or UUIDs with none known, count as all."""
    return visible_devices.from_env(env).indices(count, uuids)


def is_cpu_build(env: Mapping[str, str]) -> bool:
    """The launch targets vLLM's CPU build (the device the fixtures and tests use)."""
    return env.get("VLLM_TARGET_DEVICE", "").lower() == "cpu"


def cpu_groups(world: int, cpus: list[int] | None = None) -> str:
    """``0|1`` for two ranks on two cores: contiguous core groups, one per rank (cores reused when short)."""
    if cpus is None:
        try:
            cpus = sorted(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cpus = list(range(os.cpu_count() or 1))
    if not cpus:
        cpus = [0]
    if len(cpus) < world:
        return "|".join(str(cpus[i % len(cpus)]) for i in range(world))
    size = len(cpus) // world
    groups = []
    for r in range(world):
        part = cpus[r * size : (r + 1) * size]
        groups.append(f"{part[0]}-{part[-1]}" if len(part) > 1 and part[-1] - part[0] == len(part) - 1 else ",".join(map(str, part)))
    return "|".join(groups)


def cpu_binding_env(world: int, env: Mapping[str, str], cpus: list[int] | None = None) -> dict[str, str]:
    """The env settings a CPU-build launch of ``world`` ranks needs that ``env`` lacks (or has wrong)."""
    out: dict[str, str] = {}
    bind = env.get(CPU_BIND)
    if world <= 1:
        # An explicit list for more ranks would trip vLLM's count check.
        if bind and bind not in ("auto", "nobind") and len(bind.split("|")) != 1:
            out[CPU_BIND] = "auto"
        return out
    # An explicit "auto" or "nobind" is the user's choice (auto suits multi-socket hosts).
    if bind is None or (bind not in ("auto", "nobind") and len(bind.split("|")) != world):
        out[CPU_BIND] = cpu_groups(world, cpus)
    if env.get(CPU_RESERVED) is None:
        out[CPU_RESERVED] = "0"
    return out
