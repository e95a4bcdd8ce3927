"""Issue 10, items 5-7: what the tool prints and writes about a hostile log.

5. Secrets (``sk-…``, ``hf_…``, ``Bearer``, URL passwords, ``*_TOKEN``/``*_KEY``/``*_SECRET`` values) appear in
   no output format and no file written (relaunch journal 0600, attempt logs 0600); a printed command refers to
   the variable (``--api-key "$VLLM_API_KEY"``), never to ``***``.
6. A captured value with a backtick, HTML or a line break adds no heading, no HTML tag, no list item to Markdown.
7. No escape sequence or control character from a log (or another process) reaches a terminal.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_triage.report.model import Diagnosis, Evidence, FixOut, Report, to_json
from qwen_triage.rulepack.severity import Severity
from qwen_triage.textsafe import clean
from tests.conftest import ROOT

SECRETS = [
    "sk-proj-AAAAbbbbCCCCdddd1234",
    "hf_abcdefghijklmnopqrstu",
    "eyJhbGciOiJIUzI1NiJ9.payload",
    "hunter2pass",
    "eyJsecretsecret123",
    "topsecretkey123",
    "s3cr3tvalue",
    "keyvalue99",
    "tok123456",
]
# ESC c (reset), ESC ( 0 (line drawing), ESC 7 / ESC 8 (cursor save/restore), 8-bit CSI, OSC, DCS, BEL, BS, CR
ESCAPES = "\x1bc\x1b(0\x1b7\x1b8\x9b31m\x1b]0;title\x07\x1bP+q\x1b\\\x08\x0b\x0c\x7f\x85\u202e"
HOSTILE = f"sk-proj-AAAAbbbbCCCCdddd1234 hf_abcdefghijklmnopqrstu `x` <img src=x onerror=alert(1)>\r## forged{ESCAPES}"

LOG_LINES = [
    "(APIServer pid=31) INFO 09-12 13:01:01 [__init__.py:216] Automatically detected platform cuda.",
    "(APIServer pid=31) Traceback (most recent call last):",
    '(APIServer pid=31)   File "/opt/vllm/x.py", line 10, in <module>',
    f"(APIServer pid=31) ValueError: Model architectures ['Qwen {HOSTILE} Bearer eyJhbGciOiJIUzI1NiJ9.payload "
    "MY_SECRET=s3cr3tvalue FOO_KEY=keyvalue99 BAR_TOKEN=tok123456'] are not supported for now. "
    "Supported architectures: ['A']",
    "(APIServer pid=31) ERROR 09-12 13:01:05 [x.py:1] Traceback (most recent call last):",
    "(APIServer pid=31) ERROR 09-12 13:01:05 [x.py:1] RuntimeError: cannot fetch https://bob:hunter2pass@hub.example."
    f"com/m with Authorization: Bearer eyJsecretsecret123 api_key=topsecretkey123 and {HOSTILE}",
]


@pytest.fixture()
def hostile_log(tmp_path: Path) -> Path:
    p = tmp_path / "hostile.log"
    p.write_text("\n".join(LOG_LINES) + "\n", encoding="utf-8")
    return p


def qt(*args: str, **kw) -> subprocess.CompletedProcess[bytes]:  # type: ignore[no-untyped-def]
    return subprocess.run([sys.executable, "-m", "qwen_triage", *args], capture_output=True, cwd=ROOT, timeout=120,
                          **kw)


def no_secret(text: str) -> None:
    for s in SECRETS:
        assert s not in text, s


def no_control(text: str, *, allow_sgr: bool = False) -> None:
    """Nothing but printable text, tab and LF (and, for a colour terminal, rich's own SGR codes)."""
    if allow_sgr:
        text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    bad = [hex(ord(c)) for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F
           or 0x202A <= ord(c) <= 0x202E]
    assert not bad, bad


# --- item 5 and 7 over scan's three formats ----------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_scan_outputs_have_no_secret_and_no_control_character(hostile_log: Path, fmt: str) -> None:
    proc = qt("scan", "--format", fmt, str(hostile_log))
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout.decode("utf-8")
    no_secret(out)
    assert "***" in out
    if fmt == "json":
        report = json.loads(out)
        assert report["diagnoses"][0]["class"] == "model.arch_unsupported"
        assert report["unrecognised"], "the RuntimeError is listed, masked"
    no_control(out)  # JSON too: C0 escaped by JSON itself, C1 and bidi controls by textsafe.json_safe


# --- item 6: Markdown ----------------------------------------------------------------------------------------


def _markdown_structure(md: str) -> tuple[list[str], int, int]:
    """(headings, list items outside fences, html-looking tags outside code)"""
    headings, items, in_fence = [], 0, False
    tags = 0
    for line in md.split("\n"):
        assert "\r" not in line
        if line.strip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if re.match(r"#{1,6} ", line):
            headings.append(line)
        if re.match(r"\s*(?:[-*+]|\d+[.)]) ", line):
            items += 1
        unescaped = re.sub(r"\\[!-/:-@\[-`{-~]", "", line)  # a backslash-escaped character is plain text
        outside_code = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", unescaped)
        tags += len(re.findall(r"<[A-Za-z/]", outside_code))
    assert not in_fence, "a fence was left open"
    return headings, items, tags


def test_markdown_hostile_fact_adds_no_heading_no_tag_no_item(hostile_log: Path) -> None:
    md = qt("scan", "--format", "markdown", str(hostile_log)).stdout.decode()
    headings, items, tags = _markdown_structure(md)
    assert headings == [
        "# qwen-triage report",
        "## 1. This vLLM does not know the model's architecture (error)",
        "## Other errors no rule explains",
    ]
    assert tags == 0
    # class line, facts, two fix steps, one unrecognised entry (the ERROR-prefixed `Traceback …` header
    # is a traceback's structure, not an error of its own): nothing more
    assert items == 5, md


def _hostile_report() -> Report:
    from qwen_triage.report.model import Stats, Symptom

    v = f"a`b``c {HOSTILE}\n1. rm -rf /\n- extra item\n> quote\n| cell |"
    d = Diagnosis(
        class_=f"cls{v}", rule=f"rule{v}", rules=["r"], title=f"title {v}", severity=Severity.error,
        summary=f"sum {v}",
        facts={"k": v}, evidence=[Evidence(path=f"p{v}", line=1, text=f"```\n# not a heading {v}")],
        more_evidence=0, count=1,
        symptoms=[Symptom(class_=f"s{v}", rule="r", title=f"t{v}", severity=Severity.warning, count=1,
                          evidence=[Evidence(path=f"p{v}", line=2, text=v)])],
        fix=[FixOut(step=f"step {v}", action={"type": "set_arg", "safety": "safe", "flag": v})],
        references=[f"ref {v}"],
    )
    return Report(diagnoses=[d], notes=[f"note {v}"], stats=Stats(lines=1, bytes=1, seconds=0.0, rules=1))


def test_markdown_renderers_escape_every_field() -> None:
    from qwen_triage.report.markdown import findings_markdown, md_escape, to_markdown

    report = _hostile_report()
    headings, items, tags = _markdown_structure(to_markdown(report))
    assert headings[0] == "# qwen-triage report" and len(headings) == 2 and headings[1].startswith("## 1. title")
    assert tags == 0
    assert items == 4  # class line, facts, one symptom, one fix step
    lines = findings_markdown(report.diagnoses, report.observations, report.notes)
    headings, items, tags = _markdown_structure("\n".join(lines))
    assert len(headings) == 3 and tags == 0  # Findings, the diagnosis, Notes
    assert items == 5  # evidence, explains, fix, rule, the note
    assert "\n" not in md_escape("a\r\nb\rc") and "\r" not in md_escape("a\r\nb\rc")
    assert md_escape("# h").startswith("\\#") and md_escape("1. x").startswith("1\\.")
    assert md_escape("<img src=x onerror=alert(1)>") == "\\<img src=x onerror=alert(1)\\>"


def test_eval_markdown_escapes_ids() -> None:
    from qwen_triage.authoring.eval_render import eval_markdown
    from qwen_triage.authoring.evaluate import EvalResult

    fields = EvalResult.model_fields if hasattr(EvalResult, "model_fields") else {}
    if "misses" not in fields:
        pytest.skip("EvalResult shape changed")
    result = EvalResult.model_construct(
        per_class={}, misses=[type("M", (), {"id": "x\n## forged <b>", "expect": ["a"], "got": "`y`\r- z",
                                            "inferred": False, "unrecognised": False})()],
        healthy_with_diagnoses=0, healthy_cases=0, silent=0, correct=0, cases=1, accuracy=0.0,
        inferred_correct=0, inferred_cases=0,
    )
    headings, items, tags = _markdown_structure(eval_markdown(result))
    assert headings == [] and tags == 0 and items == 1


# --- item 7: the sanitiser, per sequence ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "seq",
    ["\x1bc", "\x1b(0", "\x1b)B", "\x1b7", "\x1b8", "\x1b#8", "\x1b[2J", "\x1b[?1049h", "\x9b2J", "\x9b31m",
     "\x1b]0;evil title\x07", "\x1b]52;c;ZXZpbA==\x1b\\", "\x9d8;;http://x\x9c", "\x1bP$q\x1b\\", "\x90x\x9c",
     "\x1b_apc\x1b\\", "\x1b^pm\x1b\\", "\x07", "\x08", "\r", "\x00", "\x7f", "\x85", "\x8d", "\u202e", "\u2066",
     "\x1b", "\x1b["],
)
def test_clean_removes_each_sequence(seq: str) -> None:
    out = clean(f"before{seq}…after")  # "…" ends any sequence left open (a terminal would take a letter as final)
    no_control(out)
    assert out == "before…after"
    assert "evil" not in out and "ZXZpbA" not in out


