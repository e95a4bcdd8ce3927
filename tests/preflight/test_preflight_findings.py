"""Preflight findings speak the scan report's language: known classes, vocabulary actions, same models."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import TypeAdapter

from qwen_triage.rulepack.actions import Action, Redownload
from qwen_triage.engine.check_finding import CheckFinding
from qwen_triage.preflight.findings import act, ev, fix, to_report
from qwen_triage.report.model import Diagnosis, Observation, Report, Stats, from_json
from qwen_triage.rulepack.checks import bundled_checks
from qwen_triage.rulepack.severity import Severity
from tests.rulepack.check_ids import used_in

PACKAGE = Path(__file__).resolve().parents[2] / "qwen_triage" / "preflight"


def test_every_class_id_used_exists(classes):
    """The classes the preflight checks file under (their declarations', variants' included) are catalogued."""
    checks = bundled_checks()
    literals, patterns = used_in(PACKAGE)
    ids = [i for i in checks if i in literals or any(re.match(p, i) for p in patterns)]
    used = {c for i in ids for c in checks[i].classes}
    assert len(used) > 15
    assert used <= set(classes), used - set(classes)


def test_rule_ids_are_namespaced():
    literals, patterns = used_in(PACKAGE)
    for rule, where in literals.items():
        assert re.match(r"^preflight\.(plan|model|doctor)\.[a-z0-9-]+$", rule), (where, rule)
    assert all(p.startswith(r"^preflight\.") for p in patterns), patterns


def _finding(class_id, rule, severity=Severity.error, **kw):
    return CheckFinding(
        class_id=class_id,
        rule=rule,
        title="t",
        severity=severity,
        summary=f"{rule} happened.",
        evidence=[ev("f", rule)],
        **kw,
    )


def test_grouping_nesting_and_observations(classes):
    findings = [
        _finding("model.weights_mismatch", "preflight.model.config-weights"),
        _finding(
            "model.shard_missing", "preflight.model.shard-missing", fix=[fix("get it", act(Redownload, what="x"))]
        ),
        _finding("model.shard_missing", "preflight.model.shard-missing"),
        _finding("hardware.pcie_error", "preflight.doctor.pcie-gen", Severity.info),
        _finding("nccl.shm_too_small", "preflight.doctor.shm-small", Severity.warning),
    ]
    diagnoses, observations = to_report(findings, classes)
    assert [d.class_ for d in diagnoses] == ["model.shard_missing", "nccl.shm_too_small"]
    top = diagnoses[0]
    assert top.count == 2 and top.symptoms[0].class_ == "model.weights_mismatch"
    assert top.fix[0].action == {"type": "redownload", "what": "x", "safety": "destructive"}
    # A class with no fix of its own gets the catalogue's.
    assert diagnoses[1].fix[0].step == classes["nccl.shm_too_small"].fix
    assert [o.rule for o in observations] == ["preflight.doctor.pcie-gen"]
    # They drop into the scan report unchanged.
    report = Report(diagnoses=diagnoses, observations=observations, stats=Stats(lines=0, bytes=0, seconds=0, rules=0))
    assert from_json(Report, report.to_json()).classes() == ["model.shard_missing", "nccl.shm_too_small"]
    assert isinstance(top, Diagnosis) and isinstance(observations[0], Observation)


def test_actions_are_vocabulary(build, classes, tmp_path):
    """Every fix action the preflight checks emit in these scenarios validates against the action union."""
    from qwen_triage.preflight.model.check import inspect_model
    from qwen_triage.preflight.doctor import probe
    from qwen_triage.preflight.model.config import from_table
    from qwen_triage.preflight.machine.nvml import ReplayProbe
    from qwen_triage.preflight.plan.layouts import plan_layouts

    d = tmp_path / "m"
    build.model(d)
    (d / "model-00001-of-00003.safetensors").unlink()
    diagnoses = inspect_model(d, classes=classes).diagnoses
    diagnoses += plan_layouts(
        from_table("Qwen/Qwen3-8B"), 1, 24 * 2**30, requested=(3, 1, 1), classes=classes
    ).diagnoses
    for name in ("snapshot-6x4090-busy.json", "snapshot-mixed-4090-3090.json", "snapshot-6x3090-x4.json"):
        diagnoses += probe(gpu_probe=ReplayProbe(build.FIXTURES / name), classes=classes).diagnoses
    adapter = TypeAdapter(Action)
    seen = 0
    for dg in diagnoses:
        for f in dg.fix:
            if f.action:
                adapter.validate_python({k: v for k, v in f.action.items() if k != "safety"})
                seen += 1
    assert seen >= 10
