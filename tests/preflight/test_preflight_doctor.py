"""doctor over recorded GPU snapshots, pasted nvidia-smi output, a fake system tree, and no NVML at all."""

from __future__ import annotations

import os
import sys
import types
from collections import namedtuple
from pathlib import Path

import pytest

from qwen_triage.preflight.doctor import probe
from qwen_triage.preflight.machine.gpu_checks import gpu_findings
from qwen_triage.preflight.machine.host_checks import software_findings, system_findings
from qwen_triage.preflight.machine.nvml import GpuSnapshot, NvmlUnavailable, PynvmlProbe, ReplayProbe, record
from qwen_triage.preflight.machine.software import SoftwareInfo, cuda_gap, probe_software, relevant_env
from qwen_triage.preflight.machine.system import SystemInfo, gpu_numa_node, probe_system

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "preflight"
StatVfs = namedtuple("StatVfs", "f_frsize f_blocks f_bavail")


def snapshot(name: str) -> GpuSnapshot:
    return ReplayProbe(FIXTURES / name).snapshot()


def diag(result, class_id):
    hits = [d for d in result.diagnoses if d.class_ == class_id]
    assert hits, [(d.class_, d.summary) for d in result.diagnoses]
    return hits[0]


# --- replayed snapshots ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "snapshot-6x4090-pcie.json",
        "snapshot-6x4090-busy.json",
        "snapshot-8xh100-nvlink.json",
        "snapshot-6x3090-x4.json",
        "snapshot-mixed-4090-3090.json",
    ],
)
def test_fixtures_replay(name):
    snap = snapshot(name)
    assert snap.source == f"replay: {FIXTURES / name}"
    assert len(snap.gpus) in (6, 8) and snap.topology and len(snap.topology) == len(snap.gpus)


def test_six_pcie_cards_are_healthy(classes):
    r = probe(gpu_probe=ReplayProbe(FIXTURES / "snapshot-6x4090-pcie.json"), classes=classes)
    assert r.offline and r.diagnoses == []
    rules = {o.rule for o in r.observations}
    assert {"preflight.doctor.topo-sockets", "preflight.doctor.p2p-none", "preflight.doctor.pcie-gen"} <= rules
    assert r.inventory.system is None and r.inventory.software is None


def test_gpu_held_by_another_process(classes):
    r = probe(gpu_probe=ReplayProbe(FIXTURES / "snapshot-6x4090-busy.json"), classes=classes)
    d = diag(r, "memory.gpu_util_too_high")
    assert d.rule == "preflight.doctor.gpu-busy" and d.facts["gpu"] == 3 and d.facts["pids"] == [48213]
    assert "ollama" in d.summary and d.count == 1
    kinds = [f.action["type"] for f in d.fix if f.action]
    assert kinds[:2] == ["stop_process", "exclude_gpu"]
    # Xorg's 4 MiB on GPU 0 is worth a line, not a finding.
    assert any(o.rule == "preflight.doctor.gpu-processes" for o in r.observations)


def test_card_in_an_x4_slot(classes):
    r = probe(gpu_probe=ReplayProbe(FIXTURES / "snapshot-6x3090-x4.json"), classes=classes)
    d = diag(r, "hardware.pcie_error")
    assert d.rule == "preflight.doctor.pcie-width" and "GPU 5" in d.summary and "x4 of x16" in d.summary
    assert [f.action["type"] for f in d.fix] == ["hardware_service", "bios_setting"]
    assert len(r.diagnoses) == 1


def test_mixed_models(classes):
    r = probe(gpu_probe=ReplayProbe(FIXTURES / "snapshot-mixed-4090-3090.json"), classes=classes)
    d = diag(r, "runtime.backend_mismatch")
    assert d.rule == "preflight.doctor.mixed-gpus" and d.severity.value == "warning"
    assert "RTX 3090 x4" in d.summary and "RTX 4090 x2" in d.summary and "8.6, 8.9" in d.summary
    env = [f.action for f in d.fix]
    assert {"type": "set_env", "name": "CUDA_VISIBLE_DEVICES", "value": "2,3,4,5", "safety": "safe"} in env
    assert any(o.rule == "preflight.doctor.vbios-mixed" for o in r.observations)


