"""An input with nothing in it — empty stdin, an empty `journalctl -o json` stream, journalctl's own
`-- No entries --` — says there was nothing to read, never "No diagnosis" (which reads as healthy); the exit
status stays the documented 0 (issue 18 §3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_triage.engine.sources import holds_nothing
from tests.conftest import ROOT

FAKEBIN = ROOT / "fixtures" / "live" / "fakebin"


def qt(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qwen_triage", *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env=env)


def test_journalctl_markers_and_blank_lines_hold_nothing() -> None:
    assert holds_nothing(b"") and holds_nothing(b"-- No entries --\n") and holds_nothing(b"\n\n")
    assert holds_nothing(b"-- Boot 3f2a9c --\n-- No entries --\n")
    assert not holds_nothing(b"-- No entries --\nDec 01 10:00:00 host ollama[1]: listening\n")
    assert not holds_nothing(b"--- a markdown rule, not journalctl ---x\n")


@pytest.mark.parametrize("stdin", ["", "-- No entries --\n"], ids=["empty", "no-entries"])
def test_scan_of_nothing_says_so_in_every_format(stdin: str) -> None:
    text = qt("scan", stdin=stdin)
    assert text.returncode == 0, text.stderr  # README: 0 when there is no diagnosis
    assert text.stdout.startswith("Nothing to read:") and "No diagnosis" not in text.stdout
    assert "says nothing about the server's health" in text.stdout
    md = qt("scan", "--format", "markdown", stdin=stdin).stdout
    assert "**Nothing to read**" in md and "No diagnosis" not in md
    report = json.loads(qt("scan", "--format", "json", stdin=stdin).stdout)
    assert report["nothing_read"] is True and report["diagnoses"] == [] and report["notes"]


def test_a_log_with_lines_is_read_even_when_clean() -> None:
    report = json.loads(qt("scan", "--format", "json", stdin="INFO 11-29 10:00:01 [api_server.py:1] ready\n").stdout)
    assert report["nothing_read"] is False
    assert qt("scan", stdin="INFO 11-29 10:00:01 [api_server.py:1] ready\n").stdout.startswith("No diagnosis:")


def test_the_journal_command_with_no_entries_says_there_was_nothing_to_read(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("")
    journal = tmp_path / "journal"
    (journal / "machine-id").mkdir(parents=True)  # a journal is there: it only has no entries in the window
    env = {**os.environ, "PATH": f"{FAKEBIN}:{os.environ['PATH']}", "FAKE_JOURNALCTL_DATA": str(empty),
           "FAKE_JOURNALCTL_ARGS": str(tmp_path / "args"), "QWEN_TRIAGE_JOURNAL_DIRS": str(journal)}
    proc = qt("journal", "ollama", "--since", "-10min", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Nothing to read:") and "the journal has no entries for ollama" in proc.stdout
    report = json.loads(qt("journal", "ollama", "--since", "-10min", "--format", "json", env=env).stdout)
    assert report["nothing_read"] is True
