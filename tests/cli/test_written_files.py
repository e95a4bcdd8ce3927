"""Every file the tool writes goes through the one atomic writer, with the mode the docs promise.

A report, a run's final report, drafted rules and a GPU snapshot quote logs, environments and
command lines: they are the owner's alone (0600), also when they replace a file someone created
0644 before (``O_TRUNC`` keeps an existing file's mode; a replacement by rename does not).
"""

from __future__ import annotations

import ast
import os
import stat
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from qwen_triage.cli.main import cli
from tests.conftest import ROOT

SNAPSHOT = ROOT / "fixtures" / "preflight" / "snapshot-6x4090-pcie.json"
LOG = "ERROR 11-29 08:31:57 [x.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
UNKNOWN = "ERROR 11-29 08:31:57 [x.py:1] FrobnicatorError: the widget could not be frobbed at all\n"


def _existing_0644(path: Path) -> Path:
    path.write_text("an older file\n")
    os.chmod(path, 0o644)
    return path


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_report_out_replaces_an_existing_0644_file_with_a_private_one(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(LOG)
    out = _existing_0644(tmp_path / "report.md")
    res = CliRunner().invoke(cli, ["report", str(log), "--gpu-snapshot", str(SNAPSHOT), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert _mode(out) == 0o600 and out.read_text().startswith("# qwen-triage report")


def test_run_report_is_private(tmp_path: Path) -> None:
    report = _existing_0644(tmp_path / "final.json")
    cp = subprocess.run([sys.executable, "-m", "qwen_triage", "run", "--stall", "0", "--log", str(tmp_path / "r.log"),
                         "--report", str(report), "--", sys.executable, "-c", f"print({LOG!r})"],
                        capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert report.read_text().lstrip().startswith("{"), cp.stderr
    assert _mode(report) == 0o600


def test_suggested_rules_are_private(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(UNKNOWN)
    out = _existing_0644(tmp_path / "drafts.yaml")
    res = CliRunner().invoke(cli, ["rules", "suggest", str(log), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "rules:" in out.read_text() and _mode(out) == 0o600


def test_a_recorded_gpu_snapshot_is_private(tmp_path: Path) -> None:
    from qwen_triage.preflight.machine.nvml import ReplayProbe, record

    out = _existing_0644(tmp_path / "box.json")
    snap = ReplayProbe(SNAPSHOT).snapshot()
    record(snap, out)
    assert _mode(out) == 0o600 and ReplayProbe(out).snapshot().gpus == snap.gpus


# files written as they grow (a run's log, the relaunch journal, an attempt's log) are opened 0600 and
# made private where they are; everything else the package replaces goes through atomicfile.write_atomic
GROWING = {"qwen_triage/live/run_log.py"}


def test_nothing_in_the_package_replaces_a_file_but_the_atomic_writer() -> None:
    found = []
    for path in sorted((ROOT / "qwen_triage").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "qwen_triage/atomicfile.py" or rel in GROWING:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("write_text", "write_bytes", "O_TRUNC"):
                found.append(f"{rel}:{node.lineno} {node.attr}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in ("open",
                                                                                                         "fdopen"):
                modes = [a.value for a in node.args[1:2] if isinstance(a, ast.Constant)]
                modes += [k.value.value for k in node.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)]
                if any(isinstance(m, str) and ("w" in m or "x" in m) for m in modes):
                    found.append(f"{rel}:{node.lineno} open({modes[0]!r})")
    assert found == [], found
