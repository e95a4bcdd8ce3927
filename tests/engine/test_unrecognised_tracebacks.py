"""What "errors no rule explains" holds: final exceptions, error lines and stalls, never a traceback's structure,
never a relay line called benign, never the wrapper of an error already diagnosed (issue 18 §3); a relay line only
when no diagnosis holds it, as a relay (issue 26 §5, tests/engine/test_relay_lines.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_triage.engine.unrecognised import CUT_TRACEBACK, NATIVE_BACKTRACE
from tests.conftest import ROOT

P = "(EngineCore_0 pid=7) ERROR 11-29 10:00:01 [core.py:700] "  # vLLM's prefix, on every line of a traceback
QUUX_LOG = f"""\
(APIServer pid=1) INFO 11-29 10:00:00 [api_server.py:1043] vLLM API server version 0.11.0
{P}EngineCore failed to start.
{P}Traceback (most recent call last):
{P}  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 691, in run_engine_core
{P}    engine_core = EngineCoreProc(*args, **kwargs)
{P}                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
{P}  File "/opt/venv/lib/python3.12/site-packages/quux/loader.py", line 42, in load
{P}    raise QuuxError(f"quux table {{name}} is not aligned to {{align}} bytes")
{P}quux.loader.QuuxError: quux table emb is not aligned to 64 bytes
(EngineCore_0 pid=7) Process EngineCore_0:
(APIServer pid=1) Traceback (most recent call last):
(APIServer pid=1)   File "/opt/venv/bin/vllm", line 10, in <module>
(APIServer pid=1)     sys.exit(main())
(APIServer pid=1)   File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/utils.py", line 870, in wait_for_engine_startup
(APIServer pid=1)     raise RuntimeError(
(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {{}}
"""


def qt(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qwen_triage", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def scan_json(*args: str) -> dict:
    proc = qt("scan", "--format", "json", *args)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture()
def quux_log(tmp_path: Path) -> Path:
    p = tmp_path / "quux.log"
    p.write_text(QUUX_LOG)
    return p


def test_an_error_prefixed_traceback_lists_only_its_exception(quux_log: Path) -> None:
    report = scan_json(str(quux_log))
    assert report["diagnoses"] == []
    templates = [u["template"] for u in report["unrecognised"] if u["kind"] != "relay"]
    assert templates == ["quux.loader.QuuxError: quux table emb is not aligned to <N> bytes"]
    (item,) = [u for u in report["unrecognised"] if u["kind"] != "relay"]
    assert item["kind"] == "exception" and item["raised_by"] == "quux" and item["evidence"]["line"] == 9
    text = qt("scan", str(quux_log)).stdout
    for noise in ("Traceback (most recent call last)", "raise QuuxError", "engine_core = ", "^^^^"):
        assert noise not in text.split("observations")[0], noise


def test_relay_lines_are_never_called_benign_and_are_listed_as_relays_when_nothing_holds_them(quux_log: Path) -> None:
    report = scan_json(str(quux_log))
    relays = ("EngineCore failed to start", "Engine core initialization failed")
    listed = {r: [u for u in report["unrecognised"] if r in u["evidence"]["text"]] for r in relays}
    # no diagnosis holds them: listed, but as relays, after the error they relay, with what the relay rule says
    assert all(len(items) == 1 and items[0]["kind"] == "relay" for items in listed.values()), listed
    assert report["unrecognised"][0]["kind"] == "exception"
    assert "only relays it" in listed["Engine core initialization failed"][0]["hint"]
    assert report["observations"] == []
    for fmt in ("text", "markdown"):
        out = qt("scan", "--format", fmt, str(quux_log)).stdout
        assert "benign" not in out.lower(), out
        assert "relay" in out
    schema = json.loads(qt("schema").stdout)
    assert "benign" not in schema["properties"]["observations"]["description"]


def test_an_open_traceback_with_nothing_after_it_is_still_reported(tmp_path: Path) -> None:
    """A log cut inside a traceback: its header is all there is, and a failing log is never silent."""
    log = tmp_path / "cut.log"
    log.write_text("".join(QUUX_LOG.splitlines(keepends=True)[:8]))
    (item,) = [u for u in scan_json(str(log))["unrecognised"] if u["kind"] != "relay"]
    assert item["template"] == CUT_TRACEBACK and item["evidence"]["line"] == 3
    # beside a diagnosis (or any other error to list) the header of a cut traceback is noise
    log.write_text(f"(VllmWorker rank=0 pid=9) ERROR 11-29 10:00:00 [x.py:1] ValueError: {HEADS}\n" + log.read_text())
    report = scan_json(str(log))
    assert [d["class"] for d in report["diagnoses"]] == ["config.tp_indivisible"] and report["unrecognised"] == []


_CUT_FRAMES = [
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py", line 180, in build',
    "    async with build_async_engine_client_from_engine_args(",
    "               ^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/utils.py", line 732, in launch_core_engines',
    "    wait_for_engine_startup(",
]


@pytest.mark.parametrize(("lines", "evidence_line"), [
    # the header, printed with no level (vLLM's API server process prints its traceback bare), stands for it
    (["Traceback (most recent call last):", *_CUT_FRAMES], 1),
    # no header at all (the paste starts inside the traceback): the innermost frame among the last lines does
    (_CUT_FRAMES[3:] + ["    ^^^^^^^^^^^^^^^^^^^^^^^^"], 1),
    (_CUT_FRAMES + ["    ^^^^^^^^^^^^^^^^^^^^^^^^"], 4),
], ids=["header", "no-header-short", "no-header"])
def test_a_traceback_the_input_ends_inside_is_never_silent(tmp_path: Path, lines: list[str],
                                                           evidence_line: int) -> None:
    """A paste that stops inside a traceback is listed as a traceback the input ends inside, placed at the innermost
    frame it shows (read from the input's last lines), instead of an empty report, whether or not its header was
    seen and at whatever level; once the exception line is there, that is what is listed. Both prefilters say the
    same."""
    log = tmp_path / "cut.log"
    log.write_text("".join(f"(APIServer pid=7) {line}\n" for line in lines))
    for engine in ("hyperscan", "literal"):
        report = scan_json("--engine", engine, str(log))
        assert report["diagnoses"] == []
        (item,) = report["unrecognised"]
        assert item["template"] == CUT_TRACEBACK and item["kind"] == "error"
        assert item["evidence"]["line"] == evidence_line
        assert item["printed_by"]["file"] == "vllm/v1/engine/utils.py"
    log.write_text(log.read_text() + "(APIServer pid=7) quux.QuuxError: quux table emb is not aligned to 64 bytes\n")
    assert [u["template"] for u in scan_json(str(log))["unrecognised"]] == [
        "quux.QuuxError: quux table emb is not aligned to <N> bytes"]


def test_code_like_last_lines_with_no_frame_above_them_say_nothing(tmp_path: Path) -> None:
    """A printed configuration ends in indented assignments, as a traceback's code does: with no frame among the
    last lines, it is no traceback the input ends inside."""
    config = tmp_path / "config.log"
    config.write_text("INFO 11-29 10:00:00 [config.py:1] engine config:\n    max_model_len = 4096\n"
                      "    tensor_parallel_size = 2\n")
    assert scan_json(str(config))["unrecognised"] == []


def test_the_readme_example_lists_no_wrapper_of_its_diagnosis() -> None:
    report = scan_json(str(ROOT / "fixtures" / "logs" / "examples" / "qwen32b-tp6-vllm.log"))
    assert [d["class"] for d in report["diagnoses"]] == ["config.tp_indivisible"]
    assert report["unrecognised"] == []  # the ValidationError is the wrapper of the diagnosed line under it
    text = qt("scan", str(ROOT / "fixtures" / "logs" / "examples" / "qwen32b-tp6-vllm.log")).stdout
    assert "ValidationError" not in text and "other errors no rule explains" not in text


HEADS = "Total number of attention heads (40) must be divisible by tensor parallel size (6)."


def test_a_chained_wrapper_of_a_diagnosed_exception_is_part_of_it(tmp_path: Path) -> None:
    log = tmp_path / "chain.log"
    log.write_text(
        f"{P}Traceback (most recent call last):\n"
        f'{P}  File "/opt/venv/lib/python3.12/site-packages/vllm/config/parallel.py", line 300, in verify\n'
        f"{P}    raise ValueError(\n"
        f"{P}ValueError: {HEADS}\n"
        f"{P}\n"
        f"{P}The above exception was the direct cause of the following exception:\n"
        f"{P}\n"
        f"{P}Traceback (most recent call last):\n"
        f'{P}  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 691, in run_engine_core\n'
        f"{P}    raise FrobError('engine setup did not complete') from exc\n"
        f"{P}vllm.v1.FrobError: engine setup did not complete\n"
        "(EngineCore_1 pid=8) ERROR 11-29 10:00:02 [core.py:700] vllm.v1.BarError: the bar is closed\n"
    )
    report = scan_json(str(log))
    assert [d["class"] for d in report["diagnoses"]] == ["config.tp_indivisible"]
    # pid 7's FrobError was raised from the diagnosed error; pid 8's BarError has no such chain: it stays listed
    (item,) = report["unrecognised"]
    assert item["exception"] == "BarError" and item["evidence"]["line"] == 12


ANCHORED_RULE = """\
rules:
  - id: local.disk-on-fire
    class: node.storage_error
    title: A disk is on fire
    severity: error
    sources: [any]
    match:
      any:
        - '^DiskFireError: disk on fire in bay (?P<bay>\\d+)'
    extract: {bay: int}
    explain: "Bay {bay} is on fire."
    examples:
      match: ["DiskFireError: disk on fire in bay 7"]
      no_match: ["DiskFireError: disk cool in bay 7"]
"""


def test_any_exception_that_quotes_a_diagnosed_message_is_part_of_it(tmp_path: Path) -> None:
    """Not a ValidationError special case: a wrapper that carries the diagnosed text, anywhere in the log."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "local.yaml").write_text(ANCHORED_RULE)
    log = tmp_path / "wrap.log"
    log.write_text(
        "DiskFireError: disk on fire in bay 7 of the west rack\n"
        "INFO 11-29 10:00:05 [engine.py:80] unrelated progress\n"
        "storage.StorageFailure: giving up: DiskFireError: disk on fire in bay 7 of the west rack\n"
        "ERROR 11-29 10:00:05 [engine.py:88] Widget pool drained on host 10.0.0.2:4455\n"
    )
    report = scan_json("--rules", str(rules), str(log))
    assert [d["class"] for d in report["diagnoses"]] == ["node.storage_error"]
    # the wrapper is part of the diagnosis; an error that quotes nothing diagnosed stays listed
    assert [u["template"] for u in report["unrecognised"]] == ["Widget pool drained on host <IP>"]


def test_detail_lines_under_an_exception_belong_to_it_and_a_line_of_its_own_ends_them(tmp_path: Path) -> None:
    log = tmp_path / "detail.log"
    log.write_text(
        f"{P}pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig\n"
        f"{P}  Value error, the frobnicator knob must be set [type=value_error, input_value=3, input_type=int]\n"
        f"{P}ERROR widget pool drained\n"
        f"{P}  Value error, {HEADS} [type=value_error, input_value=ArgsKwargs((), {{}}), input_type=ArgsKwargs]\n"
    )
    report = scan_json(str(log))
    assert [d["class"] for d in report["diagnoses"]] == ["config.tp_indivisible"]
    # the first detail line is the ValidationError's own (not listed on its own); the diagnosed detail line
    # sits under the error line, which carries it; that line of its own ended the ValidationError's details,
    # so the ValidationError does not carry the diagnosed line and stays listed
    (item,) = report["unrecognised"]
    assert item["exception"] == "ValidationError" and item["evidence"]["line"] == 1
    assert "frobnicator" not in json.dumps(report["unrecognised"])


# A process that aborts prints its own native stack (glibc's backtrace_symbols, as llama.cpp's ggml_abort does), and a
# paste may stop there, its error line above the part copied.
_NATIVE_STACK = [
    "/opt/quux/lib/libquux.so.0(_ZN4quux6decodeERK5batch+0x36f)[0x7f1516261dcf]",
    "/opt/quux/lib/libquux.so.0(quux_decode+0xc)[0x7f151626352c]",
    "/lib/x86_64-linux-gnu/libc.so.6(+0x29d90)[0x7f1515b49d90]",
    "/lib/x86_64-linux-gnu/libc.so.6(__libc_start_main+0x80)[0x7f1515b49e40]",
    "/opt/quux/bin/quux-server[0x40107e]",
]


@pytest.mark.parametrize("engine", ["hyperscan", "literal"])
def test_an_input_that_ends_in_a_native_stack_is_never_silent(tmp_path: Path, engine: str) -> None:
    """The input's last lines are frames of a native stack: the process died there, and that is listed (placed at
    the first frame among the last lines) where nothing else is said; one frame-like last line alone is not a
    stack, and beside a diagnosis the stack is the diagnosed failure's."""
    log = tmp_path / "stack.log"
    head = "Jun 05 09:22:29 host1 quux[2062701]: "
    log.write_text("".join(f"{head}{line}\n" for line in ["quux-server starting, 2 devices", *_NATIVE_STACK]))
    report = scan_json("--engine", engine, str(log))
    assert report["diagnoses"] == []
    (item,) = report["unrecognised"]
    assert (item["template"], item["kind"], item["evidence"]["line"]) == (NATIVE_BACKTRACE, "error", 3)
    log.write_text(f"{head}quux-server starting, 2 devices\n{head}{_NATIVE_STACK[-1]}\n")
    assert scan_json("--engine", engine, str(log))["unrecognised"] == []
    log.write_text(f"{head}ValueError: {HEADS}\n" + "".join(f"{head}{line}\n" for line in _NATIVE_STACK))
    report = scan_json("--engine", engine, str(log))
    assert [d["class"] for d in report["diagnoses"]] == ["config.tp_indivisible"] and report["unrecognised"] == []


# The same traceback as QUUX_LOG's engine core, as logs cut it (issue 27): its source lines are its body, never
# errors of their own, whether the header ends another line, is gone, or the frames lost their indentation.
FRAMES = [
    '  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 691, in run_engine_core',
    "    engine_core = EngineCoreProc(*args, **kwargs)",
    '  File "/opt/venv/lib/python3.12/site-packages/quux/loader.py", line 42, in load',
    "    self.table = load_table(name,",
    "quux.loader.QuuxError: quux table emb is not aligned to 64 bytes",
]
CUT_TRACEBACKS = {
    "header-ends-a-line": [f"{P}EngineCore hit an exception: Traceback (most recent call last):",
                           *(P + f for f in FRAMES)],
    "no-header": [P + f for f in FRAMES],
    "starts-at-a-source-line": [P + f for f in FRAMES[1:]],
    "frame-cut-short": [P + FRAMES[0][:40], *(P + f for f in FRAMES[1:])],
    "indentation-stripped": [f"{P}Traceback (most recent call last):", *(P + f.strip() for f in FRAMES)],
    # a call whose arguments go on below it, the log's first line
    "starts-at-an-opened-call": [P + "    self._check_table(", *(P + f for f in FRAMES[2:])],
    # no header, no indentation (a Logs Explorer copy): the carets say the line above them was code
    "stripped-code-above-carets": [P + "engine_core = EngineCoreProc(*args, **kwargs)", P + "^^^^^^^^^^^^^^^^^^^",
                                   P + FRAMES[-1]],
}


@pytest.mark.parametrize("cut", list(CUT_TRACEBACKS))
def test_a_cut_traceback_lists_its_exception_and_none_of_its_code(compiled, tmp_path: Path, cut: str) -> None:
    from qwen_triage.engine.scanner import scan_paths

    log = tmp_path / f"{cut}.log"
    log.write_text("\n".join(CUT_TRACEBACKS[cut]) + "\n")
    report = scan_paths([str(log)], compiled)
    # (vLLM's `EngineCore hit an exception` is listed apart, as a relay)
    assert [(u.kind, u.template) for u in report.unrecognised if u.kind != "relay"] == [
        ("exception", "quux.loader.QuuxError: quux table emb is not aligned to <N> bytes")]


def test_an_indented_error_line_that_is_no_code_stays_listed(compiled, tmp_path: Path) -> None:
    """Only code is the traceback's: an indented error sentence, or Ray's ``RayTaskError(ValueError): …`` (a call's
    shape), is an error of its own."""
    from qwen_triage.engine.scanner import scan_paths

    log = tmp_path / "indented.log"
    log.write_text(f"{P}    the widget pool on host1 is drained, giving up\n"
                   f"{P}ray.exceptions.RayTaskError(QuuxError): ray::Worker.load() (pid=7, ip=10.0.0.2)\n")
    report = scan_paths([str(log)], compiled)
    assert [u.evidence.line for u in report.unrecognised] == [1, 2]


def test_the_next_lines_of_one_logged_exception_are_its_text_not_errors_of_their_own(compiled, tmp_path: Path) -> None:
    """vLLM logs an exception's text line by line, each with the same timestamp and logger source: the lines after
    its first go on with its message. A line of another log call (another time or source) is its own."""
    from qwen_triage.engine.scanner import scan_paths

    log = tmp_path / "multiline.log"
    log.write_text(
        f"{P}quux.loader.QuuxError: quux table emb is not aligned to 64 bytes\n"
        f"{P}Tables are aligned when the checkpoint is converted with quux-convert.\n"
        f"{P}If the checkpoint came from elsewhere, convert it again.\n"
        "(EngineCore_0 pid=7) ERROR 11-29 10:00:02 [core.py:700] the widget pool on host1 is drained\n"
        "(EngineCore_0 pid=7) ERROR 11-29 10:00:02 [core.py:712] the gadget pool on host1 is drained\n")
    report = scan_paths([str(log)], compiled)
    assert [u.evidence.line for u in report.unrecognised] == [1, 4, 5]


def test_a_logged_message_goes_on_past_its_lines_that_say_nothing_failed(compiled) -> None:
    """vLLM 0.32 logs transformers' three-line refusal line by line (genuine output): `Error parsing config for …:
    The repository … contains custom code …`, ` You can inspect …` (no signal reads it) and `Please pass the argument
    `trust_remote_code=True` …, retrying 1 of 2`, all of one log call. The last line is that message's, which a rule
    diagnosed, not an error of its own."""
    from qwen_triage.engine.scanner import scan_paths

    (log,) = (ROOT / "fixtures" / "genuine").glob("*/trust-remote-code-0.32.0.log")
    report = scan_paths([str(log)], compiled)
    assert [d.class_ for d in report.diagnoses][:1] == ["model.arch_unsupported"]
    assert not [u for u in report.unrecognised if "Please pass the argument" in u.template], report.unrecognised
