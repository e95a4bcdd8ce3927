"""Findings about the host around the GPUs: NVML failing to load, /dev/shm, driver versions, environment."""

from __future__ import annotations

from qwen_triage import visible_devices
from qwen_triage.engine.check_finding import CheckFinding, finding
from qwen_triage.preflight.findings import act, ev, fix
from qwen_triage.preflight.machine.nvml import GpuSnapshot, NvmlUnavailable
from qwen_triage.preflight.machine.software import MIN_DRIVER, SoftwareInfo, cuda_gap
from qwen_triage.preflight.machine.system import SystemInfo
from qwen_triage.report.model import FixOut
from qwen_triage.rulepack.actions import (
    CheckShm,
    ContainerOption,
    SetEnv,
    UpgradeDriver,
)
from qwen_triage.units import GiB, human

SHM_MIN = 1 * GiB  # below this NCCL's shared-memory transport runs out (docker's default is 64 MiB)


SHM_RECOMMENDED = "16g"


def nvml_finding(err: NvmlUnavailable, system: SystemInfo | None) -> CheckFinding:
    container = system.container if system else None
    module = system.kernel_module_version if system else None
    seen = [ev("nvml", f"Failed to initialize NVML: {err}")]
    if err.kind == "version_mismatch":
        return finding(
            "preflight.doctor.nvml-mismatch",
            "NVML refuses to start: the loaded kernel module and the user-space driver library differ "
            f"(kernel module {module or '?'}, library {system.userspace_driver_version if system else '?'}). "
            "The driver was updated without a reboot.",
            evidence=seen,
        )
    if err.kind == "unknown" and container:
        return finding(
            "preflight.doctor.nvml-unknown",
            f"NVML fails with 'Unknown Error' inside a {container} container: the host reset the "
            "container's device permissions (typically after `systemctl daemon-reload`).",
            evidence=seen,
        )
    if err.kind == "library_not_found" and container and module:
        return finding(
            "preflight.doctor.nvml-missing",
            f"the host runs NVIDIA driver {module}, but this {container} container has no libnvidia-ml: it "
            "was started without GPU access.",
            evidence=[*seen, ev("/proc/driver/nvidia/version", f"kernel module {module}")],
        )
    plain = {
        "library_not_found": "no NVIDIA driver library (libnvidia-ml) on this machine",
        "driver_not_loaded": "the NVIDIA kernel driver is not loaded",
        "no_permission": "no permission to open the GPU devices",
    }.get(err.kind, f"NVML failed: {err}")
    return finding(
        "preflight.doctor.nvml-unavailable",
        f"{plain[0].upper() + plain[1:]}: GPU checks are skipped; the rest of the report still applies.",
        variant=None if module or (system and system.device_nodes) else "no-driver",
        evidence=seen,
    )


def _shm_fix(sysinfo: SystemInfo) -> list[FixOut]:
    """Give NCCL a larger /dev/shm: by the container's options, or by remounting it on a host."""
    steps = []
    if sysinfo.container:
        steps += [
            fix(
                f"start the container with --shm-size {SHM_RECOMMENDED}",
                act(ContainerOption, option="--shm-size", value=SHM_RECOMMENDED),
            ),
            fix("or share the host's IPC namespace", act(ContainerOption, option="--ipc", value="host")),
        ]
    else:
        steps.append(fix(f"remount larger: `mount -o remount,size={SHM_RECOMMENDED.upper()} /dev/shm`"))
    return steps + [
        fix("check again", act(CheckShm, min_bytes=16 * GiB)),
        # an instruction, not an automatic change: vLLM's own IPC needs /dev/shm too
        fix("last resort, for NCCL only: NCCL_SHM_DISABLE=1 (slower; vLLM's own IPC still needs /dev/shm)"),
    ]