def test_clean_keeps_text_and_optional_newlines() -> None:
    assert clean("plain text, ünïcode ▸ │") == "plain text, ünïcode ▸ │"
    assert clean("a\tb\nc") == "a b c" and clean("a\nb", newlines=True) == "a\nb"


def test_text_renderers_print_no_control_character() -> None:
    import io

    from rich.console import Console

    from qwen_triage.report.text import brief_lines, print_findings, print_text

    report = _hostile_report()
    for color in (False, True):
        buf = io.StringIO()
        console = Console(file=buf, force_terminal=color, color_system="standard" if color else None, width=100)
        print_text(report, console)
        print_findings(console, report.diagnoses, report.observations, report.notes)
        no_control(buf.getvalue(), allow_sgr=color)
    no_control("\n".join(brief_lines(report.diagnoses[0])))


def test_relaunch_prints_no_control_character_from_a_port_holder() -> None:
    """`relaunch` prints the command line of a process holding the port: it goes through the same sanitiser."""
    from qwen_triage.runner.render import command_text
    from qwen_triage.runner.vllm.argv import parse_vllm_argv

    launch = parse_vllm_argv(["vllm", "serve", f"/m{ESCAPES}", "--api-key", "k3y-value"])
    no_control(command_text(launch, {"X": f"v{ESCAPES}"}))


