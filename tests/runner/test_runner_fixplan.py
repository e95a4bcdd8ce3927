"""Fix plans from diagnoses: what the runner edits, what it only prints, and why (no vLLM needed).

The diagnoses come from the real vLLM 0.32 logs in fixtures/vllm-cpu, scanned by
the bundled rule pack, from preflight (check-model, plan, doctor on recorded
NVML snapshots), or are built here for rules that have no captured log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_triage.rulepack.actions import (
    ExcludeGpu,
    LowerGpuMemoryUtilization,
    Reboot,
    SetArg,
    SetEnv,
    StopProcess,
)
from qwen_triage.engine.scanner import scan_paths
from qwen_triage.engine.check_finding import CheckFinding
from qwen_triage.preflight.findings import act, ev, fix, load_classes, to_report
from qwen_triage.preflight.model.config import load_model_config
from qwen_triage.preflight.machine.nvml import ReplayProbe
from qwen_triage.report.model import Diagnosis
from qwen_triage.runner.fixplan import (
    PlanContext,
    attempt_key,
    build_fix_plan,
    class_defaults,
)
from qwen_triage.runner.layout import choose_layout, cpu_binding_env, cpu_groups
from qwen_triage.runner.launch_checks import Machine, plan_context, plan_for, probe_machine
from qwen_triage.runner.vllm.argv import parse_vllm_argv
from qwen_triage.runner.vllm.diff import render_diff
from qwen_triage.rulepack.severity import Severity
from tests.runner.helpers import CONFIG, VLLM_LOGS

ROOT = Path(__file__).resolve().parents[2]
SNAP = ROOT / "fixtures" / "preflight"
CPU = {"VLLM_TARGET_DEVICE": "cpu"}


def diags(compiled, name: str) -> list[Diagnosis]:
    return scan_paths([str(VLLM_LOGS / name)], compiled).diagnoses


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    (d / "config.json").write_text(CONFIG.read_text())
    return d


def cpu_machine(n: int) -> Machine:
    return Machine(gpus=n, gpu_mem_bytes=8 * 2**30, source=f"--gpus {n}", cpu_build=True, visible=list(range(n)))


def cpu_ctx(tiny: Path, n: int, env: dict | None = None) -> PlanContext:
    return plan_context(cpu_machine(n), load_model_config(tiny), {**CPU, **(env or {})})


def finding(class_id: str, rule: str, steps: list, severity=Severity.error, facts=None) -> Diagnosis:
    f = CheckFinding(class_id=class_id, rule=rule, title=rule, severity=severity, summary="", facts=facts or {},
                evidence=[ev("test", "line")], fix=steps)
    return to_report([f], load_classes())[0][0]


# --- from real vLLM logs -------------------------------------------------------------


def test_tp6_on_four_heads_replans_keeping_one_replica(compiled, tiny):
    launch = parse_vllm_argv(["vllm", "serve", str(tiny), "--tensor-parallel-size", "6", "--port", "18000"])
    plan = build_fix_plan(diags(compiled, "b-tp6-heads.log"), launch, {}, cpu_ctx(tiny, 2))
    assert plan.launch.tensor_parallel_size == 2
    assert plan.launch.data_parallel_size is None  # plan would pick 2 replicas; the runner keeps one
    assert any("replica" in n for n in plan.notes)
    assert not plan.needs_user
    # the CPU build's ranks get their own cores
    assert plan.env["VLLM_CPU_OMP_THREADS_BIND"].count("|") == 1
    assert plan.env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0"
    text = render_diff(plan.changes)
    assert "--tensor-parallel-size: 6 -> 2" in text
    assert "[vllm.tp-heads-indivisible]" in text


def test_tp6_on_six_devices_uses_the_largest_valid_layout(compiled, tiny):
    launch = parse_vllm_argv(["vllm", "serve", str(tiny), "-tp", "6"])
    plan = build_fix_plan(diags(compiled, "b-tp6-heads.log"), launch, {}, cpu_ctx(tiny, 6))
    # 4 heads, 2 KV heads, 2 layers: TP 4 on 4 of the 6 (PP 3 would exceed the layers)
    assert (plan.launch.tensor_parallel_size, plan.launch.pipeline_parallel_size) == (4, None)
    assert plan.launch.to_argv()[-2:] == ["-tp", "4"]  # the user's spelling is kept


def test_max_model_len_lowered_to_what_the_model_allows(compiled, tiny):
    launch = parse_vllm_argv(["vllm", "serve", str(tiny), "--max-model-len=4096"])
    plan = build_fix_plan(diags(compiled, "c-max-model-len.log"), launch, {}, cpu_ctx(tiny, 1))
    assert plan.launch.max_model_len == 512
    assert "--max-model-len=512" in plan.launch.to_argv()
    assert [c.name for c in plan.changes] == ["--max-model-len"]


@pytest.mark.parametrize("log", ["d-missing-shard.log", "e-truncated-shard.log"])
def test_shard_problems_need_the_user(compiled, tiny, log):
    launch = parse_vllm_argv(["vllm", "serve", str(tiny)])
    plan = build_fix_plan(diags(compiled, log), launch, {}, cpu_ctx(tiny, 1))
    assert not plan.changed
    assert plan.needs_user
    kinds = {i.action["type"] for i in plan.manual if i.action}
    assert "redownload" in kinds
    assert all(i.safety in ("destructive", "caution", "manual", "safe") for i in plan.manual)
    # the model directory can be checked again: --wait-for-fix can wait for the download
    assert plan.waitable()


def test_port_in_use_names_the_holder_and_never_moves_the_port(compiled, tiny):
    import socket

    launch = parse_vllm_argv(["vllm", "serve", str(tiny), "--host", "127.0.0.1", "--port", "18306"])
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", 18306))
        except OSError:
            pytest.skip("port 18306 busy")
        s.listen()
        plan = build_fix_plan(diags(compiled, "f-port-in-use.log"), launch, {}, cpu_ctx(tiny, 1))
    assert not plan.changed  # no --port edit
    assert plan.needs_user
    import os

    assert any(f"pid {os.getpid()}" in f for f in plan.findings), plan.findings
    assert plan.waitable()  # the port can be watched


def test_engine_death_has_no_root_cause(compiled, tiny):
    launch = parse_vllm_argv(["vllm", "serve", str(tiny)])
    plan = build_fix_plan(diags(compiled, "g-engine-sigkill.log"), launch, {}, cpu_ctx(tiny, 1))
    assert not plan.changed and not plan.needs_user


# --- rules' fix steps: alternatives, escalation, safety ------------------------------


def test_custom_all_reduce_escalates_one_step_per_failure(tiny):
    d = finding("nccl.p2p_unsupported", "vllm.custom-allreduce-cuda-error", [
        fix("disable it", act(SetArg, arg="--disable-custom-all-reduce")),
        fix("then P2P", act(SetEnv, name="NCCL_P2P_DISABLE", value="1")),
    ])
    launch = parse_vllm_argv(["vllm", "serve", "m", "-tp", "2"])
    ctx = PlanContext()
    first = build_fix_plan([d], launch, {}, ctx)
    assert first.launch.disable_custom_all_reduce is True and "NCCL_P2P_DISABLE" not in first.env
    second = build_fix_plan([d], first.launch, first.env, ctx)
    assert second.env["NCCL_P2P_DISABLE"] == "1"
    third = build_fix_plan([d], second.launch, second.env, ctx)
    assert not third.changed and third.needs_user  # nothing automatic left


def test_caution_steps_are_alternatives_when_a_safe_edit_exists():
    d = finding("memory.gpu_util_too_high", "test.busy", [
        fix("stop it", act(StopProcess, what="pid 1 on GPU 0")),
        fix("or lower", act(LowerGpuMemoryUtilization, to=0.8)),
    ])
    plan = build_fix_plan([d], parse_vllm_argv(["vllm", "serve", "m"]), {}, PlanContext())
    assert plan.launch.gpu_memory_utilization == 0.8
    assert not plan.needs_user
    assert [i.blocking for i in plan.instructions] == [False]


def test_destructive_only_blocks_and_is_not_waitable():
    d = finding("runtime.nvml_mismatch", "test.reboot", [fix("reboot", act(Reboot))])
    plan = build_fix_plan([d], parse_vllm_argv(["vllm", "serve", "m"]), {}, PlanContext())
    assert plan.needs_user and not plan.waitable()
    assert plan.manual[0].safety == "destructive"


def test_placeholders_are_not_applied():
    d = finding("nccl.network", "test.ifname", [
        fix("pick an interface", act(SetEnv, name="NCCL_SOCKET_IFNAME", value="<routable interface>")),
    ])
    plan = build_fix_plan([d], parse_vllm_argv(["vllm", "serve", "m"]), {}, PlanContext())
    assert not plan.changed and plan.needs_user
    # an interface name is a fact about the site: not on the allow-list, printed as a caution step
    assert plan.manual[0].safety == "caution"
    d = finding("vllm.oom", "test.seqs", [
        fix("fewer sequences", act(SetArg, arg="--max-num-seqs", value="<fewer>")),
    ])
    plan = build_fix_plan([d], parse_vllm_argv(["vllm", "serve", "m"]), {}, PlanContext())
    assert not plan.changed and plan.needs_user
    assert "only you can give" in plan.manual[0].step


def test_warnings_are_not_acted_on():
    d = finding("memory.gpu_util_too_high", "test.warn", [fix("lower", act(LowerGpuMemoryUtilization))],
                severity=Severity.warning)
    plan = build_fix_plan([d], parse_vllm_argv(["vllm", "serve", "m"]), {}, PlanContext())
    assert not plan.changed and not plan.needs_user


def test_gpu_memory_utilization_steps_and_floor():
    d = finding("memory.gpu_util_too_high", "test.util", [fix("lower", act(LowerGpuMemoryUtilization))])
    launch = parse_vllm_argv(["vllm", "serve", "m", "--gpu-memory-utilization", "0.32"])
    plan = build_fix_plan([d], launch, {}, PlanContext())
    assert plan.launch.gpu_memory_utilization == 0.3
    again = build_fix_plan([d], plan.launch, plan.env, PlanContext())
    assert not again.changed and again.needs_user


def test_kv_cache_lowers_max_model_len_from_the_fact(compiled):
    # vLLM's V1 message names what fits; the rule fills `to` from it.
    line = ("ValueError: To serve at least one request with the models's max seq len (196608), (11.62 GiB KV cache "
            "is needed, which is larger than the available KV cache memory (9.38 GiB). Based on the available memory, "
            "the estimated maximum model length is 158560. Try increasing `gpu_memory_utilization` or decreasing "
            "`max_model_len` when initializing the engine.")
    import io

    from qwen_triage.engine.scanner import Scanner
    from qwen_triage.inputs.source import Source

    sc = Scanner(compiled)
    for _ in sc.scan_source(Source(name="log", stream=io.BytesIO(line.encode() + b"\n"))):
        pass
    launch = parse_vllm_argv(["vllm", "serve", "m", "--max-model-len", "192k"])
    plan = build_fix_plan(sc.report().diagnoses, launch, {}, PlanContext())
    assert plan.launch.max_model_len == 158560


def test_class_default_fills_a_rule_without_the_action():
    d = finding("server.port_in_use", "test.port", [fix("look")])
    steps = class_defaults(d, parse_vllm_argv(["vllm", "serve", "m", "--port", "8123"]))
    assert [s.action["type"] for s in steps] == ["check_port", "free_port"]
    assert steps[0].action["port"] == "8123"


def test_preflight_layout_steps_are_replanned_not_copied(tiny):
    # plan's finding carries set_arg TP/PP for *its* pick (replicas); the runner re-plans closest to the request.
    launch = parse_vllm_argv(["vllm", "serve", str(tiny), "--tensor-parallel-size", "6"])
    p = plan_for(load_model_config(tiny), cpu_machine(2), launch, (6, 1, 1))
    plan = build_fix_plan(p.diagnoses, launch, {}, cpu_ctx(tiny, 2))
    assert plan.launch.tensor_parallel_size == 2
    # world-size and tp-heads both ask for a layout; both are named as reasons
    reason = next(c.reason for c in plan.changes if c.name == "--tensor-parallel-size")
    assert "world-size" in reason and "tp-heads" in reason


def test_qwen32b_tp6_on_six_4090s_becomes_tp2_pp3():
    launch = parse_vllm_argv(["vllm", "serve", "Qwen/Qwen2.5-32B-Instruct", "-tp", "6", "--max-model-len", "32768"])
    machine, *_ = probe_machine(launch, {}, gpu_probe=ReplayProbe(SNAP / "snapshot-6x4090-pcie.json"))
    assert machine.gpus == 6 and machine.nvml
    shape = load_model_config("Qwen/Qwen2.5-32B-Instruct")
    p = plan_for(shape, machine, launch, (6, 1, 1))
    plan = build_fix_plan(p.diagnoses, launch, {}, plan_context(machine, shape, {}))
    assert (plan.launch.tensor_parallel_size, plan.launch.pipeline_parallel_size) == (2, 3)


def test_exclude_gpu_then_replan_on_the_gpus_left():
    launch = parse_vllm_argv(["vllm", "serve", "Qwen/Qwen2.5-32B-Instruct", "-tp", "2", "-pp", "3",
                              "--max-model-len", "32768"])
    machine, *_ = probe_machine(launch, {}, gpu_probe=ReplayProbe(SNAP / "snapshot-6x4090-pcie.json"))
    shape = load_model_config("Qwen/Qwen2.5-32B-Instruct")
    xid = finding("hardware.xid_fatal", "kernel.xid-fatal", [
        fix("leave it out", act(ExcludeGpu, gpu="0000:89:00.0")),
    ], facts={"pci": "0000:89:00"})
    plan = build_fix_plan([xid], launch, {}, plan_context(machine, shape, {}))
    assert plan.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,4,5"
    assert plan.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    # five cards left: a layout for at most five (TP 4 here), not TP 2 x PP 3 any more
    assert plan.launch.world_size <= 5
    assert plan.layout is not None
    reason = next(c.reason for c in plan.changes if c.name == "CUDA_VISIBLE_DEVICES")
    assert "kernel.xid-fatal" in reason


def test_attempt_key_is_about_meaning_and_env():
    a = parse_vllm_argv(["vllm", "serve", "m", "-tp", "2"])
    b = parse_vllm_argv(["vllm", "serve", "m", "-tp", "2"])
    assert attempt_key(a, {"X": "1"}) == attempt_key(b, {"X": "1"})
    assert attempt_key(a, {"X": "1"}) != attempt_key(a, {"X": "2"})
    assert attempt_key(a, {}) != attempt_key(a, {}, epoch=1)


def test_cpu_groups():
    assert cpu_groups(2, [0, 1]) == "0|1"
    assert cpu_groups(2, [0, 1, 2, 3]) == "0-1|2-3"
    assert cpu_groups(4, [0, 1]) == "0|1|0|1"
    assert cpu_binding_env(1, {}) == {}
    assert cpu_binding_env(2, {"VLLM_CPU_OMP_THREADS_BIND": "auto"}) == {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    assert cpu_binding_env(2, {"VLLM_CPU_OMP_THREADS_BIND": "0|1|2"}, [0, 1])["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"
    assert cpu_binding_env(1, {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}) == {"VLLM_CPU_OMP_THREADS_BIND": "auto"}


def test_choose_layout_falls_back_to_plan_when_replicas_are_needed(tiny):
    shape = load_model_config(tiny)
    p = plan_for(shape, cpu_machine(4), parse_vllm_argv(["vllm", "serve", str(tiny)]))
    c = choose_layout(p, (1, 1, 1))
    assert (c.tp, c.pp, c.dp) == (1, 1, 1) and c.plan_differs  # one card asked, one given
    c = choose_layout(p, (3, 1, 1))
    assert c.tp == 2  # 3 does not divide 4 heads


def test_gpu_memory_taken_by_another_process_can_be_waited_for():
    from qwen_triage.runner.fixplan import verified, verifier_for

    launch = parse_vllm_argv(["vllm", "serve", "m", "--gpu-memory-utilization", "0.95"])
    kind, args = verifier_for({"type": "stop_process", "what": "pid 2211 (python) on GPU 0"}, launch)
    assert (kind, args) == ("gpu_free", {"gpu": 0, "fraction": 0.95})
    probe = ReplayProbe(SNAP / "snapshot-6x4090-busy.json")
    snap = probe.snapshot()
    g0 = snap.gpus[0].memory
    assert verified(kind, args, gpu_probe=probe) == (g0.free >= 0.95 * g0.total)
    assert not verified(kind, {"gpu": 0, "fraction": 1.0}, gpu_probe=probe)
    assert not verified(kind, args, gpu_probe=None)  # no NVML: cannot tell, so not done