def test_nvlink_box_with_model(classes):
    r = probe(
        gpu_probe=ReplayProbe(FIXTURES / "snapshot-8xh100-nvlink.json"),
        model="Qwen/Qwen2.5-72B-Instruct",
        classes=classes,
    )
    assert r.diagnoses == []
    assert r.plan is not None and r.plan.topology_known and r.plan.gpus == 8
    assert r.plan.recommended.tp * r.plan.recommended.pp * r.plan.recommended.dp == 8
    assert r.model_check is None  # a hub name, nothing on disk to check


def test_hardware_counters(classes):
    snap = snapshot("snapshot-8xh100-nvlink.json")
    gpus = list(snap.gpus)
    gpus[3] = gpus[3].model_copy(update={"ecc": gpus[3].ecc.model_copy(update={"volatile_uncorrected": 2})})
    gpus[5] = gpus[5].model_copy(
        update={"remapped_rows": gpus[5].remapped_rows.model_copy(update={"pending": True, "uncorrectable": 1})}
    )
    links = [link.model_copy(update={"active": False}) if link.link in (4, 9) else link for link in gpus[6].nvlinks]
    gpus[6] = gpus[6].model_copy(update={"nvlinks": links})
    findings = gpu_findings(snap.model_copy(update={"gpus": gpus}))
    rules = {f.rule: f for f in findings}
    assert rules["preflight.doctor.ecc-uncorrected"].class_id == "hardware.xid_fatal"
    assert rules["preflight.doctor.remap-pending"].fix[0].action["type"] == "reset_gpu"
    assert "2 of 18" in rules["preflight.doctor.nvlink-down"].summary


def test_iommu_with_pcie_p2p():
    snap = snapshot("snapshot-6x3090-x4.json")
    n = len(snap.gpus)
    snap = snap.model_copy(update={"p2p": [["X" if a == b else "OK" for b in range(n)] for a in range(n)]})
    assert not [f for f in gpu_findings(snap, iommu="passthrough") if f.rule == "preflight.doctor.iommu-p2p"]
    hit = [f for f in gpu_findings(snap, iommu="on") if f.rule == "preflight.doctor.iommu-p2p"]
    assert hit and hit[0].class_id == "nccl.p2p_unsupported"
    assert {"type": "set_env", "name": "NCCL_P2P_DISABLE", "value": "1", "safety": "safe"} in [
        f.action for f in hit[0].fix
    ]


def test_record_and_replay(tmp_path):
    snap = snapshot("snapshot-mixed-4090-3090.json")
    record(snap, tmp_path / "snap.json")
    again = ReplayProbe(tmp_path / "snap.json").snapshot()
    assert again.gpus == snap.gpus and again.topology == snap.topology


def test_replay_rejects_other_json(tmp_path):
    (tmp_path / "x.json").write_text('{"gpus": "many"}')
    with pytest.raises(ValueError, match="not a GPU snapshot"):
        ReplayProbe(tmp_path / "x.json").snapshot()


# --- pasted nvidia-smi output ---------------------------------------------------------------------------


def test_offline_nvidia_smi_and_topo(classes):
    r = probe(
        nvidia_smi=FIXTURES / "nvidia-smi-q-6gpu.xml",
        topo=FIXTURES / "topo-6gpu.txt",
        model="Qwen/Qwen2.5-32B-Instruct",
        classes=classes,
    )
    assert r.offline and any("offline" in n for n in r.notes)
    busy = diag(r, "memory.gpu_util_too_high")
    assert busy.facts["gpu"] == 2 and busy.facts["pids"] == [3012447]
    width = diag(r, "hardware.pcie_error")
    assert "GPU 4" in width.summary and "x8 of x16" in width.summary
    assert r.inventory.gpus.topology[0][3] == "SYS"
    assert [g.numa_node for g in r.inventory.gpus.gpus] == [0, 0, 0, 1, 1, 1]
    assert (r.plan.recommended.tp, r.plan.recommended.pp) == (2, 3)


