"""A client's words out of what rules read: the fields of servers' request loggers.

An inference server that logs its requests puts a stranger's text into its own
output: a prompt that quotes ``NVRM: Xid … 79``, a stop string that reads ``CUDA
out of memory``, a JSON schema, a chat message. Rules must never take that for the
server's word — a prompt is not a fault, a reason to stop the server, or a launch
argument. As the secret masker (:mod:`qwen_triage.redact`) cuts keys, this cuts
those fields, once, where every line is normalised (:func:`qwen_triage.engine.normalize.normalize`),
so every mode (scan, run, attach, check, relaunch) reads the same:

* the message ends where the first client-chosen field begins (it stays a prefix,
  so a substring of the raw line: the prefilter's guarantee holds);
* the record says so (``quoted = "request"``), and :func:`qwen_triage.engine.origin.accepts`
  lets no rule fire on it: no diagnosis, kill or relaunch argument rests on a request-logger line.

The forms are the request loggers' own templates, per engine and version (cited
below); a form is keyed on the fixed words before the first client field, never on
what a client could send. The first occurrence on a line is the logger's: a
client's text comes after the logger's own words, so a quoted copy can only move
the cut earlier.
"""

from __future__ import annotations

from qwen_triage.engine.records import REQUEST, LineRecord
from qwen_triage.lazyre import lazy

HEAD = 1024  # characters of a message searched for a form: the logger's own words come first

# (engine, template of the logger: what is kept ends at group `data`'s start)
FORMS: tuple[tuple[str, str], ...] = (
    # vLLM vllm/entrypoints/logger.py RequestLogger.log_inputs (and vllm/engine/async_llm_engine.py before it):
    #   "Received request %s: prompt: %r, params: %s, prompt_token_ids: %s, [prompt_embeds shape: %s, ]
    #    lora_request: %s[, prompt_adapter_request: %s]."
    #   "Received request %s: prompt: %r, sampling_params: %s, prompt_token_ids: %s, lora_request: %s." (0.4)
    #   "Received request %s: params: %s, lora_request: %s." (INFO, newer; the params carry stop strings)
    ("vllm", r"\bReceived request \S{1,256}?: (?P<data>(?:prompt|params): )"),
    #   "Request %s details: prompt: %r, prompt_token_ids: %s, prompt_embeds shape: %s." (DEBUG, newer)
    ("vllm", r"\bRequest \S{1,256}? details: (?P<data>prompt: )"),
    #   RequestLogger.log_outputs: "Generated response %s%s: output: %r, output_token_ids: %s, finish_reason: %s"
    ("vllm", r"\bGenerated response \S{1,256}?(?: \([^)]{0,40}\))?: (?P<data>output: )"),
    # SGLang python/sglang/srt/managers/request_logger.py (tokenizer_manager.py before it):
    #   "Receive: obj=%s", "Receive OpenAI: obj=%s", "Finish: obj=%s[, headers=…], out=%s"; JSON: "request.received"…
    ("sglang", r"\b(?:Receive(?: OpenAI)?|Finish): obj=(?P<data>)"),
    ("sglang", r"\"request\.(?:received|finished)(?:\.openai)?\"(?P<data>)"),
    # llama.cpp tools/server/server.cpp log_server_request: "request: %s %s %s %d" (path), "request:  %s" (body),
    # "response: %s"; the old JSON logs: {"function":"log_server_request",…,"path":…,"request":…} (Ollama's too)
    ("llama.cpp", r"\blog_server_r: (?P<data>(?:done )?(?:request|response): )"),
    ("llama.cpp", r"\"function\": ?\"log_server_request\"(?P<data>)"),
    # TGI router/src/server.rs: tracing::debug!("Input: {}", …), tracing::debug!("Output: {}", …)
    ("tgi", r"\btext_generation_router(?:_v\d)?::server: \S{1,200}?:\d{1,6}: (?P<data>(?:Input|Output): )"),
    # Ollama server/routes.go, llm/server.go (slog; git log -S'"prompt", prompt'): "generate handler" prompt=…,
    # system=…, template=…; "chat handler" prompt=…; "generate request"/"chat request" prompt=…; "completion
    # request" prompt=… (trace); "embedding request" content=… / input=…; "builtin parser input|output" content=…,
    # thinking=…, toolCalls=…; and before 2024-02 slog.Debug(fmt.Sprintf("prompt: %s", prompt))
    ("ollama", r"^(?P<data>prompt: )"),
    ("ollama", r"[\" ](?P<data>(?:prompt|system|template|content|input|messages|thinking|toolCalls)="
               r"(?!\d{1,20}(?: |$)))"),  # a count (`prompt=412`, `messages=3`) is the server's own
)
_FORMS = tuple((engine, lazy(pattern)) for engine, pattern in FORMS)
# Words one of the forms needs: most lines have none of them, and skip the search.
_HINTS = ("Receive", "Request ", "Generated response", "Finish: ", "request", "log_server_r", "Input: ", "Output: ",
          "prompt", "system=", "template=", "content=", "input=", "messages=", "thinking=", "toolCalls=")
# Ollama's keys are read only in its logfmt lines (anything else that says `content=` is not a request's field)
_LOGFMT_ONLY = "ollama"


def cut(rec: LineRecord) -> None:
    """Cut a request logger's client fields out of ``rec.message``; mark the record when it held any."""
    message = rec.message
    head = message[:HEAD]
    if not any(h in head for h in _HINTS):
        return
    at = -1
    logfmt = "logfmt" in rec.formats
    for engine, pattern in _FORMS:
        if engine == _LOGFMT_ONLY and not logfmt:
            continue
        m = pattern.search(head)
        if m is not None and (at < 0 or m.start("data") < at):
            at = m.start("data")
    if at >= 0:
        rec.message = message[:at]
        rec.quoted = REQUEST

