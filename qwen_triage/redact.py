"""Secrets out of everything the tool prints or writes: the one masker of the package.

Logs, command lines and environments carry API keys, hub tokens and passwords;
reports get pasted into public bug trackers and relaunch journals get shared.
Names decide for environments and flags (``HF_TOKEN``, ``--api-key``); for free
text the well-known token shapes are masked (``sk-…``, ``hf_…``, ``Bearer …``,
``user:password@`` in URLs, ``NAME_TOKEN=value``). What is masked becomes ``***``
so a reader still sees that a value was there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

MASK = "***"

# Environment variable names whose values are secrets.
_SECRET_NAME = re.compile(
    r"(?i)(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH|_KEY$|^KEY$)"
)
# Command-line flags whose value is a secret (vLLM, Ollama, the hub CLI, TGI, SGLang).
SECRET_FLAGS = frozenset({"--api-key", "--hf-token", "--token", "--password", "--admin-api-key"})

_TEXT_PATTERNS = (
    # OpenAI-style keys (sk-…, sk-proj-…), hub tokens (hf_…), GitHub and Slack tokens
    re.compile(r"\b(?:sk-(?:proj-|ant-)?|hf_|ghp_|gho_|ghs_|github_pat_|xox[abpr]-)[A-Za-z0-9_\-]{8,}"),
    # Authorization headers
    re.compile(r"(?i)(?<=\bBearer )[A-Za-z0-9._~+/=\-]{8,}"),
    re.compile(r"(?i)(?<=\bBasic )[A-Za-z0-9+/=]{8,}"),
    # user:password@ in URLs
    re.compile(r"(?<=://)[^/\s:@]{1,256}:[^/\s@]{1,256}(?=@)"),
)
# NAME=value and NAME: value where NAME looks like a secret (HF_TOKEN=…, "api_key": "…", --api-key …)
_ASSIGNMENT = re.compile(
    r"(?i)(?P<name>\b(?:(?:[A-Za-z0-9_.\-]{0,63}[_.\-])?(?:token|secret|password|passwd|api[_-]?key|access[_-]?key)"
    r"|[A-Za-z0-9_.\-]{0,63}[_.\-]key))"
    r"(?P<sep>[\"']?\s*[:=]\s*[\"']?)(?P<value>[^\s\"',;&]{3,})"
)
# a secret flag and its value in a command line printed as text
_FLAG_VALUE = re.compile(r"(?P<name>--(?:api-key|hf-token|token|password|admin-api-key))(?P<sep>\s+|=)(?P<value>[^\s\"']{1,})")


def is_secret_env(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def is_secret_flag(flag: str) -> bool:
    return flag.split("=", 1)[0].replace("_", "-") in SECRET_FLAGS


# The variable a printed command refers to instead of a secret flag's value.
_FLAG_VARIABLE = {"--api-key": "VLLM_API_KEY", "--hf-token": "HF_TOKEN", "--token": "HF_TOKEN"}


def flag_variable(flag: str, env: Mapping[str, str] | None = None, value: str | None = None) -> str:
    """The environment variable a printed command names for a secret flag's value.

    One of ``env``'s secret variables holding that very value when there is one
    (the key came from it), else the conventional name (``VLLM_API_KEY`` for
    ``--api-key``), else one made from the flag (``--password`` -> ``PASSWORD``).
    """
    if env and value is not None:
        for name, v in env.items():
            if v == value and is_secret_env(name):
                return name
    name = flag.split("=", 1)[0].replace("_", "-")
    return _FLAG_VARIABLE.get(name) or re.sub(r"[^A-Z0-9_]", "_", name.lstrip("-").upper()) or "SECRET"


def mask_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment with secret-named variables' values masked."""
    return {k: (MASK if v and is_secret_env(k) else redact_text(v)) for k, v in env.items()}


def mask_argv(argv: Sequence[str]) -> list[str]:
    """A command line with the values of secret flags masked (``--api-key X`` and ``--api-key=X``)."""
    out: list[str] = []
    hide = False
    for tok in argv:
        if hide and not tok.startswith("-"):
            out.append(MASK)  # every value up to the next flag: vLLM takes several keys
            continue
        hide = False
        name, eq, _ = tok.partition("=")
        if is_secret_flag(name):
            if eq:
                out.append(f"{name}={MASK}")
            else:
                out.append(tok)
                hide = True
            continue
        out.append(redact_text(tok))
    return out


# tokenizer settings and counters named like secrets: `pad_token: <pad>`, `max_tokens=…`
_NOT_SECRET_NAME = re.compile(r"(?i)(?:pad|eos|bos|unk|cls|sep|mask|special|max|min|num|total|added)[_.\-]?tokens?$")
_NOT_SECRET_VALUE = frozenset({"true", "false", "none", "null", "***", "<redacted>"})


def _mask_assignment(m: re.Match[str]) -> str:
    if m["value"].lower() in _NOT_SECRET_VALUE or _NOT_SECRET_NAME.search(m["name"]) or m["value"].startswith("$"):
        # a reference to a variable (`HF_TOKEN="$HF_TOKEN"`, what a printed command says) is no secret
        return m[0]
    return f"{m['name']}{m['sep']}{MASK}"


def redact_text(text: str) -> str:
    """Free text (a log line, a fact, a summary) with every recognisable secret masked."""
    if not text:
        return text
    for pattern in _TEXT_PATTERNS:
        text = pattern.sub(MASK, text)
    text = _FLAG_VALUE.sub(_mask_assignment, text)
    return _ASSIGNMENT.sub(_mask_assignment, text)


def redact_tree(value: object) -> object:
    """Every string in a JSON-like value (dicts, lists) through :func:`redact_text`; keys stay."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_tree(v) for v in value]
    return value
