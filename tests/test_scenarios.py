"""Root cause, not the loudest line, with the bundled pack (issue 3's promises)."""

from __future__ import annotations

from qwen_triage.engine.scanner import scan_paths
from tests.conftest import FIXTURES

SCN = FIXTURES / "scenarios"


def test_gpu_off_the_bus_in_dmesg_explains_the_watchdog_in_the_vllm_log(compiled) -> None:
    report = scan_paths([str(SCN / "vllm-watchdog-only.log"), str(SCN / "dmesg-xid79.txt")], compiled)
    assert report.classes() == ["hardware.xid_fatal"]
    d = report.diagnoses[0]
    assert d.facts["xid"] == 79 and d.facts["pci"] == "0000:41:00"
    assert [s.class_ for s in d.symptoms] == ["nccl.timeout"]
    assert d.symptoms[0].evidence[0].path.endswith("vllm-watchdog-only.log")
    assert "0000:41:00" in d.summary


def test_oom_rank_explains_watchdog_with_concrete_facts(compiled) -> None:
    d = scan_paths([str(SCN / "oom-rank-then-watchdog.log")], compiled).diagnoses[0]
    assert d.class_ == "memory.gpu_oom"
    assert d.facts["gpu"] == 3
    assert "nccl.timeout" in [s.class_ for s in d.symptoms]


def test_engine_wrapper_is_never_a_diagnosis(compiled) -> None:
    """Alone it names no cause, but the start failed: listed as relays (issue 26 §5); beside the cause, part of it."""
    alone = scan_paths([str(SCN / "engine-wrapper-alone.log")], compiled)
    assert alone.diagnoses == [] and [u.kind for u in alone.unrecognised] == ["relay", "relay"]
    with_cause = scan_paths([str(SCN / "cause-then-engine-wrapper.log")], compiled)
    assert with_cause.classes() == ["memory.kv_cache_insufficient"]
    assert with_cause.diagnoses[0].facts["max_tokens"] == 34480
    assert [r.rule for r in with_cause.diagnoses[0].relayed] == ["vllm.engine-start-failed-wrapper"]
    assert with_cause.unrecognised == [] and with_cause.observations == []


def test_benign_warnings_are_observations_at_most(compiled) -> None:
    report = scan_paths([str(SCN / "benign-warnings.log")], compiled)
    assert report.diagnoses == []
    rules = {o.rule for o in report.observations}
    assert "vllm.custom-allreduce-disabled" in rules and "kernel.aer-corrected" in rules
