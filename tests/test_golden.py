"""`scan --format json` output on every fixture equals the reviewed golden file."""

from __future__ import annotations

import json

import pytest

from tests.golden.scan_golden import GOLDEN, fixture_logs, scan_json
from tests.conftest import ROOT

GOLDEN_REPORTS = json.loads(GOLDEN.read_text())


def test_golden_covers_every_fixture() -> None:
    assert sorted(GOLDEN_REPORTS) == [p.relative_to(ROOT).as_posix() for p in fixture_logs()], (
        "fixtures changed: run `python -m tests.golden.scan_golden --update` and review the diff"
    )


@pytest.mark.usefixtures("warm_cache")  # the golden stats are those of a warm run (the Hyperscan prefilter)
@pytest.mark.parametrize("path", fixture_logs(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_scan_json_unchanged(path) -> None:  # type: ignore[no-untyped-def]
    key = path.relative_to(ROOT).as_posix()
    assert key in GOLDEN_REPORTS
    assert scan_json(path) == GOLDEN_REPORTS[key]