def test_offline_bad_file(tmp_path, classes):
    from qwen_triage.preflight.doctor import DoctorInputError

    bad = tmp_path / "smi.xml"
    bad.write_text("this is not xml")
    with pytest.raises(DoctorInputError):
        probe(nvidia_smi=bad, classes=classes)


# --- no NVML, and the system around it ------------------------------------------------------------------


class FailingProbe:
    def __init__(self, kind: str, message: str):
        self.err = NvmlUnavailable(kind, message)

    def snapshot(self):
        raise self.err


def fake_root(
    tmp_path: Path, *, module: str | None = "550.127.05", lib: str | None = "550.127.05", docker: bool = True
) -> Path:
    root = tmp_path / "root"
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "dev/shm").mkdir(parents=True)
    (root / "proc/cmdline").write_text("BOOT_IMAGE=/vmlinuz-6.8.0 root=/dev/sda1 ro intel_iommu=on quiet\n")
    (root / "sys/class/iommu/dmar0").mkdir(parents=True)
    if module:
        (root / "proc/driver/nvidia/version").write_text(
            f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {module}  Thu Oct 10 22:38:22 UTC 2024\n"
            "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"
        )
    if lib:
        libdir = root / "usr/lib/x86_64-linux-gnu"
        libdir.mkdir(parents=True)
        (libdir / f"libnvidia-ml.so.{lib}").write_bytes(b"\x7fELF")
        (libdir / "libnvidia-ml.so.1").symlink_to(f"libnvidia-ml.so.{lib}")
    if docker:
        (root / ".dockerenv").write_text("")
    return root


def quiet_software() -> SoftwareInfo:
    return SoftwareInfo(python="3.11.7", packages={}, env={})


def test_no_nvml_still_reports_everything_else(tmp_path, classes):
    root = fake_root(tmp_path, module=None, lib=None, docker=True)
    r = probe(
        gpu_probe=FailingProbe("library_not_found", "NVML Shared Library Not Found"),
        root=root,
        environ={},
        statvfs=lambda p: StatVfs(4096, 16384, 16000),
        software=quiet_software,
        classes=classes,
    )
    assert r.inventory.gpus is None and "NVML Shared Library Not Found" in r.inventory.nvml_error
    assert any("NVML could not be loaded" in n for n in r.notes)
    nvml = diag(r, "runtime.no_gpu_visible")
    assert "GPU checks are skipped" in nvml.summary
    shm = diag(r, "nccl.shm_too_small")  # 64 MiB in a container, reported all the same
    assert "64.00 MiB" in shm.summary and "container default" in shm.summary
    assert {"type": "container_option", "option": "--shm-size", "value": "16g", "safety": "caution"} in [
        f.action for f in shm.fix
    ]
    assert r.inventory.system.container == "docker" and r.inventory.system.iommu == "on"


def test_container_without_gpus(tmp_path, classes):
    root = fake_root(tmp_path, lib=None)
    r = probe(
        gpu_probe=FailingProbe("library_not_found", "NVML Shared Library Not Found"),
        root=root,
        environ={},
        statvfs=lambda p: StatVfs(4096, 4 << 20, 4 << 20),
        software=quiet_software,
        classes=classes,
    )
    d = diag(r, "runtime.no_gpu_visible")
    assert d.rule == "preflight.doctor.nvml-missing"
    assert d.fix[0].action == {"type": "container_option", "option": "--gpus", "value": "all", "safety": "caution"}


def test_driver_updated_without_reboot(tmp_path, classes):
    root = fake_root(tmp_path, module="550.54.15", lib="550.127.05", docker=False)
    r = probe(
        gpu_probe=FailingProbe("version_mismatch", "RM has detected an NVML/RM version mismatch."),
        root=root,
        environ={},
        statvfs=lambda p: StatVfs(4096, 8 << 20, 8 << 20),
        software=quiet_software,
        classes=classes,
    )
    d = diag(r, "runtime.nvml_mismatch")
    assert d.count == 2 and {"preflight.doctor.nvml-mismatch", "preflight.doctor.driver-mismatch"} == set(d.rules)
    assert "550.54.15" in d.summary and "550.127.05" in d.summary
    assert d.fix[0].action["type"] == "reboot" and d.fix[0].action["safety"] == "destructive"


