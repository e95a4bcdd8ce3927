"""Issue 29 §3: `unknown pre-tokenizer type: 'qwen2'` was titled "A tensor is missing or has an unexpected shape"
and explained with "tensor '?'". It has its own rule now, and no report prints a fact the line did not give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from qwen_triage.cli.main import cli

PRETOK = "llama_model_load: error loading model: error loading model vocabulary: unknown pre-tokenizer type: 'qwen2'"
TITLE = "The GGUF names a pre-tokenizer this llama.cpp does not know"
# lines that give a rule's finding without the facts its other lines give (the GPU's address, the port)
NO_FACTS = {
    "kernel.gpu-lost": "pynvml.NVMLError_GPUIsLost: NVML_ERROR_GPU_IS_LOST",
    "torch.tcpstore-port-in-use": "RuntimeError: Address already in use",
}


def scan(tmp_path: Path, line: str, fmt: str) -> str:
    p = tmp_path / "server.log"
    p.write_text(line + "\n")
    result = CliRunner().invoke(cli, ["scan", "--format", fmt, str(p)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.output


def test_the_line_has_its_own_rule_and_title(tmp_path: Path) -> None:
    top = json.loads(scan(tmp_path, PRETOK, "json"))["diagnoses"][0]
    assert (top["rule"], top["title"], top["class"]) == (
        "llamacpp.unknown-pretokenizer", TITLE, "model.gguf_unsupported")
    assert "'qwen2'" in top["summary"] and "tensor" not in top["summary"]


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_no_report_prints_an_unset_fact(tmp_path: Path, fmt: str) -> None:
    out = scan(tmp_path, PRETOK, fmt)
    assert TITLE in out
    assert "?" not in out, out  # neither "tensor '?'" nor any other unset fact


@pytest.mark.parametrize("rule", sorted(NO_FACTS))
@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_an_action_names_no_value_it_does_not_have(tmp_path: Path, rule: str, fmt: str) -> None:
    out = scan(tmp_path, NO_FACTS[rule], fmt)
    assert rule in out and "?" not in out, out
    assert "gpu=" not in out and "port=" not in out, out  # `[safe: exclude_gpu]`, not `gpu=?` or `gpu=`
