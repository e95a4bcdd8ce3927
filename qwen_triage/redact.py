"""Secrets out of everything the tool prints or writes: the one masker of the package.

Logs, command lines and environments carry API keys, hub tokens and passwords;
reports get pasted into public bug trackers and relaunch journals get shared.
Names decide for environments and flags (``HF_TOKEN``, ``--api-key``); for free
text the well-known token shapes are masked (``sk-…``, ``hf_…``, ``Bearer …``,
``user:password@`` in URLs, GitLab, Slack, npm and Google API keys, ``NAME_TOKEN=value`` and vLLM's ``'api_key': ['…']``, AWS key ids,
``Cookie:`` headers, ``password <value>``, PEM private keys). What is masked becomes ``***``
so a reader still sees that a value was there.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from qwen_triage.lazyre import lazy

MASK = "***"

# Environment variable names whose values are secrets.
_SECRET_NAME = lazy(
    r"(?i)(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH|_KEY$|^KEY$)"
)
# Command-line flags whose value is a secret (vLLM, Ollama, the hub CLI, TGI, SGLang).
SECRET_FLAGS = frozenset({"--api-key", "--hf-token", "--token", "--password", "--admin-api-key"})

_TEXT_PATTERNS = (
    # OpenAI-style keys (sk-…, sk-proj-…), GitHub, Slack, GitLab and npm tokens
    lazy(r"\b(?:sk-(?:proj-|ant-)?|gh[pousr]_|github_pat_|xox[abpors]-|xapp-|gl(?:pat|dt|rt|ptt|ft|cbt|soat)-|npm_)"
         r"[A-Za-z0-9_\-]{8,}"),
    # Hugging Face tokens: hf_ and a run of letters and digits with no separator (34 in the hub's tokens; 16 at
    # least here), so that the hub's own words that start with hf_ (hf_transfer, hf_hub_download, hf_xet) stay
    # readable in a report
    lazy(r"\bhf_[A-Za-z0-9]{16,}"),
    # Google API keys
    lazy(r"\bAIza[0-9A-Za-z_\-]{30,}"),
    # Authorization headers
    lazy(r"(?i)(?<=\bBearer )[A-Za-z0-9._~+/=\-]{8,}"),
    lazy(r"(?i)(?<=\bBasic )[A-Za-z0-9+/=]{8,}"),
    # user:password@ in URLs, and the password alone (`redis://:password@host`)
    lazy(r"(?<=://)[^/\s:@]{0,256}:[^/\s@]{1,256}(?=@)"),
    # AWS access key ids (the secret key beside one is a NAME=value below)
    lazy(r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[A-Z0-9]{16}\b"),
    # Cookie and Set-Cookie headers: every cookie in them (session ids are credentials)
    lazy(r"(?i)(?<=\bcookie: )[^\r\n]{1,8192}"),
    # a PEM private key: the block whole, or what follows its first line when the block is cut
    lazy(r"-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY-----(?:.{0,16384}?-----END (?:[A-Z0-9]+ ){0,3}PRIVATE KEY-----|.{0,16384})", re.S),
    # one line of a PEM body on its own (64 base64 characters, mixed case and digits: not a hex digest)
    lazy(r"^(?=[^\n]{0,76}[A-Z])(?=[^\n]{0,76}[a-z])(?=[^\n]{0,76}\d)[A-Za-z0-9+/]{60,76}={0,2}$", re.M),
)
# vLLM prints its arguments as a dict: `'api_key': ['k1', 'k2']`, every key of the list a secret
_LIST_ASSIGNMENT = lazy(
    r"(?i)(?P<name>\b[A-Za-z0-9_.\-]{0,63}(?:token|secret|password|passwd|api[_-]?key|access[_-]?key)s?)"
    r"(?P<sep>[\"']?\s*[:=]\s*)\[(?P<items>[^\]\n]{0,4096})\]"
)
_QUOTED = lazy(r"(?P<q>[\"'])(?:(?!(?P=q)).){1,512}(?P=q)")
# `password hunter2`: a password word, then a value that has a digit or a symbol in it (so that
# "password authentication failed" stays as it is)
_WORD_VALUE = lazy(
    r"(?i)(?P<name>\b(?:password|passwd|passphrase|pwd)) (?P<value>(?=\S{0,127}?[^\sA-Za-z])[^\s\"',;]{3,128})"
)
# NAME=value and NAME: value where NAME looks like a secret (HF_TOKEN=…, "api_key": "…", --api-key …)
_ASSIGNMENT = lazy(
    r"(?i)(?P<name>\b(?:(?:[A-Za-z0-9_.\-]{0,63}[_.\-])?(?:token|secret|password|passwd|api[_-]?key|access[_-]?key|cookie)"
    r"|[A-Za-z0-9_.\-]{0,63}[_.\-]key))"
    r"(?P<sep>[\"']?\s*[:=]\s*[\"']?)(?P<value>[^\s\"',;&]{3,})"
)
# a secret flag and its value in a command line printed as text
_FLAG_VALUE = lazy(r"(?P<name>--(?:api-key|hf-token|token|password|admin-api-key))(?P<sep>\s+|=)(?P<value>[^\s\"']{1,})")


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


class ArgToken(NamedTuple):
    """One token of a command line, as secret flags see it."""

    text: str
    flag: str | None = None  # the secret flag (as written) this token is or holds the value of; None: ordinary
    value: str | None = None  # the secret value in it; None: an ordinary token or a bare secret flag
    inline: bool = False  # ``--api-key=X``: flag and value in one token


def secret_flag_tokens(argv: Sequence[str]) -> Iterator[ArgToken]:
    """The tokens of ``argv`` with the secret flags' values found (``--api-key X`` and ``--api-key=X``).

    After a bare secret flag every token up to the next flag is its value: vLLM
    takes several keys. The one reading of a command line that masking
    (:func:`mask_argv`) and printing with variables (``runner.render``) share.
    """
    flag: str | None = None
    for tok in argv:
        if flag is not None and not tok.startswith("-"):
            yield ArgToken(tok, flag, tok)
            continue
        flag = None
        name, eq, value = tok.partition("=")
        if not is_secret_flag(name):
            yield ArgToken(tok)
        elif eq:
            yield ArgToken(tok, name, value, inline=True)
        else:
            yield ArgToken(tok, name)
            flag = name


def mask_argv(argv: Sequence[str]) -> list[str]:
    """A command line with the values of secret flags masked (``--api-key X`` and ``--api-key=X``)."""
    out: list[str] = []
    for t in secret_flag_tokens(argv):
        if t.flag is None:
            out.append(redact_text(t.text))
        elif t.value is None:
            out.append(t.text)
        else:
            out.append(f"{t.flag}={MASK}" if t.inline else MASK)
    return out


# tokenizer settings and counters named like secrets: `pad_token: <pad>`, `max_tokens=…`
_NOT_SECRET_NAME = lazy(r"(?i)(?:pad|eos|bos|unk|cls|sep|mask|special|max|min|num|total|added)[_.\-]?tokens?$")
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
    text = _LIST_ASSIGNMENT.sub(_mask_list, text)
    text = _FLAG_VALUE.sub(_mask_assignment, text)
    text = _WORD_VALUE.sub(_mask_word, text)
    return _ASSIGNMENT.sub(_mask_assignment, text)


def _mask_list(m: re.Match[str]) -> str:
    if _NOT_SECRET_NAME.search(m["name"]):
        return m[0]
    items = _QUOTED.sub(lambda q: f"{q['q']}{MASK}{q['q']}", m["items"])
    return f"{m['name']}{m['sep']}[{items}]"


def _mask_word(m: re.Match[str]) -> str:
    if m["value"].lower() in _NOT_SECRET_VALUE or m["value"].startswith("$") or m["value"] == MASK:
        return m[0]
    return f"{m['name']} {MASK}"


def redact_tree(value: Any) -> Any:
    """Every string in a JSON-like value (dicts, lists) through :func:`redact_text`; keys stay."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_tree(v) for v in value]
    return value
