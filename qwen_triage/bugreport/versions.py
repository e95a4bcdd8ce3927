"""Versions for a bug report: the driver through NVML (the doctor's GPU probe), packages from their
metadata, Ollama from ``ollama --version`` (with a timeout), the OS from ``/etc/os-release``, and
whether this runs in a container (``/.dockerenv``, ``/run/.containerenv``, the cgroup of PID 1)."""

from __future__ import annotations

import platform
from collections import Counter
from pathlib import Path

from qwen_triage import __version__
from qwen_triage.bugreport.model import Versions
from qwen_triage.preflight.doctor import Inventory
from qwen_triage.preflight.machine.software import SoftwareInfo
from qwen_triage.units import human

_CGROUP_MARKS = (("kubepods", "kubernetes"), ("docker", "docker"), ("libpod", "podman"), ("containerd", "containerd"),
                 ("lxc", "lxc"))


def os_release(root: Path) -> str | None:
    try:
        text = (root / "etc" / "os-release").read_text(encoding="utf-8", errors="replace")[:8192]
    except OSError:
        return None
    fields = {}
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if eq:
            fields[key.strip()] = value.strip().strip('"').strip("'")
    return fields.get("PRETTY_NAME") or " ".join(filter(None, (fields.get("NAME"), fields.get("VERSION_ID")))) or None


def container(root: Path) -> str | None:
    if (root / ".dockerenv").exists():
        return "docker"
    if (root / "run" / ".containerenv").exists():
        return "podman"
    for name in ("proc/1/cgroup", "proc/self/cgroup"):
        try:
            text = (root / name).read_text(encoding="utf-8", errors="replace")[:65536]
        except OSError:
            continue
        for mark, kind in _CGROUP_MARKS:
            if mark in text:
                return kind
    return None


def versions(inventory: Inventory, software: SoftwareInfo | None, root: Path = Path("/")) -> Versions:
    snap = inventory.gpus
    gpus: list[str] = []
    if snap is not None:
        kinds = Counter(f"{g.name} ({human(g.memory.total)})" if g.memory.total else g.name for g in snap.gpus)
        gpus = [f"{n} x {k}" for k, n in kinds.items()]
    pk = software.packages if software else {}
    return Versions(
        tool=f"qwen-triage {__version__}",
        python=software.python if software else None,
        driver=snap.driver_version if snap else None,
        cuda_driver=snap.cuda_driver_version if snap else None,
        nvml_error=inventory.nvml_error,
        gpus=gpus,
        torch=pk.get("torch"),
        torch_cuda=software.torch_cuda if software else None,
        vllm=pk.get("vllm"),
        transformers=pk.get("transformers"),
        nccl=(software.nccl if software else None) or pk.get("nvidia-nccl-cu12") or pk.get("nvidia-nccl-cu11"),
        ollama=software.ollama if software else None,
        os=os_release(root),
        kernel=platform.release() if root == Path("/") else None,
        container=container(root),
    )
