"""Issue 29 §1: text a user controls is data, never a diagnosis of its own.

Each case is the reproduction from the audit, replayed through a real scan of the
bundled pack: a process that named itself like the driver, a prompt that quotes
an Xid (logged by a server's request logger), a traceback's quoted source line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.scanner import scan_paths

# --- a process name that starts like the driver -------------------------------------------------

# `prctl(PR_SET_NAME, "NVRM: x")`, then a crash: the kernel prints the comm first and the mapped file's name after
COMM_NVRM = ("NVRM: x[4242]: segfault at 0 ip 00007f3a1c2b4000 sp 00007ffd2a1b3c40 error 4 in NVRM: Xid "
             "(PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus[0,7f1e2a3b4000+1000] likely on CPU 1 "
             "(core 1, socket 0)")
# the `traps:` and `comm (pid):` forms
TRAPS_NVRM = ("traps: NVRM: x[4242] general protection fault ip:7f3a1c2b4000 sp:7ffd2a1b3c40 error:0 in NVRM: Xid "
              "(PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus[7f3a1c2b4000+1000]")
PAREN_NVRM = "NVRM: Xid 79 (4242): drop_caches: 3"
REAL_XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus."
NODE = ("hardware.", "node.", "runtime.fabric")


def scan(tmp_path: Path, compiled: CompiledPack, text: str, name: str = "x.log"):  # type: ignore[no-untyped-def]
    p = tmp_path / name
    p.write_text(text)
    return scan_paths([str(p)], compiled)


def classes(report) -> list[str]:  # type: ignore[no-untyped-def]
    return [d.class_ for d in report.diagnoses] + [s.class_ for d in report.diagnoses for s in d.symptoms]


def node_level(report) -> list[str]:  # type: ignore[no-untyped-def]
    return [c for c in classes(report) if c.startswith(NODE)]


def journal_kernel(*messages: str) -> str:
    """`journalctl -k -o json`: the kernel's entries, each from the kernel transport."""
    return "".join(json.dumps({"__REALTIME_TIMESTAMP": str(1_700_000_000_000_000 + i), "_TRANSPORT": "kernel",
                               "PRIORITY": "6", "SYSLOG_IDENTIFIER": "kernel", "MESSAGE": m}) + "\n"
                   for i, m in enumerate(messages))


@pytest.mark.parametrize("line", [COMM_NVRM, TRAPS_NVRM], ids=["segfault", "traps"])
@pytest.mark.parametrize("form", ["dmesg", "journal-json", "plain"])
def test_a_process_named_like_the_driver_is_no_xid(tmp_path: Path, compiled: CompiledPack, line: str,
                                                    form: str) -> None:
    text = {"dmesg": f"[ 12.345678] {line}\n", "journal-json": journal_kernel(line), "plain": line + "\n"}[form]
    report = scan(tmp_path, compiled, text)
    assert node_level(report) == []
    assert "process.segfault" in classes(report) or "traps" in line  # the kernel's own word: a crash


def test_a_process_report_never_continues_a_driver_message(tmp_path: Path, compiled: CompiledPack) -> None:
    # a real NVRM line that does not end a sentence, then the crafted report: not one message of the driver's
    text = "[ 12.000000] NVRM: GPU at PCI:0000:3b:00: GPU-5a1e2c3d\n" f"[ 12.345678] {COMM_NVRM}\n"
    assert node_level(scan(tmp_path, compiled, text)) == []
    text = journal_kernel("NVRM: GPU at PCI:0000:3b:00: GPU-5a1e2c3d", COMM_NVRM, PAREN_NVRM)
    assert node_level(scan(tmp_path, compiled, text, "k.json")) == []


@pytest.mark.parametrize("form", ["dmesg", "journal-json"])
def test_the_driver_s_own_xid_still_counts(tmp_path: Path, compiled: CompiledPack, form: str) -> None:
    text = f"[ 12.345678] {REAL_XID}\n" if form == "dmesg" else journal_kernel(REAL_XID)
    assert "hardware.xid_fatal" in node_level(scan(tmp_path, compiled, text))


# --- prompts are data ---------------------------------------------------------------------------

# what a client quotes: each is a real failure's words, diagnosed when a program prints it itself
QUOTES = {
    "xid": "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus.",
    "oom": ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.15 GiB of which 1.2 GiB is free."),
    "tp": "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (6).",
    "nccl": ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
             "1970, unhandled cuda error, NCCL version 2.20.5"),
    "ecc": "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    "kv": ("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored "
           "in KV cache (16). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
           "the engine."),
}


def _repr(text: str) -> str:
    return repr(text)


def _go(text: str) -> str:
    return json.dumps(text)  # strconv.Quote: the same escapes for this text


