"""Plain text on a pipe or in a file keeps every line whole (grep finds it); only a terminal gets the wrapped,
boxed layout (issue 18 §3)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

EXAMPLE = ROOT / "fixtures" / "logs" / "examples" / "qwen32b-tp6-vllm.log"
UNKNOWN = (
    "ERROR 11-29 10:00:05 [engine.py:88] Widget pool drained on host 10.0.0.2:4455 while the frobnicator was "
    "rebalancing shard 17 of 24 across the east and west racks after the second retry\n"
)


def scan(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    env = {**os.environ, "COLUMNS": "80"}
    return subprocess.run([sys.executable, "-m", "qwen_triage", "scan", *args], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120, env=env)


def test_a_long_evidence_line_comes_out_whole_on_a_pipe() -> None:
    evidence = EXAMPLE.read_text().splitlines()[24]  # the diagnosed line, far longer than 80 columns
    assert len(evidence) > 160
    out = scan(str(EXAMPLE)).stdout
    lines = out.splitlines()
    assert any(line.endswith(f"{EXAMPLE}:25: {evidence}") for line in lines), out
    assert not any(ch in out for ch in "╭│╰"), "no box off a terminal"
    grep = subprocess.run(["grep", "-F", "must be divisible by tensor parallel size (6)"], input=out,
                          capture_output=True, text=True)
    assert f"{EXAMPLE}:25:" in grep.stdout  # the path and the words on one line


def test_an_unrecognised_line_comes_out_whole_in_a_file(tmp_path: Path) -> None:
    log = tmp_path / "unknown.log"
    log.write_text(UNKNOWN)
    report = tmp_path / "report.txt"
    with report.open("w") as f:
        assert scan(str(log), stdout=f).returncode == 0
    assert f"{log}:1: {UNKNOWN.strip()}" in report.read_text().splitlines()[1]


def test_a_terminal_still_gets_the_boxed_layout() -> None:
    pty = pytest.importorskip("pty")
    try:
        master, slave = pty.openpty()
    except OSError as exc:
        pytest.skip(f"no pseudo-terminal here: {exc}")
    chunks = []
    try:
        proc = subprocess.Popen([sys.executable, "-m", "qwen_triage", "scan", str(EXAMPLE)], stdout=slave,
                                stderr=subprocess.DEVNULL, cwd=ROOT, env={**os.environ, "COLUMNS": "80"})
        os.close(slave)
        while True:  # read as it writes: a pseudo-terminal's buffer is small
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its side
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=120)
    finally:
        os.close(master)
    assert proc.returncode == 1
    out = b"".join(chunks).decode("utf-8", "replace")
    assert "╭" in out and "│" in out  # a panel, wrapped to the terminal's width
