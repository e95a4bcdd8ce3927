"""Findings about the host around the GPUs: NVML failing to load, /dev/shm, driver versions, environment."""

from __future__ import annotations

from qwen_triage import visible_devices
from qwen_triage.rulepack.actions import (
    CheckShm,
    ContainerOption,
    Reboot,
    ReloadDriver,
    SetEnv,
    UnsetEnv,
    UpgradeDriver,
)
from qwen_triage.preflight.findings import CheckFinding, act, ev, fix
from qwen_triage.preflight.machine.nvml import GpuSnapshot, NvmlUnavailable
from qwen_triage.preflight.machine.software import MIN_DRIVER, SoftwareInfo, cuda_gap
from qwen_triage.preflight.machine.system import SystemInfo
from qwen_triage.units import GiB, human
from qwen_triage.rulepack.schema import Severity

SHM_MIN = 1 * GiB  # below this NCCL's shared-memory transport runs out (docker's default is 64 MiB)


SHM_RECOMMENDED = "16g"


def nvml_finding(err: NvmlUnavailable, system: SystemInfo | None) -> CheckFinding:
    container = system.container if system else None
    module = system.kernel_module_version if system else None
    text = f"Failed to initialize NVML: {err}"
    if err.kind == "version_mismatch":
        return CheckFinding(
            class_id="runtime.nvml_mismatch",
            rule="preflight.doctor.nvml-mismatch",
            title="driver/library version mismatch",
            severity=Severity.error,
            summary="NVML refuses to start: the loaded kernel module and the user-space driver library differ "
            f"(kernel module {module or '?'}, library {system.userspace_driver_version if system else '?'}). "
            "The driver was updated without a reboot.",
            evidence=[ev("nvml", text)],
            fix=[
                fix("reboot", act(Reboot)),
                fix("or unload and reload the nvidia modules when no process uses them", act(ReloadDriver)),
            ],
        )
    if err.kind == "unknown" and container:
        return CheckFinding(
            class_id="runtime.container_lost_gpu",
            rule="preflight.doctor.nvml-unknown",
            title="the container lost its GPUs",
            severity=Severity.error,
            summary=f"NVML fails with 'Unknown Error' inside a {container} container: the host reset the "
            "container's device permissions (typically after `systemctl daemon-reload`).",
            evidence=[ev("nvml", text)],
            fix=[fix("recreate the container; configure the container toolkit's cgroup handling")],
        )
    if err.kind == "library_not_found" and container and module:
        return CheckFinding(
            class_id="runtime.no_gpu_visible",
            rule="preflight.doctor.nvml-missing",
            title="no NVIDIA driver library inside the container",
            severity=Severity.error,
            summary=f"the host runs NVIDIA driver {module}, but this {container} container has no libnvidia-ml: it "
            "was started without GPU access.",
            evidence=[ev("nvml", text), ev("/proc/driver/nvidia/version", f"kernel module {module}")],
            fix=[fix("start the container with GPUs", act(ContainerOption, option="--gpus", value="all"))],
        )
    plain = {
        "library_not_found": "no NVIDIA driver library (libnvidia-ml) on this machine",
        "driver_not_loaded": "the NVIDIA kernel driver is not loaded",
        "no_permission": "no permission to open the GPU devices",
    }.get(err.kind, f"NVML failed: {err}")
    return CheckFinding(
        class_id="runtime.no_gpu_visible",
        rule="preflight.doctor.nvml-unavailable",
        title="NVML could not be loaded",
        severity=Severity.error if module or (system and system.device_nodes) else Severity.warning,
        summary=f"{plain[0].upper() + plain[1:]}: GPU checks are skipped; the rest of the report still applies.",
        evidence=[ev("nvml", text)],
        fix=[fix("install the NVIDIA driver (or run on a GPU machine), then run `qwen-triage doctor` again")],
    )


