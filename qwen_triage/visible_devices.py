"""``CUDA_VISIBLE_DEVICES``, read the way CUDA reads it: the one parser doctor, plan and the runner share.

Three readers used to disagree (an empty value meant "no GPU" to doctor's
check but "every GPU" to the runner's layout), so a launch could be planned
on cards it would never see. What CUDA does (NVIDIA, CUDA Programming Guide,
"CUDA Environment Variables", ``CUDA_VISIBLE_DEVICES``; MPS guide on UUIDs):

* **unset**: every GPU is visible;
* **set but empty** (here also only whitespace): no GPU is visible;
* otherwise a **comma-separated list**, enumerated in its order, of
  - integer indices (``2,1``: device 2 becomes CUDA device 0);
  - GPU UUIDs as ``nvidia-smi -L`` prints them, ``GPU-8932f937-d72c-...``, or
    any prefix of one (``GPU-8932f937``) that names exactly one GPU;
  - MIG devices, ``MIG-<uuid>`` (R470+ drivers) or ``MIG-GPU-<uuid>/<gi>/<ci>``;
* parsing **stops at the first invalid entry**: ``0,2,-1,1`` shows devices 0
  and 2 only; what follows the invalid entry is ignored.

Two details the guide does not spell out, taken from PyTorch's
``torch.cuda._parse_visible_devices``, which mirrors the driver so that
``device_count()`` agrees with CUDA: an index is read like ``strtoul`` (its
leading digits; ``1gpu2`` is 1, ``-1`` or ``none`` are invalid), and **a
repeated entry makes the whole value invalid**, so no GPU is visible
(``0,0``), unless parsing had already stopped before the repeat.

An index here is taken as the NVML / ``nvidia-smi`` index. CUDA numbers GPUs
fastest first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; doctor warns when the two
orders can differ. :func:`parse` needs no machine; :meth:`VisibleDevices.resolve`
maps the entries onto the GPUs NVML lists (index range, UUID prefixes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

ENV = "CUDA_VISIBLE_DEVICES"

_DIGITS = re.compile(r"\d+")
_MIG_GPU = re.compile(r"MIG-(GPU-[^/]+)/\d+/\d+\Z")

Kind = Literal["index", "gpu-uuid", "mig"]


@dataclass(frozen=True)
class DeviceId:
    """One valid entry: ``text`` as written (stripped)."""

    text: str
    kind: Kind
    index: int | None = None
    uuid_prefix: str | None = None
    """``GPU-...`` as written; for ``MIG-GPU-<uuid>/<gi>/<ci>``, its parent GPU's"""

    def key(self) -> str:
        """What makes two entries the same device name (for the duplicate rule)."""
        return str(self.index) if self.kind == "index" else self.text.lower()


def _entry(text: str) -> DeviceId | None:
    """One entry, or None when CUDA would stop at it."""
    if text.startswith("GPU-"):
        return DeviceId(text, "gpu-uuid", uuid_prefix=text) if len(text) > 4 else None
    if text.startswith("MIG-"):
        if len(text) <= 4:
            return None
        m = _MIG_GPU.match(text)
        return DeviceId(text, "mig", uuid_prefix=m.group(1) if m else None)
    m = _DIGITS.match(text)
    return DeviceId(text, "index", index=int(m.group())) if m else None


@dataclass(frozen=True)
class Resolved:
    """The entries mapped onto a machine's GPUs.

    ``indices`` are NVML indices in CUDA's order; None when the entries cannot be
    mapped to whole GPUs here (MIG devices, or UUIDs with no UUIDs known).
    ``stopped_at`` is the first entry that names no GPU on this machine (CUDA
    ignores it and the rest).
    """

    indices: list[int] | None
    stopped_at: str | None = None
    duplicate: str | None = None


@dataclass(frozen=True)
class VisibleDevices:
    """A parsed ``CUDA_VISIBLE_DEVICES``: ``raw`` None when unset."""

    raw: str | None
    ids: tuple[DeviceId, ...] = ()
    stopped_at: str | None = None
    """the first invalid entry (it and what follows are ignored), None when every entry was valid"""
    duplicate: str | None = None
    """the repeated entry that made the whole value invalid (then ``ids`` is empty)"""

    @property
    def unset(self) -> bool:
        return self.raw is None

    @property
    def hides_all(self) -> bool:
        """Set, and CUDA sees no GPU through it (empty, invalid from the first entry, or a repeat)."""
        return self.raw is not None and not self.ids

    @property
    def has_mig(self) -> bool:
        return any(d.kind == "mig" for d in self.ids)

    def resolve(self, count: int, uuids: Sequence[str | None] = ()) -> Resolved:
        """Map the entries onto ``count`` GPUs (NVML order; ``uuids`` by NVML index when known).

        Unset: every GPU. An index beyond ``count``, or a UUID prefix matching no GPU
        or several, stops the list there, as CUDA does; the same GPU named twice (by
        index and by UUID, say) hides every GPU.
        """
        if self.raw is None:
            return Resolved(list(range(count)))
        if self.duplicate is not None:
            return Resolved([], duplicate=self.duplicate)
        if self.has_mig:
            return Resolved(None, stopped_at=self.stopped_at)
        known = [u.lower() if u else "" for u in uuids]
        out: list[int] = []
        for d in self.ids:
            if d.kind == "index":
                assert d.index is not None
                i: int | None = d.index if d.index < count else None
            else:
                if not any(known):
                    return Resolved(None, stopped_at=self.stopped_at)
                hits = [n for n, u in enumerate(known[:count]) if u and u.startswith((d.uuid_prefix or "").lower())]
                i = hits[0] if len(hits) == 1 else None
            if i is None:
                return Resolved(out, stopped_at=d.text)
            if i in out:
                return Resolved([], duplicate=d.text)
            out.append(i)
        return Resolved(out, stopped_at=self.stopped_at)

    def indices(self, count: int, uuids: Sequence[str | None] = ()) -> list[int]:
        """NVML indices visible, in CUDA's order; every GPU when they cannot be mapped here (MIG, unknown UUIDs)."""
        got = self.resolve(count, uuids).indices
        return list(range(count)) if got is None else got


def parse(value: str | None) -> VisibleDevices:
    """Parse a ``CUDA_VISIBLE_DEVICES`` value (None: unset)."""
    if value is None:
        return VisibleDevices(raw=None)
    ids: list[DeviceId] = []
    seen: set[str] = set()
    if not value.strip():
        return VisibleDevices(raw=value)
    for part in value.split(","):
        text = part.strip()
        d = _entry(text)
        if d is None:
            return VisibleDevices(raw=value, ids=tuple(ids), stopped_at=text)
        if d.key() in seen:
            return VisibleDevices(raw=value, duplicate=text)
        seen.add(d.key())
        ids.append(d)
    return VisibleDevices(raw=value, ids=tuple(ids))


def from_env(env: Mapping[str, str]) -> VisibleDevices:
    """``CUDA_VISIBLE_DEVICES`` as ``env`` (a launch's environment) sets it."""
    return parse(env.get(ENV))
