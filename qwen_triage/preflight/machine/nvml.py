"""What NVML says about the GPUs, behind a one-method interface.

:class:`GpuProbe` has two implementations: :class:`PynvmlProbe` asks the
driver through ``pynvml``; :class:`ReplayProbe` reads a snapshot recorded as
JSON (``doctor --record``), so a six-GPU box can be examined, and tested,
anywhere. ``nvidia-smi -q -x`` output parses into the same
:class:`GpuSnapshot` (see :mod:`qwen_triage.preflight.machine.smi`).

Every field NVML may not support on a card is optional: ``None`` means "not
reported", never "zero".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

SNAPSHOT_FORMAT = "qwen-triage-gpu-snapshot/1"

# nvmlDeviceGetTopologyCommonAncestor levels -> nvidia-smi topo -m labels.
TOPO_LABELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
# nvmlDeviceGetP2PStatus -> nvidia-smi topo -p2p labels.
P2P_LABELS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
MAX_NVLINKS = 18


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Memory(_M):
    total: int
    used: int
    free: int
    reserved: int | None = None


class Pcie(_M):
    gen_current: int | None = None
    gen_max: int | None = None
    width_current: int | None = None
    width_max: int | None = None
    replay_counter: int | None = None


class NvLink(_M):
    link: int
    active: bool
    version: int | None = None
    remote_pci_bus_id: str | None = None
    crc_errors: int | None = None
    replay_errors: int | None = None


class Ecc(_M):
    enabled: bool | None = None
    volatile_uncorrected: int | None = None
    aggregate_uncorrected: int | None = None


class RemappedRows(_M):
    correctable: int = 0
    uncorrectable: int = 0
    pending: bool = False
    failure: bool = False


class GpuProcess(_M):
    pid: int
    name: str | None = None
    used_bytes: int | None = None


class Gpu(_M):
    index: int
    name: str
    uuid: str | None = None
    pci_bus_id: str
    vbios: str | None = None
    serial: str | None = None
    memory: Memory
    compute_capability: str | None = None
    pcie: Pcie = Field(default_factory=Pcie)
    nvlinks: list[NvLink] = Field(default_factory=list)
    ecc: Ecc = Field(default_factory=Ecc)
    remapped_rows: RemappedRows | None = None
    processes: list[GpuProcess] = Field(default_factory=list)
    compute_mode: str | None = None
    persistence_mode: bool | None = None
    mig_enabled: bool | None = None
    numa_node: int | None = None


class GpuSnapshot(_M):
    format: str = SNAPSHOT_FORMAT
    source: str = Field(description="nvml, a replayed file, or nvidia-smi XML")
    driver_version: str | None = None
    cuda_driver_version: str | None = Field(default=None, description="highest CUDA the driver supports, e.g. 12.4")
    nvml_version: str | None = None
    gpus: list[Gpu]
    topology: list[list[str]] | None = Field(default=None, description="nvidia-smi topo -m labels, GPU x GPU")
    p2p: list[list[str]] | None = Field(default=None, description="nvidia-smi topo -p2p r labels, GPU x GPU")
    cpu_affinity: list[str | None] | None = None


class NvmlUnavailable(Exception):
    """NVML could not be loaded or initialised; ``kind`` names why."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # library_not_found, driver_not_loaded, version_mismatch, no_permission, unknown, other


class GpuProbe(Protocol):
    def snapshot(self) -> GpuSnapshot: ...