def _shm_small(sysinfo: SystemInfo, n_gpus: int | None) -> CheckFinding:
    assert sysinfo.shm_bytes is not None
    where = f"this {sysinfo.container} container" if sysinfo.container else "this machine"
    multi = n_gpus is None or n_gpus > 1
    return finding(
        "preflight.doctor.shm-small",
        f"/dev/shm in {where} is {human(sysinfo.shm_bytes)}"
        + (" (the container default)" if sysinfo.container and sysinfo.shm_bytes <= 64 * 2**20 else "")
        + ": NCCL and vLLM's worker processes exchange data there, and multi-GPU runs fail with "
        "'Bus error' or 'Error while creating shared memory segment'.",
        variant=None if multi else "one-gpu",
        facts={"shm_bytes": sysinfo.shm_bytes, "container": sysinfo.container},
        evidence=[ev("/dev/shm", f"/dev/shm size {sysinfo.shm_bytes} bytes ({human(sysinfo.shm_bytes)})")],
        fix=_shm_fix(sysinfo),
    )


def system_findings(sysinfo: SystemInfo, n_gpus: int | None) -> list[CheckFinding]:
    out = []
    if sysinfo.shm_bytes is not None and sysinfo.shm_bytes < SHM_MIN:
        out.append(_shm_small(sysinfo, n_gpus))
    kernel, user = sysinfo.kernel_module_version, sysinfo.userspace_driver_version
    if kernel and user and kernel != user:
        out.append(
            finding(
                "preflight.doctor.driver-mismatch",
                f"the loaded kernel module is {kernel} but libnvidia-ml is {user}: the driver was upgraded "
                "and the machine not rebooted; NVML and CUDA fail with 'Driver/library version mismatch'.",
                evidence=[
                    ev("/proc/driver/nvidia/version", f"Kernel Module {kernel}"),
                    ev("libnvidia-ml.so.1", f"libnvidia-ml.so.{user}"),
                ],
            )
        )
    if sysinfo.container:
        out.append(
            finding(
                "preflight.doctor.container",
                f"inside a {sysinfo.container} container; /dev/shm {human(sysinfo.shm_bytes)}.",
                evidence=[ev("/", f"container: {sysinfo.container}")],
            )
        )
    if sysinfo.iommu in ("on", "passthrough"):
        out.append(
            finding(
                "preflight.doctor.iommu",
                f"IOMMU {sysinfo.iommu} ({sysinfo.iommu_detail}).",
                evidence=[ev("/sys/class/iommu", f"IOMMU {sysinfo.iommu}")],
            )
        )
    return out


def _driver_cuda(sw: SoftwareInfo, snap: GpuSnapshot | None) -> list[CheckFinding]:
    """torch built for a newer CUDA than the driver runs."""
    driver_cuda = snap.cuda_driver_version if snap else None
    if not (sw.torch_cuda and driver_cuda and (gap := cuda_gap(sw.torch_cuda, driver_cuda))):
        return []
    need = MIN_DRIVER.get(".".join(sw.torch_cuda.split(".")[:2]))
    major = gap == "major"
    driver = snap.driver_version if snap else "?"
    return [
        finding(
            "preflight.doctor.driver-cuda",
            f"torch {sw.packages.get('torch')} is built for CUDA {sw.torch_cuda}; driver "
            f"{driver} supports CUDA {driver_cuda}. "
            + (
                "CUDA cannot start ('CUDA driver version is insufficient for CUDA runtime version')."
                if major
                else "Minor-version compatibility runs most of it, but kernels compiled at run time (Triton, "
                "FlashInfer, PTX) and containers that require that CUDA fail."
            ),
            variant=None if major else "minor",
            facts={"torch_cuda": sw.torch_cuda, "driver_cuda": driver_cuda, "min_driver": need},
            evidence=[
                ev("torch/version.py", f"cuda = '{sw.torch_cuda}'"),
                ev("nvml", f"driver {driver}, CUDA {driver_cuda}"),
            ],
            fix=[
                fix(f"upgrade the driver to {need or 'a newer branch'} or later", act(UpgradeDriver, min_version=need)),
                fix(f"or install torch/vLLM built for CUDA {driver_cuda}"),
            ],
        )
    ]