def system_findings(sysinfo: SystemInfo, n_gpus: int | None) -> list[CheckFinding]:
    out = []
    if sysinfo.shm_bytes is not None and sysinfo.shm_bytes < SHM_MIN:
        where = f"this {sysinfo.container} container" if sysinfo.container else "this machine"
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
        steps += [
            fix("check again", act(CheckShm, min_bytes=16 * GiB)),
            # an instruction, not an automatic change: vLLM's own IPC needs /dev/shm too
            fix("last resort, for NCCL only: NCCL_SHM_DISABLE=1 (slower; vLLM's own IPC still needs /dev/shm)"),
        ]
        multi = n_gpus is None or n_gpus > 1
        out.append(
            CheckFinding(
                class_id="nccl.shm_too_small",
                rule="preflight.doctor.shm-small",
                title="/dev/shm too small",
                severity=Severity.error if multi else Severity.warning,
                summary=f"/dev/shm in {where} is {human(sysinfo.shm_bytes)}"
                + (" (the container default)" if sysinfo.container and sysinfo.shm_bytes <= 64 * 2**20 else "")
                + ": NCCL and vLLM's worker processes exchange data there, and multi-GPU runs fail with "
                "'Bus error' or 'Error while creating shared memory segment'.",
                facts={"shm_bytes": sysinfo.shm_bytes, "container": sysinfo.container},
                evidence=[ev("/dev/shm", f"/dev/shm size {sysinfo.shm_bytes} bytes ({human(sysinfo.shm_bytes)})")],
                fix=steps,
            )
        )
    kernel, user = sysinfo.kernel_module_version, sysinfo.userspace_driver_version
    if kernel and user and kernel != user:
        out.append(
            CheckFinding(
                class_id="runtime.nvml_mismatch",
                rule="preflight.doctor.driver-mismatch",
                title="kernel module and user-space driver differ",
                severity=Severity.error,
                summary=f"the loaded kernel module is {kernel} but libnvidia-ml is {user}: the driver was upgraded "
                "and the machine not rebooted; NVML and CUDA fail with 'Driver/library version mismatch'.",
                evidence=[
                    ev("/proc/driver/nvidia/version", f"Kernel Module {kernel}"),
                    ev("libnvidia-ml.so.1", f"libnvidia-ml.so.{user}"),
                ],
                fix=[fix("reboot", act(Reboot)), fix("or reload the nvidia modules", act(ReloadDriver))],
            )
        )
    if sysinfo.container:
        out.append(
            CheckFinding(
                class_id="runtime.no_gpu_visible",
                rule="preflight.doctor.container",
                title="running in a container",
                severity=Severity.info,
                summary=f"inside a {sysinfo.container} container; /dev/shm {human(sysinfo.shm_bytes)}.",
                evidence=[ev("/", f"container: {sysinfo.container}")],
            )
        )
    if sysinfo.iommu in ("on", "passthrough"):
        out.append(
            CheckFinding(
                class_id="nccl.p2p_unsupported",
                rule="preflight.doctor.iommu",
                title="IOMMU state",
                severity=Severity.info,
                summary=f"IOMMU {sysinfo.iommu} ({sysinfo.iommu_detail}).",
                evidence=[ev("/sys/class/iommu", f"IOMMU {sysinfo.iommu}")],
            )
        )
    return out


