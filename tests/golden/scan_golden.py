"""Golden outputs of `scan --format json` on every fixture log.

`python -m tests.golden.scan_golden --update` rewrites ``scan.json`` after an
intended change of output (a rule edited, a field added); the diff is then
reviewed like code. The test in ``tests/test_golden.py`` compares against it,
so a refactoring that changes any report shows up as a failing test.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_LOGS = ROOT / "fixtures" / "logs"
GOLDEN = Path(__file__).with_name("scan.json")
# Fields that differ between two runs of the same input.
VOLATILE_STATS = ("seconds",)


def fixture_logs() -> list[Path]:
    return sorted(p for p in FIXTURE_LOGS.rglob("*.log") if p.is_file())


def scan_json(path: Path) -> dict:
    """`qwen-triage scan --format json PATH`, in process, with volatile fields removed."""
    from click.testing import CliRunner

    from qwen_triage.cli.main import cli

    result = CliRunner().invoke(cli, ["scan", "--format", "json", str(path)])
    if result.exit_code not in (0, 1):
        raise RuntimeError(f"scan {path} exited {result.exit_code}: {result.output[-500:]}")
    report = json.loads(result.output)
    for key in VOLATILE_STATS:
        report.get("stats", {}).pop(key, None)
    report["exit_code"] = result.exit_code
    for item in report.get("inputs", []):
        item["name"] = Path(item["name"]).relative_to(ROOT).as_posix()
    _relative_paths(report)
    return report


def _relative_paths(value: object) -> None:
    """Every evidence ``path`` in the report (diagnoses, symptoms, relays, observations, the hang's rows and
    cause, unrecognised items), made relative to the checkout: the golden file is the same in every clone."""
    if isinstance(value, dict):
        path = value.get("path")
        if isinstance(path, str) and Path(path).is_absolute() and Path(path).is_relative_to(ROOT):
            value["path"] = Path(path).relative_to(ROOT).as_posix()
        for v in value.values():
            _relative_paths(v)
    elif isinstance(value, list):
        for v in value:
            _relative_paths(v)


def current() -> dict[str, dict]:
    return {p.relative_to(ROOT).as_posix(): scan_json(p) for p in fixture_logs()}


if __name__ == "__main__":
    if "--update" not in sys.argv:
        sys.exit("usage: python -m tests.golden.scan_golden --update")
    GOLDEN.write_text(json.dumps(current(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN.relative_to(ROOT)}")
