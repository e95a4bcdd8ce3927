"""What the runner itself saw go wrong, as diagnoses the plan builder reads like any other.

A log says why a launch failed when the launch says something. A hang, a
server that never answers, a layout that leaves GPUs idle, or memory that is
not given back say nothing in the log: the runner observes them and files them
here, with fix steps from the action vocabulary.
"""

from __future__ import annotations

from qwen_triage.engine.check_finding import CheckFinding, finding
from qwen_triage.preflight.findings import act, ev, fix, load_classes, to_report
from qwen_triage.report.model import Diagnosis
from qwen_triage.rulepack.actions import RerunWithDebug, SetArg, SetEnv, StopProcess

# Stages where a hang has a launch-side fix. NCCL first gathers evidence, then
# turns off peer-to-peer (the usual culprit on PCIe boxes); graph capture and
# torch.compile are skipped by eager mode.
_STAGE_FIX = {
    "nccl": [
        ("rerun with NCCL_DEBUG=INFO to see where NCCL stops",
         lambda: act(RerunWithDebug, env={"NCCL_DEBUG": "INFO"})),
        ("if it hangs again: NCCL without GPU peer-to-peer (PCIe boxes, IOMMU/ACS)",
         lambda: act(SetEnv, name="NCCL_P2P_DISABLE", value="1")),
    ],
    "cuda_graphs": [("skip CUDA graph capture with --enforce-eager", lambda: act(SetArg, arg="--enforce-eager"))],
    "compile": [("skip torch.compile and graph capture with --enforce-eager", lambda: act(SetArg, arg="--enforce-eager"))],
}


def _diagnoses(findings: list[CheckFinding]) -> list[Diagnosis]:
    diagnoses, _ = to_report(findings, load_classes())
    return diagnoses


def hang(kind: str, seconds: float, stage: str | None, label: str | None, hint: str | None, line: str | None) -> list[Diagnosis]:
    """A stall (``kind`` "stall": silence) or a readiness timeout (``kind`` "timeout")."""
    where = f"in stage “{label}”" if label else "before any stage the runner recognises"
    what = f"printed nothing for {seconds:.0f} s" if kind == "stall" else f"did not answer /health within {seconds:.0f} s"
    steps = [fix(text, make()) for text, make in _STAGE_FIX.get(stage or "", [])]
    if hint:
        steps.append(fix(hint[0].upper() + hint[1:]))
    return _diagnoses([
        finding(
            f"runner.{kind}",  # declared in rules/checks.yaml: runner.stall, runner.timeout
            f"the server {what}, {where}.",
            variant="nccl" if stage == "nccl" else None,
            facts={"stage": stage, "seconds": round(seconds, 1)},
            evidence=[ev("runner", line or where)],
            fix=steps,
        )
    ])


def gpus_idle(idle: list[int], busy: list[int], detail: str) -> list[Diagnosis]:
    return _diagnoses([
        finding(
            "runner.gpus-idle",
            f"the server answers, but {detail}: it runs on fewer GPUs than its layout "
            "(the 'only one card is working' failure).",
            facts={"idle": idle, "busy": busy},
            evidence=[ev("nvml", detail)],
        )
    ])


def not_released(detail: str) -> list[Diagnosis]:
    return _diagnoses([
        finding(
            "runner.not-released",
            f"after the last attempt stopped, {detail}; a relaunch now would find the memory taken.",
            evidence=[ev("runner", detail)],
            fix=[fix(f"stop what still holds them: {detail}", act(StopProcess, what=detail))],
        )
    ])