def software_findings(sw: SoftwareInfo, snap: GpuSnapshot | None) -> list[CheckFinding]:
    out = []
    driver_cuda = snap.cuda_driver_version if snap else None
    if sw.torch_cuda and driver_cuda and (gap := cuda_gap(sw.torch_cuda, driver_cuda)):
        need = MIN_DRIVER.get(".".join(sw.torch_cuda.split(".")[:2]))
        major = gap == "major"
        out.append(
            CheckFinding(
                class_id="runtime.driver_too_old",
                rule="preflight.doctor.driver-cuda",
                title="driver older than torch's CUDA",
                severity=Severity.error if major else Severity.warning,
                summary=f"torch {sw.packages.get('torch')} is built for CUDA {sw.torch_cuda}; driver "
                f"{snap.driver_version if snap else '?'} supports CUDA {driver_cuda}. "
                + (
                    "CUDA cannot start ('CUDA driver version is insufficient for CUDA runtime version')."
                    if major
                    else "Minor-version compatibility runs most of it, but kernels compiled at run time (Triton, "
                    "FlashInfer, PTX) and containers that require that CUDA fail."
                ),
                facts={"torch_cuda": sw.torch_cuda, "driver_cuda": driver_cuda, "min_driver": need},
                evidence=[
                    ev("torch/version.py", f"cuda = '{sw.torch_cuda}'"),
                    ev("nvml", f"driver {snap.driver_version if snap else '?'}, CUDA {driver_cuda}"),
                ],
                fix=[
                    fix(
                        f"upgrade the driver to {need or 'a newer branch'} or later",
                        act(UpgradeDriver, min_version=need),
                    ),
                    fix(f"or install torch/vLLM built for CUDA {driver_cuda}"),
                ],
            )
        )
    env = sw.env
    cvd = env.get(visible_devices.ENV)
    n = len(snap.gpus) if snap else None
    vd = visible_devices.parse(cvd)
    res = vd.resolve(n, [g.uuid for g in snap.gpus]) if snap and n is not None and not vd.hides_all else None
    if vd.hides_all or (res is not None and res.duplicate is not None):
        twice = vd.duplicate or (res.duplicate if res else None)
        why = (f" ({twice!r} is listed twice, and CUDA then ignores the whole list)" if twice is not None
               else f" (CUDA stops at the invalid entry {vd.stopped_at!r})" if vd.stopped_at else "")
        out.append(
            CheckFinding(
                class_id="runtime.no_gpu_visible",
                rule="preflight.doctor.cuda-visible-empty",
                title="CUDA_VISIBLE_DEVICES hides every GPU",
                severity=Severity.error,
                summary=f"CUDA_VISIBLE_DEVICES={cvd!r}: CUDA sees no GPU{why}.",
                evidence=[ev("environment", f"CUDA_VISIBLE_DEVICES={cvd}")],
                fix=[fix("unset it", act(UnsetEnv, name="CUDA_VISIBLE_DEVICES"))],
            )
        )
    elif cvd and n is not None and snap is not None:
        assert res is not None
        items = [x.strip() for x in cvd.split(",") if x.strip()]
        uuids = [g.uuid for g in snap.gpus]
        good = [x for x in items if visible_devices.parse(x).resolve(n, uuids).stopped_at is None]
        if res.stopped_at is not None and res.indices is not None:
            out.append(
                CheckFinding(
                    class_id="runtime.no_gpu_visible",
                    rule="preflight.doctor.cuda-visible-range",
                    title="CUDA_VISIBLE_DEVICES names GPUs that do not exist",
                    severity=Severity.error,
                    summary=f"CUDA_VISIBLE_DEVICES={cvd} but there are {n} GPUs (0-{n - 1}); CUDA stops at the first "
                    f"invalid entry, so GPUs after {res.stopped_at} are not seen either.",
                    evidence=[ev("environment", f"CUDA_VISIBLE_DEVICES={cvd}")],
                    fix=[
                        fix(
                            "list only existing GPUs",
                            act(SetEnv, name="CUDA_VISIBLE_DEVICES", value=",".join(good)),
                        )
                    ],
                )
            )
        elif snap and len({g.name for g in snap.gpus}) > 1 and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            out.append(
                CheckFinding(
                    class_id="config.insufficient_gpus",
                    rule="preflight.doctor.device-order",
                    title="CUDA numbers mixed GPUs differently from nvidia-smi",
                    severity=Severity.warning,
                    summary=f"CUDA_VISIBLE_DEVICES={cvd} with mixed GPU models and no "
                    "CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA "
                    "orders GPUs fastest first, nvidia-smi by PCI bus, so these indices may pick other cards.",
                    evidence=[ev("environment", f"CUDA_VISIBLE_DEVICES={cvd}; CUDA_DEVICE_ORDER unset")],
                    fix=[
                        fix(
                            "set CUDA_DEVICE_ORDER=PCI_BUS_ID",
                            act(SetEnv, name="CUDA_DEVICE_ORDER", value="PCI_BUS_ID"),
                        )
                    ],
                )
            )
    nvd = env.get("NVIDIA_VISIBLE_DEVICES")
    if nvd is not None and nvd.strip().lower() in ("void", "none", ""):
        out.append(
            CheckFinding(
                class_id="runtime.no_gpu_visible",
                rule="preflight.doctor.nvidia-visible-void",
                title="the container toolkit was told to expose no GPU",
                severity=Severity.error,
                summary=f"NVIDIA_VISIBLE_DEVICES={nvd!r}: the container gets no GPU devices.",
                evidence=[ev("environment", f"NVIDIA_VISIBLE_DEVICES={nvd}")],
                fix=[fix("start the container with --gpus all", act(ContainerOption, option="--gpus", value="all"))],
            )
        )
    preload = env.get("LD_PRELOAD", "")
    if "vgpu" in preload.lower():
        out.append(
            CheckFinding(
                class_id="runtime.gpu_share_shim",
                rule="preflight.doctor.vgpu-shim",
                title="a GPU-sharing shim is preloaded",
                severity=Severity.warning,
                summary=f"LD_PRELOAD={preload}: a GPU-sharing layer intercepts CUDA; multi-GPU NCCL runs often hang or "
                "fail under it.",
                evidence=[ev("environment", f"LD_PRELOAD={preload}")],
                fix=[fix("disable the shim for this workload", act(SetEnv, name="CUDA_DISABLE_CONTROL", value="true"))],
            )
        )
    notable = {
        k: v
        for k, v in env.items()
        if k.startswith("NCCL_") and k in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE", "NCCL_P2P_LEVEL")
    }
    if notable:
        out.append(
            CheckFinding(
                class_id="nccl.p2p_unsupported",
                rule="preflight.doctor.nccl-env",
                title="NCCL transports changed by the environment",
                severity=Severity.info,
                summary=", ".join(f"{k}={v}" for k, v in notable.items()) + ": slower, but sometimes the workaround.",
                evidence=[ev("environment", f"{k}={v}") for k, v in notable.items()],
            )
        )
    return out
