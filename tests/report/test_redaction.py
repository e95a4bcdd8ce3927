"""One masker: secrets in text, environments and command lines; evidence that only looks like one stays."""

from __future__ import annotations

import pytest

from qwen_triage.redact import mask_argv, mask_env, redact_text


@pytest.mark.parametrize(
    "text, secret",
    [
        ("export HF_TOKEN=hf_abcdefghijklmnopqrstu", "hf_abcdefghijklmnopqrstu"),
        ("401 for token hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc", "eyJhbGciOiJIUzI1NiJ9.abc"),
        ("git clone https://user:pa55w0rd@example.com/x", "pa55w0rd"),
        ("vllm serve m --api-key s3cr3t-key --port 8000", "s3cr3t-key"),
        ("vllm serve m --api-key=s3cr3t-key", "s3cr3t-key"),
        ('{"api_key": "abcdef123"}', "abcdef123"),
        ("OPENAI_API_KEY: sk-proj-abcdefghijkl", "sk-proj-abcdefghijkl"),
        ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI", "wJalrXUtnFEMI"),
        ("DB_PASSWORD=hunter22", "hunter22"),
        ("token=abcdef", "abcdef"),
    ],
)
def test_secrets_are_masked(text: str, secret: str) -> None:
    out = redact_text(text)
    assert secret not in out
    assert "***" in out


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens=128 exceeds the limit",
        "access token expired",
        "num_tokens: 4096",
        "pad_token: <pad>",
        "bos_token_id=151643",
        "NCCL INFO cudaDriverVersion 12040",
        "Loading tokenizer from /models/qwen",
        "The hf_transfer accelerated download failed",
        "huggingface_hub.errors.EntryNotFoundError raised in hf_hub_download",
        "Xet Storage is enabled for this repo, but the 'hf_xet' package is not installed.",
    ],
)
def test_evidence_that_only_looks_like_a_secret_stays(text: str) -> None:
    assert redact_text(text) == text


def test_env_and_argv() -> None:
    env = mask_env({"HF_TOKEN": "hf_x", "VLLM_API_KEY": "k", "PATH": "/bin", "NCCL_DEBUG": "INFO", "EMPTY_TOKEN": ""})
    assert env == {"HF_TOKEN": "***", "VLLM_API_KEY": "***", "PATH": "/bin", "NCCL_DEBUG": "INFO", "EMPTY_TOKEN": ""}
    argv = mask_argv(["vllm", "serve", "m", "--api-key", "xyz", "--hf-token=abc", "--port", "8000"])
    assert argv == ["vllm", "serve", "m", "--api-key", "***", "--hf-token=***", "--port", "8000"]