def _cuda_visible(env: dict[str, str], snap: GpuSnapshot | None) -> list[CheckFinding]:
    """CUDA_VISIBLE_DEVICES as CUDA reads it against the GPUs there are: none left, a bad entry, an order."""
    cvd = env.get(visible_devices.ENV)
    n = len(snap.gpus) if snap else None
    vd = visible_devices.parse(cvd)
    res = vd.resolve(n, [g.uuid for g in snap.gpus]) if snap and n is not None and not vd.hides_all else None
    seen = [ev("environment", f"CUDA_VISIBLE_DEVICES={cvd}")]
    if vd.hides_all or (res is not None and res.duplicate is not None):
        twice = vd.duplicate or (res.duplicate if res else None)
        why = (f" ({twice!r} is listed twice, and CUDA then ignores the whole list)" if twice is not None
               else f" (CUDA stops at the invalid entry {vd.stopped_at!r})" if vd.stopped_at else "")
        return [finding("preflight.doctor.cuda-visible-empty", f"CUDA_VISIBLE_DEVICES={cvd!r}: CUDA sees no GPU{why}.",
                        evidence=seen)]
    if not (cvd and n is not None and snap is not None):
        return []
    assert res is not None
    if res.stopped_at is not None and res.indices is not None:
        items = [x.strip() for x in cvd.split(",") if x.strip()]
        uuids = [g.uuid for g in snap.gpus]
        good = [x for x in items if visible_devices.parse(x).resolve(n, uuids).stopped_at is None]
        return [
            finding(
                "preflight.doctor.cuda-visible-range",
                f"CUDA_VISIBLE_DEVICES={cvd} but there are {n} GPUs (0-{n - 1}); CUDA stops at the first "
                f"invalid entry, so GPUs after {res.stopped_at} are not seen either.",
                evidence=seen,
                fix=[fix("list only existing GPUs", act(SetEnv, name="CUDA_VISIBLE_DEVICES", value=",".join(good)))],
            )
        ]
    if len({g.name for g in snap.gpus}) > 1 and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
        return [
            finding(
                "preflight.doctor.device-order",
                f"CUDA_VISIBLE_DEVICES={cvd} with mixed GPU models and no CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA "
                "orders GPUs fastest first, nvidia-smi by PCI bus, so these indices may pick other cards.",
                evidence=[ev("environment", f"CUDA_VISIBLE_DEVICES={cvd}; CUDA_DEVICE_ORDER unset")],
            )
        ]
    return []


_NCCL_TRANSPORTS = ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE", "NCCL_P2P_LEVEL")


def _environment(env: dict[str, str]) -> list[CheckFinding]:
    """Variables that take the GPUs away from a container, shim CUDA, or switch NCCL transports off."""
    out = []
    nvd = env.get("NVIDIA_VISIBLE_DEVICES")
    if nvd is not None and nvd.strip().lower() in ("void", "none", ""):
        out.append(finding("preflight.doctor.nvidia-visible-void",
                           f"NVIDIA_VISIBLE_DEVICES={nvd!r}: the container gets no GPU devices.",
                           evidence=[ev("environment", f"NVIDIA_VISIBLE_DEVICES={nvd}")]))
    preload = env.get("LD_PRELOAD", "")
    if "vgpu" in preload.lower():
        out.append(finding("preflight.doctor.vgpu-shim",
                           f"LD_PRELOAD={preload}: a GPU-sharing layer intercepts CUDA; multi-GPU NCCL runs often hang "
                           "or fail under it.",
                           evidence=[ev("environment", f"LD_PRELOAD={preload}")]))
    notable = {k: v for k, v in env.items() if k in _NCCL_TRANSPORTS}
    if notable:
        out.append(finding("preflight.doctor.nccl-env",
                           ", ".join(f"{k}={v}" for k, v in notable.items())
                           + ": slower, but sometimes the workaround.",
                           evidence=[ev("environment", f"{k}={v}") for k, v in notable.items()]))
    return out


def software_findings(sw: SoftwareInfo, snap: GpuSnapshot | None) -> list[CheckFinding]:
    return _driver_cuda(sw, snap) + _cuda_visible(sw.env, snap) + _environment(sw.env)