# one line per request logger and version (templates cited in qwen_triage/engine/client_text.py)
LOGGERS = {
    "vllm-0.4": lambda q: (f"INFO 05-01 10:00:00 async_llm_engine.py:529] Received request cmpl-1: prompt: {_repr(q)}, "
                           "sampling_params: SamplingParams(n=1), prompt_token_ids: [1, 2], lora_request: None."),
    "vllm-0.6": lambda q: (f"INFO 12-01 10:00:00 logger.py:36] Received request chat-1: prompt: {_repr(q)}, params: "
                           "SamplingParams(n=1), prompt_token_ids: [1, 2], lora_request: None, "
                           "prompt_adapter_request: None."),
    "vllm-0.10": lambda q: (f"(APIServer pid=1) INFO 08-01 10:00:00 [logger.py:43] Received request chatcmpl-1: prompt: "
                            f"{_repr(q)}, params: SamplingParams(n=1), prompt_token_ids: None, prompt_embeds shape: None, "
                            "lora_request: None."),
    "vllm-stop": lambda q: (f"(APIServer pid=1) INFO 11-01 10:00:00 [logger.py:50] Received request cmpl-1: params: "
                            f"SamplingParams(n=1, stop=[{_repr(q)}]), lora_request: None."),
    "vllm-details": lambda q: (f"(APIServer pid=1) DEBUG 11-01 10:00:00 [logger.py:40] Request cmpl-1 details: prompt: "
                               f"{_repr(q)}, prompt_token_ids: [1], prompt_embeds shape: None."),
    "vllm-output": lambda q: (f"(APIServer pid=1) INFO 11-01 10:00:00 [logger.py:70] Generated response cmpl-1 "
                              f"(streaming complete): output: {_repr(q)}, output_token_ids: None, finish_reason: stop"),
    "ollama-chat": lambda q: ('time=2026-12-01T10:00:00.000Z level=DEBUG source=routes.go:1500 msg="chat request" '
                              f"images=0 prompt={_go(q)}"),
    "ollama-generate": lambda q: ('time=2024-03-01T10:00:00.000Z level=DEBUG source=routes.go:277 msg="generate handler" '
                                  f"prompt={_go(q)}"),
    "ollama-trace": lambda q: ('time=2026-12-01T10:00:00.000Z level=TRACE source=server.go:800 msg="completion request" '
                               f"prompt={_go(q)}"),
    "ollama-embed": lambda q: ('time=2025-01-01T10:00:00.000Z level=DEBUG source=server.go:900 msg="embedding request" '
                               f"content={_go(q)}"),
    "ollama-old": lambda q: (f'time=2024-01-01T10:00:00.000Z level=DEBUG source=routes.go:1200 msg="prompt: {q}"'),
    "ollama-journal": lambda q: ('Dec 01 10:00:00 gpu1 ollama[812]: time=2026-12-01T10:00:00.000Z level=DEBUG '
                                 f'source=routes.go:1500 msg="chat request" images=0 prompt={_go(q)}'),
    "sglang": lambda q: f"[2025-06-01 10:00:00] Receive: obj=GenerateReqInput(text={_repr(q)}, sampling_params={{}})",
    "sglang-finish": lambda q: (f"[2025-06-01 10:00:00 TP0] Finish: obj=GenerateReqInput(text='hi'), "
                                f"out={{'text': {_repr(q)}}}"),
    "llama-server": lambda q: "srv  log_server_r: request:  " + json.dumps({"prompt": q}),
    "llama-server-response": lambda q: "srv  log_server_r: response: " + json.dumps({"content": q}),
    "tgi": lambda q: ("2024-10-01T10:00:21.702331Z DEBUG generate{parameters=GenerateParameters { stop: [] }}: "
                      f"text_generation_router::server: router/src/server.rs:296: Input: {q}"),
}


@pytest.mark.parametrize("quote", sorted(QUOTES))
@pytest.mark.parametrize("logger", sorted(LOGGERS))
def test_a_prompt_quoting_a_failure_is_no_diagnosis(tmp_path: Path, compiled: CompiledPack, logger: str,
                                                    quote: str) -> None:
    line = LOGGERS[logger](QUOTES[quote])
    report = scan(tmp_path, compiled, line + "\n")
    assert classes(report) == [], line
    assert [u.template for u in report.unrecognised] == []


@pytest.mark.parametrize("quote", sorted(QUOTES))
def test_the_failure_printed_by_the_server_itself_is_still_diagnosed(tmp_path: Path, compiled: CompiledPack,
                                                                     quote: str) -> None:
    # the same words as the program's own line: the masking hides prompts, not errors
    own = {"xid": f"[ 12.345678] {QUOTES['xid']}", "tgi": ""}.get(quote, f"ERROR 12-01 10:00:00 [core.py:1] {QUOTES[quote]}")
    text = "\n".join([LOGGERS["vllm-0.6"](QUOTES[quote]), own, LOGGERS["ollama-chat"](QUOTES[quote])]) + "\n"
    assert classes(scan(tmp_path, compiled, text)) != []


