"""The machine around the GPUs: /dev/shm, container, driver kernel module, IOMMU, NUMA.

Everything is read from files under ``root`` (``/`` normally), so tests and
offline checks can point it at a recorded tree. Nothing here needs the GPU.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

_MODULE = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)*)")
_LIBVER = re.compile(r"^libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)*)$")
LIB_DIRS = (
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "usr/lib64",
    "usr/lib",
    "lib/x86_64-linux-gnu",
    "usr/local/nvidia/lib64",
    "usr/lib/wsl/lib",
)


class SystemInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kernel: str | None = None
    cpu_count: int | None = None
    host_memory_bytes: int | None = None
    shm_bytes: int | None = None
    shm_free_bytes: int | None = None
    container: str | None = None
    kernel_module_version: str | None = None
    userspace_driver_version: str | None = None
    iommu: str = "unknown"  # on, passthrough, off, unknown
    iommu_detail: str | None = None
    numa_nodes: int | None = None
    device_nodes: list[str] = []


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def kernel_module_version(root: Path) -> str | None:
    text = _read(root / "proc/driver/nvidia/version")
    m = _MODULE.search(text or "")
    return m.group(1) if m else None


def userspace_driver_version(root: Path) -> str | None:
    """The version in the file name behind ``libnvidia-ml.so.1`` (what NVML will load)."""
    for rel in LIB_DIRS:
        d = root / rel
        link = d / "libnvidia-ml.so.1"
        if link.is_symlink() or link.exists():
            try:
                target = Path(os.readlink(link)).name if link.is_symlink() else link.name
            except OSError:
                target = link.name
            m = _LIBVER.match(target)
            if m:
                return m.group(1)
        try:
            versions = sorted({m.group(1) for p in d.iterdir() if (m := _LIBVER.match(p.name))})
        except OSError:
            continue
        if len(versions) == 1:
            return versions[0]
    return None


def detect_container(root: Path, environ: Mapping[str, str]) -> str | None:
    if environ.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if (root / ".dockerenv").exists():
        return "docker"
    if (root / "run/.containerenv").exists():
        return "podman"
    cgroup = _read(root / "proc/1/cgroup") or ""
    for word, name in (("kubepods", "kubernetes"), ("docker", "docker"), ("containerd", "containerd"), ("lxc", "lxc")):
        if word in cgroup:
            return name
    value = environ.get("container")
    return value or None


def detect_iommu(root: Path) -> tuple[str, str | None]:
    cmdline = _read(root / "proc/cmdline") or ""
    words = cmdline.split()
    if "iommu=pt" in words or any(w in words for w in ("intel_iommu=pt", "amd_iommu=pt")):
        return "passthrough", "iommu=pt on the kernel command line"
    if any(w in words for w in ("intel_iommu=off", "amd_iommu=off", "iommu=off")):
        return "off", "disabled on the kernel command line"
    for rel in ("sys/class/iommu", "sys/kernel/iommu_groups"):
        d = root / rel
        try:
            entries = list(d.iterdir())
        except OSError:
            continue
        if entries:
            return "on", f"{len(entries)} entries in /{rel}"
        return "off", f"/{rel} is empty"
    return "unknown", None


def gpu_numa_node(root: Path, pci_bus_id: str) -> int | None:
    """NVML writes bus ids as ``00000000:01:00.0``; sysfs as ``0000:01:00.0``."""
    parts = pci_bus_id.lower().split(":")
    if len(parts) != 3:
        return None
    domain = parts[0][-4:].rjust(4, "0")
    text = _read(root / "sys/bus/pci/devices" / f"{domain}:{parts[1]}:{parts[2]}" / "numa_node")
    try:
        value = int((text or "").strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def probe_system(
    root: Path = Path("/"),
    *,
    statvfs: Callable[[str], Any] = os.statvfs,
    environ: Mapping[str, str] | None = None,
) -> SystemInfo:
    environ = os.environ if environ is None else environ
    info = SystemInfo()
    live = root == Path("/")
    if live:
        info.kernel = platform.release()
        info.cpu_count = os.cpu_count()
        try:
            import psutil

            info.host_memory_bytes = int(psutil.virtual_memory().total)
        except Exception:  # psutil is a dependency, but a sandbox may deny /proc/meminfo
            pass
    try:
        st = statvfs(str(root / "dev/shm"))
        info.shm_bytes = st.f_frsize * st.f_blocks
        info.shm_free_bytes = st.f_frsize * st.f_bavail
    except OSError:
        pass
    info.container = detect_container(root, environ)
    info.kernel_module_version = kernel_module_version(root)
    info.userspace_driver_version = userspace_driver_version(root)
    info.iommu, info.iommu_detail = detect_iommu(root)
    try:
        info.numa_nodes = (
            len([p for p in (root / "sys/devices/system/node").iterdir() if re.match(r"node\d+$", p.name)]) or None
        )
    except OSError:
        info.numa_nodes = None
    try:
        info.device_nodes = sorted(p.name for p in (root / "dev").iterdir() if p.name.startswith("nvidia"))
    except OSError:
        info.device_nodes = []
    return info
