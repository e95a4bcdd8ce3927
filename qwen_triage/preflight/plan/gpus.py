"""Which GPUs to plan a launch for, from a GPU snapshot: the one policy ``plan``, ``doctor`` and the runner share.

It was derived three times (the ``plan`` command, doctor's plan check, the runner's launch checks), each
with its own idea of the count, the memory and the links; a launch could be planned one way by ``plan``
and another by ``relaunch`` on the same machine. The policy:

1. **The GPUs the server will see**: ``CUDA_VISIBLE_DEVICES`` read as CUDA reads it
   (:mod:`qwen_triage.visible_devices`: unset is every GPU, empty none, UUIDs matched, MIG slices keep
   every GPU), in CUDA's order. For a snapshot of another machine (a pasted ``nvidia-smi -q -x``, a
   ``doctor --record`` file) the caller passes no value: this shell's variable says nothing about that one.
2. **A count asked for** (``plan --gpus N``) takes the first N of those. More than are visible is planned
   as asked (a machine being sized, not this one); ``visible`` says how many there are.
3. **Memory per device**: the smallest size among them that NVML reports — every rank gets the same
   share, so the smallest card decides. None when no card reports one: the caller says what it does
   then (``plan`` asks for ``--gpu-mem``, doctor notes it, the runner uses its stand-in).
4. **Links**: the topology matrix narrowed to them, in their order; None unless the snapshot has a
   row for every one (a partial matrix would judge the wrong pairs).
5. **Compute capabilities**: of them, in their order (``""`` where unknown).
"""

from __future__ import annotations

from dataclasses import dataclass

from qwen_triage import visible_devices
from qwen_triage.preflight.machine.nvml import GpuSnapshot


@dataclass(frozen=True)
class PlanGpus:
    """The devices a plan is made for (see the module's policy)."""

    indices: tuple[int, ...]
    """snapshot indices of the GPUs planned on, in CUDA's order (at most ``count`` of them)"""
    count: int
    """devices to plan for: ``len(indices)``, or the count asked for when it is more"""
    visible: int
    """GPUs the server sees through ``CUDA_VISIBLE_DEVICES``"""
    memory_bytes: int | None
    topology: list[list[str]] | None
    compute_capabilities: list[str]


def gpus_to_plan(snap: GpuSnapshot, cvd: str | None = None, count: int | None = None) -> PlanGpus:
    """The GPUs of ``snap`` to plan for, seen through ``CUDA_VISIBLE_DEVICES`` ``cvd`` (None: unset), the first
    ``count`` of them when a count is asked for."""
    seen = visible_devices.parse(cvd).indices(len(snap.gpus), [g.uuid for g in snap.gpus])
    chosen = tuple(seen if count is None else seen[:count])
    planned = len(chosen) if count is None else count
    sizes = [snap.gpus[i].memory.total for i in chosen if snap.gpus[i].memory.total]
    return PlanGpus(
        indices=chosen,
        count=planned,
        visible=len(seen),
        memory_bytes=min(sizes) if sizes else None,
        topology=_links(snap.topology, chosen) if planned == len(chosen) else None,
        compute_capabilities=[snap.gpus[i].compute_capability or "" for i in chosen],
    )


def _links(topology: list[list[str]] | None, chosen: tuple[int, ...]) -> list[list[str]] | None:
    """The matrix narrowed to ``chosen``, in their order; None unless it has a cell for every pair of them."""
    if not topology or any(a >= len(topology) or any(b >= len(topology[a]) for b in chosen) for a in chosen):
        return None
    return [[topology[a][b] for b in chosen] for a in chosen]