def test_lost_gpu_in_container(tmp_path, classes):
    root = fake_root(tmp_path)
    r = probe(
        gpu_probe=FailingProbe("unknown", "Unknown Error"),
        root=root,
        environ={},
        statvfs=lambda p: StatVfs(4096, 8 << 20, 8 << 20),
        software=quiet_software,
        classes=classes,
    )
    assert diag(r, "runtime.container_lost_gpu").rule == "preflight.doctor.nvml-unknown"


def test_system_probe_reads_the_tree(tmp_path):
    root = fake_root(tmp_path, docker=False)
    (root / "sys/bus/pci/devices/0000:1b:00.0").mkdir(parents=True)
    (root / "sys/bus/pci/devices/0000:1b:00.0/numa_node").write_text("1\n")
    info = probe_system(root, statvfs=lambda p: StatVfs(4096, 4 << 20, 4 << 20), environ={"container": "podman"})
    assert info.kernel_module_version == info.userspace_driver_version == "550.127.05"
    assert info.container == "podman" and info.shm_bytes == 16 * 2**30
    assert gpu_numa_node(root, "00000000:1B:00.0") == 1
    assert system_findings(info, 6) == [f for f in system_findings(info, 6) if f.severity.value == "info"]


def test_shm_on_one_gpu_is_a_warning():
    small = SystemInfo(shm_bytes=64 << 20, container="docker")
    assert system_findings(small, 1)[0].severity.value == "warning"
    assert system_findings(small, 2)[0].severity.value == "error"


# --- software ---------------------------------------------------------------------------------------------


def fake_versions(table):
    import importlib.metadata as md

    def version(name):
        if name in table:
            return table[name]
        raise md.PackageNotFoundError(name)

    return version


