"""The report's JSON, written without pydantic, is the JSON pydantic writes for the same report."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_triage.engine.scanner import Scanner
from qwen_triage.inputs.file import open_source
from qwen_triage.report.model import (
    Diagnosis,
    Evidence,
    FixOut,
    Report,
    Stats,
    Symptom,
    Unrecognised,
    _adapter,
    to_dict,
    to_json,
)
from qwen_triage.rulepack.severity import Severity
from tests.conftest import FIXTURES


def _pydantic_json(obj: object, indent: int | None = 2) -> str:
    return _adapter(type(obj)).dump_json(obj, by_alias=True, indent=indent).decode()


def _same(ours: str, theirs: str) -> None:
    """Equal data in the same key order (float spelling may differ: 1e-05 and 1e-5 are one number)."""
    assert json.dumps(json.loads(ours)) == json.dumps(json.loads(theirs))


def _scan(compiled, path) -> Report:  # type: ignore[no-untyped-def]
    scanner = Scanner(compiled)
    for _ in scanner.scan_source(open_source(str(path))):
        pass
    return scanner.report()


@pytest.mark.parametrize("path", sorted(FIXTURES.rglob("*.log"))[::7], ids=lambda p: p.name)
def test_fixture_reports_as_pydantic_writes_them(compiled, path) -> None:  # type: ignore[no-untyped-def]
    report = _scan(compiled, path)
    _same(to_json(report), _pydantic_json(report))
    _same(to_json(report, indent=None), _pydantic_json(report, indent=None))
    assert to_dict(report) == json.loads(_pydantic_json(report))


def _evidence(text: str) -> Evidence:
    return Evidence(path="x.log", line=3, text=text, truncated=True)


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
fact_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(allow_nan=True, allow_infinity=True), texts,
    st.lists(st.integers(), max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(text=texts, facts=st.dictionaries(texts, fact_values, max_size=5), action=st.dictionaries(texts, fact_values, max_size=3),
       seconds=st.floats(allow_nan=True, allow_infinity=True))
def test_odd_values_as_pydantic_writes_them(text: str, facts: dict, action: dict, seconds: float) -> None:
    diagnosis = Diagnosis(
        class_="gpu.oom", rule="torch.cuda-oom", title=text, severity=Severity.critical, summary=text, facts=facts,
        evidence=[_evidence(text)], count=2, fix=[FixOut(step=text, action=action or None)],
        symptoms=[Symptom(class_="x.y", rule="r", title=text, severity=Severity.info, count=1, evidence=[])],
    )
    report = Report(
        diagnoses=[diagnosis], notes=[text],
        unrecognised=[Unrecognised(template=text, kind="error", count=1, evidence=_evidence(text))],
        stats=Stats(lines=1, bytes=2, seconds=seconds, rules=3),
    )
    _same(to_json(report), _pydantic_json(report))
    if not math.isfinite(seconds):
        assert json.loads(to_json(report))["stats"]["seconds"] is None


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic's own note that the key is not text
def test_unusual_values_fall_back_to_pydantic() -> None:
    """A dict keyed by something other than text is written by pydantic, not guessed at."""
    report = Report(
        diagnoses=[Diagnosis(class_="a.b", rule="r", title="t", severity=Severity.error, summary="s",
                             facts={3: "three"}, evidence=[], count=1)],  # type: ignore[dict-item]
        stats=Stats(lines=0, bytes=0, seconds=0.0, rules=0),
    )
    assert to_json(report) == _pydantic_json(report)
