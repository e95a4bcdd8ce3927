"""The command line: exit codes, formats, stdin, schema, docs page."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

DATA = Path(__file__).parents[1] / "data"
SEGV = b"TESTSEGV signal: segmentation fault\n"


def qt(*args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "qwen_triage", *args], capture_output=True, input=input, timeout=300, cwd=ROOT
    )


def test_exit_0_on_clean_log_and_1_on_diagnosis(tmp_path) -> None:
    clean = tmp_path / "clean.log"
    clean.write_text("INFO 11-29 10:00:01 [api_server.py:1] all good\n")
    assert qt("scan", str(clean)).returncode == 0
    bad = tmp_path / "bad.log"
    bad.write_bytes(SEGV)
    proc = qt("scan", "--rules", str(DATA / "rules"), str(bad))
    assert proc.returncode == 1
    assert b"test segv" in proc.stdout


def test_stdin_and_dash(tmp_path) -> None:
    for args in (("scan", "--rules", str(DATA / "rules"), "--format", "json"),
                 ("scan", "--rules", str(DATA / "rules"), "--format", "json", "-")):
        proc = qt(*args, input=SEGV)
        assert proc.returncode == 1
        report = json.loads(proc.stdout)
        assert report["diagnoses"][0]["evidence"][0]["path"] == "<stdin>"


def test_json_contract_fields(tmp_path) -> None:
    p = tmp_path / "x.log.gz"
    p.write_bytes(gzip.compress(SEGV * 7))
    report = json.loads(qt("scan", "--rules", str(DATA / "rules"), "--format", "json", str(p)).stdout)
    assert report["schema_version"] == 3
    assert report["hang"] is None  # one process, no multi-rank job (engine.hang)
    d = report["diagnoses"][0]
    for key in ("class", "rule", "title", "severity", "summary", "facts", "evidence", "count", "symptoms", "fix"):
        assert key in d
    assert d["count"] == 7 and len(d["evidence"]) == 5 and d["more_evidence"] == 2
    for key in ("lines", "bytes", "seconds", "rules"):
        assert key in report["stats"]
    assert report["stats"]["lines"] == 7


def test_markdown_report(tmp_path) -> None:
    p = tmp_path / "x.log"
    p.write_bytes(b"noise\n" + SEGV)
    out = qt("scan", "--rules", str(DATA / "rules"), "--format", "markdown", str(p)).stdout.decode()
    assert out.startswith("# qwen-triage report")
    assert "## 1. test segv (critical)" in out and f"{p}:2:" in out


def test_missing_file_and_bad_usage_exit_2(tmp_path) -> None:
    proc = qt("scan", str(tmp_path / "nope.log"))
    assert proc.returncode == 2 and proc.stderr.decode().count("\n") == 1 and b"no such file" in proc.stderr
    assert qt("scan", "--format", "yaml").returncode == 2


def test_no_progress_bar_on_a_pipe(tmp_path) -> None:
    p = tmp_path / "big.log"
    p.write_bytes(b"x" * 100 + b"\n" * 1)
    proc = qt("scan", str(p))
    assert proc.stderr == b""


def test_schema_command_prints_json_schema() -> None:
    schema = json.loads(qt("schema").stdout)
    assert schema["title"] == "Report"
    assert "diagnoses" in schema["properties"]
    # schema 3: where the message catalogue placed a line (engine.locate)
    assert set(schema["$defs"]["PrintedBy"]["properties"]) >= {"program", "releases", "file", "function"}
    assert "printed_by" in schema["$defs"]["Unrecognised"]["properties"]
    assert {"because", "printed_by"} <= set(schema["$defs"]["Diagnosis"]["properties"])


def test_rules_page_is_current() -> None:
    page = ROOT / "docs" / "rules.md"
    generated = qt("rules", "list", "--format", "markdown").stdout.decode()
    assert page.read_text() == generated, "regenerate: qwen-triage rules list --format markdown > docs/rules.md"


def test_rules_list_json_and_show() -> None:
    listing = json.loads(qt("rules", "list", "--format", "json").stdout)
    ids = [r["id"] for c in listing["classes"] for r in c["rules"]]
    assert "vllm.tp-heads-indivisible" in ids
    shown = qt("rules", "show", "vllm.tp-heads-indivisible")
    assert shown.returncode == 0 and b"config.tp_indivisible" in shown.stdout
    assert qt("rules", "show", "no.such-rule").returncode == 2


def test_clean_report_in_a_pipe_is_what_rich_would_write(tmp_path) -> None:
    import io

    from rich.console import Console

    from qwen_triage.engine.scanner import compile_pack
    from qwen_triage.engine.scanner import scan_paths
    from qwen_triage.report.emit import plain_summary
    from qwen_triage.report.text import print_text

    log = tmp_path / "clean.log"
    log.write_text("INFO 11-29 10:00:01 [api_server.py:1] all good\n")
    report = scan_paths([str(log)], compile_pack())
    rich_out = io.StringIO()
    print_text(report, Console(file=rich_out, highlight=False, soft_wrap=False))
    assert plain_summary(report) == rich_out.getvalue()
    report.notes.append("a note")
    assert plain_summary(report) is None  # anything rich lays out goes through rich
