"""Typed placeholders: a number renders and matches as a number, a path as a path, else as a word."""

from __future__ import annotations

from pathlib import Path

import pytest
import regex

from qwen_triage.authoring.msg_template import (
    TYPE_REGEX, Field, Template, literal_words, render, type_of, typed_regex, typed_text, value_for)
from qwen_triage.authoring.msgs_clike import clike_templates
from qwen_triage.authoring.msgs_python import python_templates


@pytest.mark.parametrize(("conv", "hint", "kind"), [
    ("d", "", "int"), ("zu", "n", "int"), ("llu", "offset", "int"), ("x", "busId", "hex"), ("p", "ptr", "hex"),
    (".2f", "frac", "float"), ("s", "len(matched_files)", "int"), ("s", "self.cfg.max_file_size", "int"),
    ("s", "num_errors", "int"), ("s", "tensor_parallel_size", "int"), ("s", "x.numel()", "int"),
    ("s", "ckpt_path", "path"), ("s", "model_dir", "path"), ("s", "gpu_memory_utilization", "float"),
    ("s", "type(num_crops)", "str"), ("s", "request_id", "str"), ("s", "expected_expr", "str"),
    ("s", "model_id", "str"), ("s", "name", "str"), ("s", "device_str", "str"), ("s", "max_model_len", "int"),
    ("s", "format_gib(snap.free_memory)", "float"), ("s", "self.device", "str"), ("s", "local_rank", "int"),
    ("s", "err", "any"), ("r", "num_hidden_layers", "int"),
    ("r", "name", "any"), ("s", "__func__", "str"), ("", "str(e)", "any"),
])
def test_type_of_a_placeholder(conv: str, hint: str, kind: str) -> None:
    assert type_of(Field(conv, hint)) == kind


HINTS = ["", "n", "rank", "local_rank", "port", "master_port", "path", "ckpt_path", "len(x)", "x.size()", "err",
         "exc", "model", "model_id", "request_id", "gpu_memory_utilization", "self.top_p", "num_gpus",
         "cuda_device_count", "architectures", "arch", "dtype", "key", "host", "version", "self.cpu_offload_gb",
         "type(x)", "shape", "__func__", "__LINE__", "__FILE__", "max_file_size"]
CONVS = ["d", "zu", "llu", "x", "X", "p", "f", ".2f", "e", "g", "s", "r", "v", "w", "q", "c", ""]


@pytest.mark.parametrize("conv", CONVS)
def test_every_rendered_value_matches_its_own_type(conv: str) -> None:
    for hint in HINTS:
        f = Field(conv, hint)
        value = value_for(f, "load_model")
        assert regex.fullmatch(TYPE_REGEX[type_of(f)], value), (conv, hint, value, type_of(f))


def test_numbers_render_as_numbers_not_as_a_word() -> None:
    src = b'''
def check(matched_files, cfg, free_blocks):
    raise ValueError(f"found {len(matched_files)} shards, limit {cfg.max_file_size}, {free_blocks.numel()} free")
'''
    (t,) = python_templates(src, "prog/x.py", "prog.x")
    assert render(t) == "ValueError: found 4 shards, limit 4, 4 free"
    assert typed_text(t.parts) == "found {int} shards, limit {int}, {int} free"


def test_the_regex_matches_real_printed_lines_and_refuses_wrong_types() -> None:
    src = b'''
import logging
logger = logging.getLogger(__name__)
def load(path, rank, n):
    logger.error("rank %d could not open %s after %d tries: %s", rank, path, n, err)
'''
    (t,) = python_templates(src, "prog/x.py", "prog.x")
    assert typed_text(t.parts) == "rank {int} could not open {path} after {int} tries: {any}"
    pattern = regex.compile(typed_regex(t.parts))
    assert pattern.search("ERROR 12-02 10:00:01 [x.py:5] rank 3 could not open /mnt/m/w.safetensors after 12 tries: "
                          "[Errno 2] No such file")
    assert not pattern.search("rank three could not open /mnt/m after 12 tries: x")
    assert pattern.search(render(t))


def test_c_formats_are_typed_by_conversion() -> None:
    (t,) = clike_templates('void f(){ WARN("Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx",'
                           ' rank, i, busId); }', "nccl/src/init.cc")
    assert typed_text(t.parts) == "Duplicate GPU detected : rank {int} and rank {int} both on CUDA device {hex}"
    assert regex.search(typed_regex(t.parts), "node:1:2 [3] NCCL WARN Duplicate GPU detected : rank 3 and rank 5 "
                        "both on CUDA device 1b000")