def test_software_from_metadata_only(tmp_path):
    torch_dir = tmp_path / "torch"
    torch_dir.mkdir()
    (torch_dir / "version.py").write_text("__version__ = '2.7.0+cu128'\ncuda: Optional[str] = '12.8'\n")
    spec = types.SimpleNamespace(origin=str(torch_dir / "__init__.py"))
    env = {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_P2P_DISABLE": "1", "VLLM_API_KEY": "sk-secret", "HOME": "/root"}
    sw = probe_software(
        env,
        version=fake_versions({"torch": "2.7.0+cu128", "vllm": "0.9.2", "nvidia-nccl-cu12": "2.26.2"}),
        find_spec=lambda name: spec,
        which=lambda name: None,
    )
    assert sw.torch_cuda == "12.8" and sw.nccl == "2.26.2" and sw.packages["vllm"] == "0.9.2"
    assert sw.env == {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_P2P_DISABLE": "1", "VLLM_API_KEY": "<redacted>"}


def test_ollama_version_parsing():
    from qwen_triage.preflight.machine.software import ollama_version

    done = types.SimpleNamespace(
        stdout="", stderr="Warning: could not connect to a running Ollama instance\nWarning: client version is 0.5.7\n"
    )
    assert ollama_version(lambda n: "/usr/bin/ollama", lambda *a, **k: done) == "0.5.7"


def test_driver_too_old_for_torch():
    snap = snapshot("snapshot-6x4090-pcie.json")  # driver 550.127.05, CUDA 12.4
    minor = software_findings(SoftwareInfo(python="3.11", packages={"torch": "2.7.0+cu128"}, torch_cuda="12.8"), snap)
    assert minor[0].class_id == "runtime.driver_too_old" and minor[0].severity.value == "warning"
    assert minor[0].fix[0].action == {"type": "upgrade_driver", "min_version": "570.26", "safety": "destructive"}
    major = software_findings(SoftwareInfo(python="3.11", packages={"torch": "2.9.0+cu130"}, torch_cuda="13.0"), snap)
    assert major[0].severity.value == "error"
    assert software_findings(SoftwareInfo(python="3.11", torch_cuda="12.4"), snap) == []
    assert cuda_gap("12.1", "12.4") is None and cuda_gap("11.8", "12.4") is None


def test_environment_findings():
    snap = snapshot("snapshot-mixed-4090-3090.json")

    def rules(env):
        return [f.rule for f in software_findings(SoftwareInfo(python="3.11", env=relevant_env(env)), snap)]

    assert rules({"CUDA_VISIBLE_DEVICES": ""}) == ["preflight.doctor.cuda-visible-empty"]
    assert rules({"CUDA_VISIBLE_DEVICES": "0,1,7"}) == ["preflight.doctor.cuda-visible-range"]
    assert rules({"CUDA_VISIBLE_DEVICES": "2,3"}) == ["preflight.doctor.device-order"]
    assert rules({"CUDA_VISIBLE_DEVICES": "2,3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}) == []
    assert rules({"LD_PRELOAD": "/usr/local/vgpu/libvgpu.so"}) == ["preflight.doctor.vgpu-shim"]
    assert rules({"NCCL_P2P_DISABLE": "1"}) == ["preflight.doctor.nccl-env"]


# --- the real NVML path, against a stand-in pynvml ---------------------------------------------------------


class FakeNvml:
    """Two RTX 3090s joined by an NVLink bridge (4 links), one busy; names checked against real pynvml."""

    def __init__(self, real):
        self.real = real
        self.calls = set()

    def module(self):
        N = self.real
        mod = types.ModuleType("pynvml")
        for name in dir(N):
            if name.startswith(("NVML", "nvmlMemory")):
                setattr(mod, name, getattr(N, name))
        buses = ["00000000:01:00.0", "00000000:02:00.0"]
        unsupported = N.NVMLError(N.NVML_ERROR_NOT_SUPPORTED)

        def f(name, fn):
            assert hasattr(N, name), f"pynvml has no {name}"

            def wrapped(*args):
                self.calls.add(name)
                return fn(*args)

            setattr(mod, name, wrapped)

        def raise_(exc):
            raise exc

        Mem = namedtuple("Mem", "total free used reserved")
        Pci = namedtuple("Pci", "busId")
        Proc = namedtuple("Proc", "pid usedGpuMemory")
        f("nvmlInit", lambda: None)
        f("nvmlShutdown", lambda: None)
        f("nvmlDeviceGetCount", lambda: 2)
        f("nvmlDeviceGetHandleByIndex", lambda i: i)
        f("nvmlSystemGetDriverVersion", lambda: "550.127.05")
        f("nvmlSystemGetNVMLVersion", lambda: "12.550.127.05")
        f("nvmlSystemGetCudaDriverVersion_v2", lambda: 12040)
        f("nvmlSystemGetCudaDriverVersion", lambda: 12040)
        f("nvmlDeviceGetName", lambda h: "NVIDIA GeForce RTX 3090")
        f("nvmlDeviceGetUUID", lambda h: f"GPU-{h}")
        f("nvmlDeviceGetPciInfo", lambda h: Pci(buses[h].encode()))
        f("nvmlDeviceGetVbiosVersion", lambda h: "94.02.42.40.3C")
        f("nvmlDeviceGetSerial", lambda h: raise_(unsupported))
        f(
            "nvmlDeviceGetMemoryInfo",
            lambda h, version=None: Mem(
                25769803776, 25769803776 - (20 << 30) * h - (272 << 20), (20 << 30) * h, 272 << 20
            ),
        )
        f("nvmlDeviceGetCudaComputeCapability", lambda h: (8, 6))
        f("nvmlDeviceGetCurrPcieLinkGeneration", lambda h: 4)
        f("nvmlDeviceGetMaxPcieLinkGeneration", lambda h: 4)
        f("nvmlDeviceGetCurrPcieLinkWidth", lambda h: 16)
        f("nvmlDeviceGetMaxPcieLinkWidth", lambda h: 16)
        f("nvmlDeviceGetPcieReplayCounter", lambda h: 0)
        f(
            "nvmlDeviceGetNvLinkState",
            lambda h, link: 1 if link < 4 else raise_(N.NVMLError(N.NVML_ERROR_INVALID_ARGUMENT)),
        )
        f("nvmlDeviceGetNvLinkVersion", lambda h, link: 3)
        f("nvmlDeviceGetNvLinkRemotePciInfo", lambda h, link: Pci(buses[1 - h].encode()))
        f("nvmlDeviceGetNvLinkErrorCounter", lambda h, link, counter: 0)
        f("nvmlDeviceGetTopologyCommonAncestor", lambda a, b: N.NVML_TOPOLOGY_HOSTBRIDGE)
        f("nvmlDeviceGetP2PStatus", lambda a, b, cap: N.NVML_P2P_STATUS_OK)
        f("nvmlDeviceGetEccMode", lambda h: raise_(unsupported))
        f("nvmlDeviceGetTotalEccErrors", lambda h, kind, counter: raise_(unsupported))
        f("nvmlDeviceGetRemappedRows", lambda h: raise_(unsupported))
        f("nvmlDeviceGetComputeRunningProcesses", lambda h: [Proc(777, 20 << 30)] if h == 1 else [])
        f("nvmlDeviceGetGraphicsRunningProcesses", lambda h: [])
        f("nvmlSystemGetProcessName", lambda pid: "python3")
        f("nvmlDeviceGetComputeMode", lambda h: 0)
        f("nvmlDeviceGetPersistenceMode", lambda h: 1)
        f("nvmlDeviceGetMigMode", lambda h: raise_(unsupported))
        f("nvmlDeviceGetNumaNodeId", lambda h: 0)
        mod.nvmlDeviceGetNvLinkRemotePciInfo_v2 = None  # absent in this pynvml, as in the real one
        return mod


def test_pynvml_probe_against_stand_in(monkeypatch, classes):
    import pynvml as real

    fake = FakeNvml(real)
    monkeypatch.setitem(sys.modules, "pynvml", fake.module())
    snap = PynvmlProbe().snapshot()
    assert [g.name for g in snap.gpus] == ["NVIDIA GeForce RTX 3090"] * 2
    assert snap.cuda_driver_version == "12.4" and snap.driver_version == "550.127.05"
    assert snap.topology == [["X", "NV4"], ["NV4", "X"]] and snap.p2p == [["X", "OK"], ["OK", "X"]]
    g1 = snap.gpus[1]
    assert g1.processes[0].pid == 777 and g1.processes[0].name == "python3"
    assert g1.compute_capability == "8.6" and g1.serial is None and g1.ecc.enabled is None
    assert len(g1.nvlinks) == 4 and all(link.active for link in g1.nvlinks)
    r = probe(
        gpu_probe=PynvmlProbe(),
        root=Path("/nonexistent"),
        environ={},
        software=quiet_software,
        statvfs=lambda p: StatVfs(4096, 4 << 20, 4 << 20),
        classes=classes,
    )
    assert not r.offline and diag(r, "memory.gpu_util_too_high").facts["gpu"] == 1


# --- the real thing ------------------------------------------------------------------------------------------


def _nvml_loads() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return True
    except Exception:
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _nvml_loads(), reason="NVML cannot be loaded on this machine")
def test_real_nvml(tmp_path, classes):
    snap = PynvmlProbe().snapshot()
    assert snap.gpus and snap.driver_version
    assert all(g.memory.total > 0 and g.compute_capability for g in snap.gpus)
    record(snap, tmp_path / "real.json")
    assert ReplayProbe(tmp_path / "real.json").snapshot().gpus == snap.gpus
    r = probe(classes=classes)
    assert r.inventory.gpus is not None and r.inventory.nvml_error is None
    assert os.path.exists("/proc/driver/nvidia/version") == (r.inventory.system.kernel_module_version is not None)
