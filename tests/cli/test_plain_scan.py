"""`qwen-triage scan PATH…` with no option runs without click (cli.scan_command), and is the same command.

The plain path takes every option at ScanOptions' defaults: they must be the click options' defaults, and
the two paths must write the same report, the same remarks and the same status.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import fields

import pytest

from qwen_triage.cli.entry import plain_scan_paths
from qwen_triage.cli.main import cli
from qwen_triage.cli.scan_command import DEFAULT_FORMAT
from qwen_triage.engine.scan import ScanOptions
from tests.conftest import FIXTURES, ROOT

CLI_ONLY = {"paths", "per_input"}  # an argument, and what --jobs / --format jsonl make of it


def test_the_plain_scan_takes_the_options_defaults() -> None:
    defaults = dict(cli.commands["scan"].make_context("scan", []).params)  # what click gives with no option
    assert defaults.pop("paths") == ()
    assert defaults.pop("fmt") == DEFAULT_FORMAT
    assert defaults.pop("follow") is False
    option_defaults = {f.name: f.default for f in fields(ScanOptions) if f.name not in CLI_ONLY}
    assert {k: tuple(v) if isinstance(v, list) else v for k, v in defaults.items()} == option_defaults


@pytest.mark.parametrize(("args", "paths"), [
    (["scan"], ()),
    (["scan", "a.log", "-"], ("a.log", "-")),
    (["scan", "--format", "json", "a.log"], None),
    (["scan", "a.log", "--", "b"], None),
    (["scan", "-h"], None),
    (["rules", "list"], None),
    ([], None),
])
def test_only_a_command_line_of_paths_is_plain(args: list[str], paths: tuple[str, ...] | None) -> None:
    assert plain_scan_paths(args) == paths


def _scan(args: list[str], tmp_path) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "qwen_triage", "scan", *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("log", ["examples/qwen32b-tp6-vllm.log", None, "missing.log"], ids=["found", "clean", "missing"])
def test_plain_and_parsed_scans_are_the_same_command(tmp_path, log: str | None) -> None:  # type: ignore[no-untyped-def]
    if log is None:
        path = tmp_path / "healthy.log"
        path.write_text("INFO:     Application startup complete.\n")
    else:
        path = FIXTURES / log if log != "missing.log" else tmp_path / log
    plain = _scan([str(path)], tmp_path)
    parsed = _scan(["--engine", "auto", str(path)], tmp_path)  # any option: through click
    timeless = [(code, re.sub(r" in \d+\.\d+s", "", out), err) for code, out, err in (plain, parsed)]
    assert timeless[0] == timeless[1]
    assert plain[0] == {"found": 1, "clean": 0, "missing": 2}[{None: "clean", "missing.log": "missing"}.get(log, "found")]