def test_a_prompt_cannot_veto_a_real_diagnosis(tmp_path: Path, compiled: CompiledPack) -> None:
    # whatever a rule's `unless` reads, a prompt that quotes it is cut before any rule reads the line
    from qwen_triage.engine.normalize import normalize

    for make in LOGGERS.values():
        rec = normalize(make("anything at all: NVRM: Xid 79, CUDA out of memory"))
        assert rec.quoted == "request" and "Xid" not in rec.message and "memory" not in rec.message, rec.message
        assert rec.message in rec.text  # still a substring of the line: what the prefilter relies on


# --- a traceback's quoted source line -----------------------------------------------------------

SOURCE_TRACEBACK = """\
Traceback (most recent call last):
  File "/srv/app/health.py", line 12, in <module>
    log.error("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus.")
  File "/srv/app/health.py", line 30, in check
    raise MemoryError(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.15 GiB of which 1.2 GiB is free.")
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/srv/app/health.py", line 40, in ecc
    if "RuntimeError: CUDA error: uncorrectable ECC error encountered" in text: alarm()
KeyError: 'gpu'
"""


@pytest.mark.parametrize("prefix", ["", "[rank0]:", "(VllmWorker rank=0 pid=4242) ", "Dec 01 10:00:00 gpu1 app[812]: "],
                         ids=["plain", "torch-rank", "vllm-worker", "journald"])
def test_a_traceback_s_quoted_source_fires_nothing(tmp_path: Path, compiled: CompiledPack, prefix: str) -> None:
    text = "".join(prefix + line + "\n" for line in SOURCE_TRACEBACK.splitlines())
    report = scan(tmp_path, compiled, text)
    assert classes(report) == []
    assert not [u.template for u in report.unrecognised if "NVRM" in u.template or "memory" in u.template]


def test_the_exception_a_traceback_ends_with_is_still_read(tmp_path: Path, compiled: CompiledPack) -> None:
    text = SOURCE_TRACEBACK.replace("KeyError: 'gpu'", QUOTES["oom"])
    assert classes(scan(tmp_path, compiled, text)) == ["memory.gpu_oom"]
    # an indented line under no frame is the program's own (torch elastic's failure summary, say)
    assert "hardware.xid_fatal" in classes(scan(tmp_path, compiled, "[ 12.345678] " + QUOTES["xid"] + "\n"))


def test_what_quoted_code_calls_may_still_be_read(tmp_path: Path, compiled: CompiledPack) -> None:
    # a rule that reads which check raised (the code, not a string in it) still reads it under its frame
    w = "(Worker_TP0 pid=3928601) ERROR 10-06 22:12:39 [multiproc_executor.py:597] "
    text = "".join(w + line + "\n" for line in [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/dist-packages/vllm/model_executor/layers/quantization/compressed_tensors/'
        'compressed_tensors.py", line 561, in get_scheme',
        "    self._check_scheme_supported(scheme.get_min_capability())",
    ])
    assert classes(scan(tmp_path, compiled, text)) == ["config.dtype_unsupported"]


@pytest.mark.parametrize("quote", sorted(QUOTES))
def test_tgi_request_span_fields_are_not_the_event_s_words(tmp_path: Path, compiled: CompiledPack, quote: str) -> None:
    # TGI's router logs every event of a request inside its span: `generate{parameters=GenerateParameters {
    # stop: [...] }}` carries the client's stop strings (Debug-quoted, so `}:` inside them is read as text)
    stop = json.dumps(QUOTES[quote] + ' }}: text_generation_router::server: x.rs:1: ')
    line = (f"2024-10-01T10:00:21.702331Z  INFO generate{{parameters=GenerateParameters {{ best_of: None, stop: [{stop}],"
            f" seed: None }} total_time=\"1.2s\"}}: text_generation_router::server: router/src/server.rs:422: Success")
    assert classes(scan(tmp_path, compiled, line + "\n")) == []


def test_an_error_inside_a_tgi_span_is_still_read(tmp_path: Path, compiled: CompiledPack) -> None:
    line = ("2024-09-02T23:29:03.901544Z ERROR warmup{max_input_length=Some(4095) max_prefill_tokens=4145 "
            "max_total_tokens=Some(4096) max_batch_size=None}:warmup: text_generation_router_v3::client: "
            "backends/v3/src/client/mod.rs:45: Server error: Not enough memory to handle 4145 prefill tokens. You "
            "need to decrease `--max-batch-prefill-tokens`")
    assert classes(scan(tmp_path, compiled, line + "\n")) != []