def test_braces_and_multi_line_messages() -> None:
    t = Template(file="p.py", line=1, kind="raise", text="", parts=["\n", "bad config {x}: ", Field("s", "name"),
                                                                    "\nsee the docs"])
    assert typed_text(t.parts) == "\nbad config {{x}}: {str}\nsee the docs"
    assert typed_regex(t.parts) == r"bad\s+config\s+\{x\}:"  # the first line with words; a last field says nothing
    assert literal_words(t.parts) == ["bad", "config", "see", "the", "docs"]


def test_coverage_counts_a_message_a_numeric_rule_knows(tmp_path: Path) -> None:
    """A rule that captures a number covers the message it was written for (it did not, when a count that
    the source names ``len(...)`` or ``..._size`` rendered as a word or a path)."""
    from qwen_triage.authoring.coverage import measure
    from qwen_triage.engine.scanner import load_compiled

    root = tmp_path / "prog"
    root.mkdir()
    (root / "parallel.py").write_text(
        "def f(heads, parallel):\n"
        "    raise ValueError(f'Total number of attention heads ({len(heads)}) must be divisible by tensor '\n"
        "                     f'parallel size ({parallel.max_file_size}).')\n")
    cov = measure([root], load_compiled((), "auto"))
    (r,) = cov.results
    assert r.template.example == ("ValueError: Total number of attention heads (4) must be divisible by tensor "
                                  "parallel size (4).")
    assert r.rule is not None


def test_messages_gathered_in_a_list_and_raised_joined() -> None:
    src = b'''
def validate_legal(self, cfg):
    error_msg = []
    max_rank = max([self.r, *self.rank_pattern.values()])
    if max_rank > cfg.max_lora_rank:
        error_msg.append(f"LoRA rank {max_rank} is greater than max_lora_rank {cfg.max_lora_rank}.")
    if self.bias != "none":
        error_msg.append("Adapter bias is not supported.")
    if error_msg:
        raise ValueError(f"{' '.join(error_msg)}")
'''
    got = {typed_text(t.parts) for t in python_templates(src, "vllm/lora/peft_helper.py", "vllm.lora.peft_helper")}
    assert {"LoRA rank {int} is greater than max_lora_rank {int}.", "Adapter bias is not supported."} <= got


def test_a_message_assigned_in_each_branch_and_raised_once_is_one_template_per_branch() -> None:
    src = b'''
def raise_for_status(self):
    http_error_msg = ""
    if 400 <= self.status_code < 500:
        http_error_msg = f"{self.status_code} Client Error: {reason} for url: {self.url}"
    elif 500 <= self.status_code < 600:
        http_error_msg = f"{self.status_code} Server Error: {reason} for url: {self.url}"
    if http_error_msg:
        raise HTTPError(http_error_msg, response=self)
'''
    got = {typed_text(t.parts) for t in python_templates(src, "requests/models.py", "requests.models")}
    assert {"{any} Client Error: {any} for url: {str}", "{any} Server Error: {any} for url: {str}"} <= got
    assert "" not in got  # the empty value it starts from is no message


def test_a_named_format_string_formatted_where_it_is_raised_has_its_fields() -> None:
    """httpx's raise_for_status: the template is a name bound to a literal, formatted in the raise."""
    src = b'''
def raise_for_status(self):
    message = (
        "{error_type} '{0.status_code} {0.reason_phrase}' for url '{0.url}'\\n"
        "For more information check: https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/{0.status_code}"
    )
    raise HTTPStatusError(message.format(self, error_type=error_type), request=request, response=self)
'''
    (t,) = python_templates(src, "httpx/_models.py", "httpx._models")
    assert typed_text(t.parts).startswith("{str} '{any} {any}' for url '{str}'\nFor more information"), t.parts


def test_a_message_formatted_into_its_own_name_in_each_branch_has_its_fields() -> None:
    """httpx2's raise_for_status: `message = (…)` in each branch, then `message = message.format(self, …)`."""
    src = b'''
def raise_for_status(self):
    if self.has_redirect_location:
        message = (
            "{error_type} '{0.status_code} {0.reason_phrase}' for url '{0.url}'\\n"
            "Redirect location: '{0.headers[location]}'\\n"
        )
    else:
        message = "{error_type} '{0.status_code} {0.reason_phrase}' for url '{0.url}'\\n"
    error_type = error_types.get(status_class, "Invalid status code")
    message = message.format(self, error_type=error_type)
    raise HTTPStatusError(message, request=request, response=self)
'''
    got = sorted(typed_text(t.parts) for t in python_templates(src, "httpx2/_models.py", "httpx2._models"))
    assert got == ["{str} '{any} {any}' for url '{str}'", "{str} '{any} {any}' for url '{str}'\nRedirect location: '{path}'"]