class ReplayProbe:
    """A recorded snapshot, read back."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def snapshot(self) -> GpuSnapshot:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            snap = GpuSnapshot.model_validate(data)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValidationError) as exc:
            raise ValueError(f"{self.path}: not a GPU snapshot: {str(exc).splitlines()[0]}") from None
        return snap.model_copy(update={"source": f"replay: {self.path}"})


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class PynvmlProbe:
    """The driver, through pynvml. Each optional query degrades to ``None`` on NotSupported."""

    def __init__(self, visible: list[int] | None = None):
        # Indices in NVML (PCI) order; None = all.
        self.visible = visible

    def snapshot(self) -> GpuSnapshot:
        try:
            import pynvml as N
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise NvmlUnavailable("library_not_found", f"pynvml is not installed: {exc}") from None
        try:
            N.nvmlInit()
        except N.NVMLError as exc:
            raise NvmlUnavailable(_classify(N, exc), _text(str(exc))) from None
        try:
            return self._collect(N)
        finally:
            try:
                N.nvmlShutdown()
            except N.NVMLError:
                pass

    def _collect(self, N: Any) -> GpuSnapshot:
        def opt(fn: Callable[..., Any] | None, *args: Any) -> Any:
            if fn is None:
                return None
            try:
                return fn(*args)
            except (N.NVMLError, AttributeError, TypeError):
                return None

        count = N.nvmlDeviceGetCount()
        indices = [i for i in range(count) if self.visible is None or i in self.visible]
        handles = [N.nvmlDeviceGetHandleByIndex(i) for i in indices]
        gpus = [self._gpu(N, opt, i, h) for i, h in zip(indices, handles, strict=True)]
        cuda = opt(getattr(N, "nvmlSystemGetCudaDriverVersion_v2", None)) or opt(N.nvmlSystemGetCudaDriverVersion)
        topo: list[list[str]] = []
        p2p: list[list[str]] = []
        by_bus = {g.pci_bus_id.lower(): g.index for g in gpus}
        # On NVSwitch boards every link ends at a switch, not at a peer GPU;
        # nvidia-smi then shows NV<links> between every pair, and so do we.
        switch_links = [
            sum(1 for link in g.nvlinks if link.active and (link.remote_pci_bus_id or "").lower() not in by_bus)
            for g in gpus
        ]
        for a, ha in enumerate(handles):
            trow, prow = [], []
            for b, hb in enumerate(handles):
                if a == b:
                    trow.append("X")
                    prow.append("X")
                    continue
                links = sum(
                    1
                    for link in gpus[a].nvlinks
                    if link.active and by_bus.get((link.remote_pci_bus_id or "").lower()) == gpus[b].index
                ) or min(switch_links[a], switch_links[b])
                level = opt(N.nvmlDeviceGetTopologyCommonAncestor, ha, hb)
                trow.append(f"NV{links}" if links else TOPO_LABELS.get(level, "?") if level is not None else "?")
                status = opt(N.nvmlDeviceGetP2PStatus, ha, hb, N.NVML_P2P_CAPS_INDEX_READ)
                prow.append(P2P_LABELS.get(status, "U") if status is not None else "U")
            topo.append(trow)
            p2p.append(prow)
        return GpuSnapshot(
            source="nvml",
            driver_version=_text(opt(N.nvmlSystemGetDriverVersion) or "") or None,
            cuda_driver_version=f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
            nvml_version=_text(opt(N.nvmlSystemGetNVMLVersion) or "") or None,
            gpus=gpus,
            topology=topo or None,
            p2p=p2p or None,
        )

    def _gpu(self, N: Any, opt: Callable[..., Any], index: int, h: Any) -> Gpu:
        mem = opt(N.nvmlDeviceGetMemoryInfo, h, N.nvmlMemory_v2) if hasattr(N, "nvmlMemory_v2") else None
        mem = mem or N.nvmlDeviceGetMemoryInfo(h)
        cc = opt(N.nvmlDeviceGetCudaComputeCapability, h)
        pci = N.nvmlDeviceGetPciInfo(h)
        links = []
        for link in range(MAX_NVLINKS):
            state = opt(N.nvmlDeviceGetNvLinkState, h, link)
            if state is None:
                if link == 0:
                    break
                continue
            remote_fn = getattr(N, "nvmlDeviceGetNvLinkRemotePciInfo_v2", None) or N.nvmlDeviceGetNvLinkRemotePciInfo
            remote = opt(remote_fn, h, link)
            links.append(
                NvLink(
                    link=link,
                    active=bool(state),
                    version=opt(N.nvmlDeviceGetNvLinkVersion, h, link),
                    remote_pci_bus_id=_text(remote.busId) if remote is not None else None,
                    crc_errors=opt(N.nvmlDeviceGetNvLinkErrorCounter, h, link, N.NVML_NVLINK_ERROR_DL_CRC_DATA),
                    replay_errors=opt(N.nvmlDeviceGetNvLinkErrorCounter, h, link, N.NVML_NVLINK_ERROR_DL_REPLAY),
                )
            )
        ecc_mode = opt(N.nvmlDeviceGetEccMode, h)
        remap = opt(N.nvmlDeviceGetRemappedRows, h)
        procs: list[Any] = []
        for getter in (N.nvmlDeviceGetComputeRunningProcesses, N.nvmlDeviceGetGraphicsRunningProcesses):
            for p in opt(getter, h) or []:
                if any(q.pid == p.pid for q in procs):
                    continue
                used = getattr(p, "usedGpuMemory", None)
                procs.append(
                    GpuProcess(
                        pid=p.pid,
                        name=_process_name(N, opt, p.pid),
                        used_bytes=used if isinstance(used, int) and used < 1 << 50 else None,
                    )
                )
        mig = opt(N.nvmlDeviceGetMigMode, h)
        persistence = opt(N.nvmlDeviceGetPersistenceMode, h)
        return Gpu(
            index=index,
            name=_text(N.nvmlDeviceGetName(h)),
            uuid=_text(opt(N.nvmlDeviceGetUUID, h) or "") or None,
            pci_bus_id=_text(pci.busId),
            vbios=_text(opt(N.nvmlDeviceGetVbiosVersion, h) or "") or None,
            serial=_text(opt(N.nvmlDeviceGetSerial, h) or "") or None,
            memory=Memory(
                total=int(mem.total), used=int(mem.used), free=int(mem.free), reserved=getattr(mem, "reserved", None)
            ),
            compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
            pcie=Pcie(
                gen_current=opt(N.nvmlDeviceGetCurrPcieLinkGeneration, h),
                gen_max=opt(N.nvmlDeviceGetMaxPcieLinkGeneration, h),
                width_current=opt(N.nvmlDeviceGetCurrPcieLinkWidth, h),
                width_max=opt(N.nvmlDeviceGetMaxPcieLinkWidth, h),
                replay_counter=opt(N.nvmlDeviceGetPcieReplayCounter, h),
            ),
            nvlinks=links,
            ecc=Ecc(
                enabled=bool(ecc_mode[0]) if ecc_mode else None,
                volatile_uncorrected=opt(
                    N.nvmlDeviceGetTotalEccErrors, h, N.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, N.NVML_VOLATILE_ECC
                ),
                aggregate_uncorrected=opt(
                    N.nvmlDeviceGetTotalEccErrors, h, N.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, N.NVML_AGGREGATE_ECC
                ),
            ),
            remapped_rows=RemappedRows(
                correctable=remap[0], uncorrectable=remap[1], pending=bool(remap[2]), failure=bool(remap[3])
            )
            if remap
            else None,
            processes=procs,
            compute_mode=COMPUTE_MODES.get(opt(N.nvmlDeviceGetComputeMode, h)),
            persistence_mode=bool(persistence) if persistence is not None else None,
            mig_enabled=bool(mig[0]) if mig else None,
            numa_node=opt(getattr(N, "nvmlDeviceGetNumaNodeId", None), h),
        )


def _process_name(N: Any, opt: Callable[..., Any], pid: int) -> str | None:
    name = opt(N.nvmlSystemGetProcessName, pid)
    if name:
        return _text(name)
    try:
        import psutil

        return psutil.Process(pid).name()
    except Exception:  # the process may be gone or in another PID namespace
        return None


def _classify(N: Any, exc: Exception) -> str:
    table = {
        "NVMLError_LibraryNotFound": "library_not_found",
        "NVMLError_DriverNotLoaded": "driver_not_loaded",
        "NVMLError_LibRmVersionMismatch": "version_mismatch",
        "NVMLError_NoPermission": "no_permission",
        "NVMLError_Unknown": "unknown",
    }
    return table.get(type(exc).__name__, "other")


def record(snapshot: GpuSnapshot, path: str | Path) -> None:
    from qwen_triage.atomicfile import write_atomic

    write_atomic(path, snapshot.model_dump_json(indent=2) + "\n", mode=0o600)
