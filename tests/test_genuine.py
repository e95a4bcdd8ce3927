"""The pack is right on every genuine-output fixture: what real releases printed (scripts/genuine/run.py).

Every ``fixtures/genuine/*/cases.yaml`` is found by glob, so a new program folder is tested without edits.
"""

from __future__ import annotations

import re

import pytest

from qwen_triage.authoring.evaluate import load_cases
from qwen_triage.rulepack.yamlload import load_yaml
from tests.conftest import ROOT

GENUINE = ROOT / "fixtures" / "genuine"
CASES = load_cases(GENUINE)
# the harness's own fields, which the corpus loader ignores
RAW = {
    (manifest.parent / item["file"]): item
    for manifest in sorted(GENUINE.glob("*/cases.yaml"))
    for item in (load_yaml(manifest).data or [])
}


def test_there_are_genuine_fixtures() -> None:
    assert CASES, "no fixtures/genuine/*/cases.yaml cases"
    assert any(not case.expect for _, case in CASES), "no healthy genuine fixture"


@pytest.mark.parametrize(("path", "case"), CASES, ids=[f"{p.parent.name}/{c.id}" for p, c in CASES])
def test_genuine_case_is_recorded_with_its_program(path, case) -> None:
    item = RAW[path]
    assert path.is_file(), f"{path} is listed but missing"
    assert case.id == path.stem
    assert re.fullmatch(r"\S+ \S+", str(item.get("program", ""))), "each entry says `program: NAME VERSION`"
    assert item.get("command"), "each entry says the command that printed it"


@pytest.mark.parametrize(("path", "case"), CASES, ids=[f"{p.parent.name}/{c.id}" for p, c in CASES])
def test_genuine_diagnoses(path, case, compiled) -> None:
    from qwen_triage.engine.scanner import scan_paths

    report = scan_paths([str(path)], compiled)
    assert report.classes() == case.expect, report.to_json()
    first_symptoms = {s.class_ for s in report.diagnoses[0].symptoms} if report.diagnoses else set()
    for extra in case.also:
        assert extra in first_symptoms or extra in report.classes(), f"{extra} not found as a symptom"
