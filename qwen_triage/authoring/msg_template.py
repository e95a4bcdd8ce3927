"""A message template found in a program's source, and an example line rendered from it.

The extractors (``msgs_python``, ``msgs_clike``) reduce every message to the same
shape: literal text and placeholders, each placeholder with its conversion
(``d``, ``s``, ``.2f``, ``r``…) and a hint — the expression the program fills it
with (``path``, ``self.rank``, ``__func__``). The example fills each placeholder
with a plausible value chosen by hint first and conversion second, so a rule that
keys on the fixed words and captures a number, a path or a GPU index sees the
kind of value the program would print, and one that keys on one report's values
does not match by accident (generic strings get a neutral word).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_TEMPLATE = 2000  # characters of a template kept; a longer literal is data, not a message


@dataclass(frozen=True, slots=True)
class Field:
    conv: str  # printf conversion ("d", "s", "zu", ".2f", "w"), "r"/"s"/"a" for Python fields, "" unknown
    hint: str = ""  # the expression that fills it, as written
    raw: str = ""  # the placeholder as written in a format string ("%5.2f"); '' for an expression field

    def shown(self) -> str:
        return self.raw or "{" + (self.hint or self.conv) + "}"


@dataclass(slots=True)
class Template:
    """One message site: where, what kind of call, the parts, and how the program prefixes it."""

    file: str
    line: int
    kind: str  # "raise", "log.error", "warnings.warn", "WARN", "fmt.Errorf", "throw"…
    parts: list[str | Field]
    text: str  # the template as written (format string, f-string body)
    prefix: str = ""  # printed before the message ("ValueError: ", "host:1:2 [0] NCCL WARN ")
    function: str = ""  # the enclosing function, for __func__
    suffix: str = ""  # printed after it (a logfmt closing quote)
    example: str = field(default="")

    def literal_chars(self) -> int:
        """Letters in the fixed text: a template of placeholders only ("%s") says nothing to match."""
        return sum(c.isalpha() for p in self.parts if isinstance(p, str) for c in p)


# printf conversions of C, Python %-format and Go's fmt: flags, width, precision, length, verb
PRINTF = re.compile(
    r"%(?:\((?P<key>[A-Za-z_]\w{0,40})\))?(?P<flags>[-+ #0']{0,5})(?P<width>\*|\d{1,3})?"
    r"(?:\.(?P<prec>\*|\d{1,3}))?(?P<len>hh|h|ll|l|L|q|j|z|t|I64|I32)?(?P<conv>[diouxXeEfFgGaAcsprvwqTtbn%])"
)


def printf_parts(fmt: str, hints: list[str], *, go: bool = False) -> list[str | Field]:
    """Split a printf-style format into literal text and fields, pairing fields with argument hints in order."""
    parts: list[str | Field] = []
    pos = 0
    args = iter(hints)
    for m in PRINTF.finditer(fmt):
        conv = m["conv"]
        if not go and conv in "vwqTtb":
            continue  # Go's verbs mean nothing to C or Python
        parts.append(fmt[pos:m.start()])
        pos = m.end()
        if conv == "%":
            parts.append("%")
            continue
        for star in (m["width"], m["prec"]):
            if star == "*":
                next(args, "")
        hint = m["key"] or next(args, "")
        spec = (f".{m['prec']}" if m["prec"] and m["prec"] != "*" else "") + (m["len"] or "") + conv
        parts.append(Field(spec, hint, m.group()))
    parts.append(fmt[pos:])
    return [p for p in parts if p != ""]


def text_of(parts: list[str | Field]) -> str:
    """The template as the source writes it: literal text, format placeholders, ``{expression}`` fields."""
    return "".join(p if isinstance(p, str) else p.shown() for p in parts)


_PATH_HINT = re.compile(r"path|file|fname|dir\b|dirname|folder|ckpt|checkpoint|filename|location", re.I)
_GPU_HINT = re.compile(r"\b(?:gpu|dev|device|cuda|local_?rank|rank|cudaDev|nvmlDev|busId|ordinal)", re.I)
_PORT_HINT = re.compile(r"port\b|port_?num", re.I)
_HOST_HINT = re.compile(r"host(?:name)?\b|addr|\bip\b|endpoint|master_?addr|url", re.I)
_FUNC_HINT = re.compile(r"^(?:__func__|__FUNCTION__|__PRETTY_FUNCTION__|func)$")
_MODEL_HINT = re.compile(r"(?:^|[._])(?:model(?:_?(?:name|id|path|tag))?|repo(?:_?id)?)$", re.I)
_ARCHS_HINT = re.compile(r"(?:^|[._])(?:architectures|archs)$", re.I)
_ARCH_HINT = re.compile(r"(?:^|[._])(?:architecture|arch|model_arch|arch_name)$", re.I)
_RATIO_HINT = re.compile(r"util|ratio|fraction|frac\b|percent|prob\b|temperature|top_p", re.I)
_NUM_HINT = re.compile(r"size|num|count|total|len\b|len\(|_len|bytes|gib|mib|\bgb\b|mem|free|used|limit|max|min|"
                       r"\bn\b|heads|layers|tokens|blocks|seqs|dim|idx|index|world|nproc|nnodes|timeout|seconds|"
                       r"version|step|epoch|batch", re.I)
_DTYPE_HINT = re.compile(r"dtype|quant", re.I)
_ERR_HINT = re.compile(r"err(?!upt)|exc|\be\b|reason|strerror|what\(\)|status|result", re.I)
_KEY_HINT = re.compile(r"key|param|weight|tensor|layer", re.I)


def value_for(f: Field, function: str = "") -> str:
    """A plausible value for one placeholder: by what fills it, else by its conversion."""
    hint = f.hint.strip()
    conv = f.conv[-1:] if f.conv else ""
    if _FUNC_HINT.match(hint):
        return function or "load_model"
    if hint in ("__FILE__",):
        return "src/main.cc"
    if hint == "__LINE__":
        return "120"
    if conv in "diuoxXcbn" and conv:
        if conv == "c":
            return "x"
        if conv in "xX":
            return "1f"
        if _PORT_HINT.search(hint):
            return "29500"
        if _GPU_HINT.search(hint):
            return "0"
        return "4"
    if conv in "eEfFgGaA" and conv:
        return "0.90" if ".2" in f.conv or not f.conv.startswith(".") else "0.9"
    if conv == "p":
        return "0x7f3a2c000000"
    if conv == "T":
        return "*errors.errorString"
    value = _string_value(hint)
    if conv in "rq":
        return f"'{value}'" if conv == "r" else f'"{value}"'
    return value


def _string_value(hint: str) -> str:
    """A value for a placeholder of no declared type: what its expression's name says it holds."""
    if not hint:
        return "value"
    for pattern, value in (
        (_ARCHS_HINT, "['Qwen2ForCausalLM']"),  # a list prints as one: Model architectures ['X'] are …
        (_ARCH_HINT, "Qwen2ForCausalLM"),
        (_RATIO_HINT, "0.9"),
        (_ERR_HINT, "error detail"),
        (_PATH_HINT, "/data/models/model-a/config.json"),
        (_PORT_HINT, "29500"),
        (_HOST_HINT, "10.0.0.2"),
        (_GPU_HINT, "0"),
        (_MODEL_HINT, "org/model-a"),
        (_NUM_HINT, "4"),
        (_DTYPE_HINT, "bfloat16"),
        (_KEY_HINT, "model.layers.0.mlp.weight"),
    ):
        if pattern.search(hint):
            return value
    return "value"


def render(t: Template) -> str:
    """The example: the message as the program prints it, prefix and all."""
    body = "".join(p if isinstance(p, str) else value_for(p, t.function) for p in t.parts)
    body = body.rstrip("\n")
    return f"{t.prefix}{body}{t.suffix}"