# --- item 5: the working command, the journal, attempt logs ------------------------------------------------


def test_command_refers_to_the_variable_not_to_a_mask() -> None:
    from qwen_triage.runner.render import command_text
    from qwen_triage.runner.vllm.argv import parse_vllm_argv

    launch = parse_vllm_argv(["vllm", "serve", "/m", "--api-key", "sk-proj-AAAAbbbbCCCCdddd1234", "--port", "8000"])
    text = command_text(launch, {"HF_TOKEN": "hf_abcdefghijklmnopqrstu", "NCCL_DEBUG": "INFO"})
    no_secret(text)
    assert "***" not in text
    assert '--api-key "$VLLM_API_KEY"' in text and 'HF_TOKEN="$HF_TOKEN"' in text and "NCCL_DEBUG=INFO" in text
    # the key came from a variable of the environment: that one is named
    launch = parse_vllm_argv(["vllm", "serve", "/m", "--api-key=abc123xyz"])
    assert command_text(launch, {"MY_API_KEY": "abc123xyz"}).endswith('--api-key="$MY_API_KEY"')


def test_journal_and_attempt_log_hold_no_secret_and_are_private(tmp_path: Path) -> None:
    from qwen_triage.live.run_log import open_log
    from qwen_triage.runner.runlog import AttemptRecord, DiagnosisBrief, Journal, RunRecord
    from qwen_triage.runner.vllm.diff import Change

    journal = Journal(tmp_path / "journal.jsonl")
    argv = ["vllm", "serve", "/m", "--api-key", "sk-proj-AAAAbbbbCCCCdddd1234", "--hf-token=hf_abcdefghijklmnopqrstu"]
    env = {"HF_TOKEN": "hf_abcdefghijklmnopqrstu", "MY_SECRET": "s3cr3tvalue"}
    assert journal.append(AttemptRecord(
        run="r", attempt=1, key="k", argv=argv, env=env, started="t", outcome="exited",
        changes=[Change(kind="arg", name="--api-key", before="tok123456", after="keyvalue99", reason="r"),
                 Change(kind="env", name="FOO_KEY", before=None, after="keyvalue99", reason="r")],
        diagnoses=[DiagnosisBrief(class_="c", rule="r", title="t", severity="error",
                                  facts={"url": "https://bob:hunter2pass@h/x"})],
        notes=["stall: last line: Authorization: Bearer eyJsecretsecret123"],
    ))
    assert journal.append(RunRecord(kind="run-end", run="r", time="t", final_argv=argv, final_env=env,
                                    instructions=["export api_key=topsecretkey123"]))
    text = journal.path.read_text()
    no_secret(text)
    assert stat.S_IMODE(journal.path.stat().st_mode) == 0o600
    fd, path = open_log(tmp_path / "attempt-1.log")
    os.close(fd)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    old = tmp_path / "attempt-2.log"
    old.write_text("x")
    old.chmod(0o644)
    fd, path = open_log(old)
    os.close(fd)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_preflight_findings_are_masked() -> None:
    from qwen_triage.engine.check_finding import CheckFinding
    from qwen_triage.preflight.findings import to_report

    f = CheckFinding(
        class_id="launch.port_in_use", rule="preflight.x", title="port taken", severity="error",
        summary="held by vllm serve --api-key sk-proj-AAAAbbbbCCCCdddd1234",
        facts={"cmdline": "python -m x --token hf_abcdefghijklmnopqrstu"},
        evidence=[Evidence(path="ps", line=0, text="HF_TOKEN=hf_abcdefghijklmnopqrstu vllm")],
        fix=[FixOut(step="kill the one with Bearer eyJsecretsecret123")],
    )
    diags, _ = to_report([f])
    no_secret(to_json(diags[0]))


