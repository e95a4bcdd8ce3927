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
    for d in report.get("diagnoses", []) + report.get("observations", []):
        for e in d.get("evidence", []):
            e["path"] = Path(e["path"]).relative_to(ROOT).as_posix()
        for s in d.get("symptoms", []):
            for e in s.get("evidence", []):
                e["path"] = Path(e["path"]).relative_to(ROOT).as_posix()
    cause = (report.get("hang") or {}).get("cause")
    for e in (cause or {}).get("evidence", []) + [e for s in (cause or {}).get("symptoms", []) for e in s["evidence"]]:
        e["path"] = Path(e["path"]).relative_to(ROOT).as_posix()
    for row in (report.get("hang") or {}).get("ranks", []):
        if row.get("last_line"):
            row["last_line"]["path"] = Path(row["last_line"]["path"]).relative_to(ROOT).as_posix()
    for u in report.get("unrecognised", []):
        u["evidence"]["path"] = Path(u["evidence"]["path"]).relative_to(ROOT).as_posix()
    return report


def current() -> dict[str, dict]:
    return {p.relative_to(ROOT).as_posix(): scan_json(p) for p in fixture_logs()}


if __name__ == "__main__":
    if "--update" not in sys.argv:
        sys.exit("usage: python -m tests.golden.scan_golden --update")
    GOLDEN.write_text(json.dumps(current(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN.relative_to(ROOT)}")