def test_run_live_panels_summary_and_report_hold_no_secret(tmp_path: Path) -> None:
    log, report = tmp_path / "run.log", tmp_path / "report.md"
    script = "import sys\n" + "".join(f"print({line!r}, flush=True)\n" for line in LOG_LINES) + "sys.exit(1)\n"
    proc = qt("run", "--stall", "0", "--log", str(log), "--report", str(report), "--",
              sys.executable, "-c", script, "--api-key", "tok123456")
    err = proc.stderr.decode()
    assert "diagnosis" in err
    no_secret(err)
    no_control(err)
    no_secret(report.read_text())
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert "sk-proj-AAAAbbbbCCCCdddd1234" in log.read_text()  # the log is the child's output, byte for byte


def test_relaunch_printer_masks_and_sanitises_every_line() -> None:
    import io

    from qwen_triage.runner.render import Printer

    buf = io.StringIO()
    p = Printer(buf)
    p.say(f"port 8000 is held by pid 7: vllm serve /m --api-key sk-proj-AAAAbbbbCCCCdddd1234 {ESCAPES}")
    p.item(f"found: HF_TOKEN=hf_abcdefghijklmnopqrstu{ESCAPES}\nsecond line")
    p.line('HF_TOKEN="$HF_TOKEN" vllm serve /m --api-key "$VLLM_API_KEY"')
    out = buf.getvalue()
    no_secret(out)
    no_control(out)
    assert out.endswith('HF_TOKEN="$HF_TOKEN" vllm serve /m --api-key "$VLLM_API_KEY"\n')


def test_preflight_check_model_outputs_escape_hostile_file_names() -> None:
    import io

    from qwen_triage.preflight.model.check import CheckModelResult
    from qwen_triage.preflight.model.scan_state import FileReport
    from qwen_triage.preflight.render import emit

    bad = f"x`|\n## forged <img src=x onerror=alert(1)>{ESCAPES}.safetensors"
    result = CheckModelResult(path=f"/m/{bad}", format="safetensors",
                              files=[FileReport(name=bad, kind="safetensors", bytes=1, ok=False, detail=bad)],
                              notes=[bad])
    for fmt in ("text", "markdown", "json"):
        buf = io.StringIO()
        emit(result, fmt, buf)
        out = buf.getvalue()
        no_control(out)
        if fmt == "markdown":
            headings, _, tags = _markdown_structure(out)
            assert len(headings) == 3 and tags == 0, headings  # check-model, Findings, Notes
