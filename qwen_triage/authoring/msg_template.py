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


# The last name of a placeholder's expression says a number more surely than any word inside it:
# ``max_file_size`` is a size, not a path; ``num_errors`` a count, not an error.
_INT_NAME = re.compile(r"^(?:num|n|max|min|total)_|_(?:size|count|len|num|bytes|gb|mb|gib|mib|idx|index|rank|port|"
                       r"dim|heads|layers|tokens|blocks|seqs|steps?)$|^(?:size|count|len|n|idx|index|rank|port|step|"
                       r"epoch|world_size|nproc|nnodes|numel|ndim|dim|tp|pp|dp|ep)$|"
                       r"^(?:token|shard|device|gpu|layer|block|expert|local_rank)_ids?$", re.I)
_INT_CALL = re.compile(r"^(?:len|int|sum|max|min|round|ord)\(|\.(?:size|numel|count|__len__|dim|bit_length)\(\)?$|"
                       r"\.(?:ndim|nbytes|itemsize)$")
_TEXT_CALL = re.compile(r"^(type|str|repr|tuple|list|dict|set|sorted|getattr)\(")
_FLOAT_CALL = re.compile(r"^(?:float)\(|\.item\(\)$|/")
_STR_ID_HINT = re.compile(r"(?:^|[._])(?:model|repo|revision|name|tag|user|pipeline|trust)_?id$", re.I)
_STR_NAME = re.compile(r"_(?:str|name|type|kind|mode|backend|desc)$", re.I)  # device_str: "GPU", not a number
_DEVICE_WORD = re.compile(r"(?:^|[._])device_?(?:str|type|name|kind)$", re.I)
# a number that may have decimals (sizes in GiB, times): typed float, whose pattern takes an integer too
_FLOAT_NAME = re.compile(r"gib|\bgb\b|_gb\b|mib|memory|\bmem\b|_mem\b|seconds|secs\b|elapsed|duration|_time\b|"
                         r"timeout|latency|ratio|factor|percent|_pct\b", re.I)
_DEVICE_OBJ = re.compile(r"(?:^|[._])device_?$")  # a torch.device prints "cuda:0"
_LAST_NAME = re.compile(r"([A-Za-z_]\w*)\W*$")

# How each placeholder type is written in a catalogue template and matched in a printed line.
TYPE_REGEX = {
    "int": r"-?\d+",
    "float": r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|-?inf|nan",
    "hex": r"(?:0[xX])?[0-9a-fA-F]+",
    "path": r"\S+",
    "str": r".+?",
    "any": r".*?",
}


def type_of(f: Field) -> str:
    """The placeholder's type: int, float, hex, path, str (one word or name) or any (free text, a repr).

    The conversion decides when it says (``%d``, ``%x``, ``.2f``, ``%r``); else the expression that fills it,
    its last name first (``self.cfg.max_file_size`` -> int) and its words second (``ckpt_path`` -> path).
    """
    hint = f.hint.strip()
    conv = f.conv[-1:] if f.conv else ""
    if _FUNC_HINT.match(hint):
        return "str"
    if hint == "__LINE__":
        return "int"
    if hint == "__FILE__":
        return "path"
    if conv == "c":
        return "str"
    if conv in ("x", "X", "p"):
        return "hex"
    if conv and conv in "diuobn":
        return "int"
    if conv and conv in "eEfFgGaA%":
        return "float"
    if conv in ("r", "a"):  # a repr: a number's is the number, a string's is quoted
        kind = _hint_type(hint) if hint else "any"
        return kind if kind in ("int", "float", "path") else "any"
    if conv == "T":
        return "str"
    if not hint:
        return "any" if conv in ("w", "v") else "str"
    return _hint_type(hint)


def _hint_type(hint: str) -> str:
    """The type of a placeholder of no declared conversion, from the expression that fills it."""
    if _INT_CALL.search(hint):
        return "int"
    if m := _TEXT_CALL.match(hint):
        return "str" if m[1] == "type" else "any"
    if _FLOAT_CALL.search(hint):
        return "float"
    m = _LAST_NAME.search(hint)
    last = m[1] if m else hint
    if _STR_ID_HINT.search(last) or _STR_NAME.search(last) or _DEVICE_OBJ.search(hint):
        return "str"
    if _FLOAT_NAME.search(hint) and not re.search(r"(?:^|_)(?:num|count|n)(?:_|$)", last):
        return "float"
    if _INT_NAME.search(last):
        return "int"
    if _RATIO_HINT.search(last):
        return "float"
    for pattern, kind in ((_ARCHS_HINT, "any"), (_ARCH_HINT, "str"), (_ERR_HINT, "any"), (_PATH_HINT, "path"),
                          (_PORT_HINT, "int"), (_HOST_HINT, "str"), (_MODEL_HINT, "str"), (_RATIO_HINT, "float"),
                          (_NUM_HINT, "int"), (_GPU_HINT, "int")):
        if pattern.search(hint):
            return kind
    return "str"


def value_for(f: Field, function: str = "") -> str:
    """A plausible value for one placeholder, of its type (:func:`type_of`): a number where the program
    prints a number, a path where it prints a path, else a word chosen by what fills it."""
    hint = f.hint.strip()
    conv = f.conv[-1:] if f.conv else ""
    kind = type_of(f)
    if _FUNC_HINT.match(hint):
        return function or "load_model"
    if hint == "__FILE__":
        return "src/main.cc"
    if kind == "int":
        if hint == "__LINE__":
            return "120"
        if _PORT_HINT.search(hint):
            return "29500"
        if _GPU_HINT.search(hint) and not _NUM_HINT.search(hint.replace("rank", "")):
            return "0"
        return "4"
    if kind == "float":
        if conv and conv in "eEfFgGaA%":
            return "0.90" if ".2" in f.conv or not f.conv.startswith(".") else "0.9"
        return "0.9"
    if kind == "hex":
        return "0x7f3a2c000000" if conv == "p" else "1f"
    if conv == "c":
        return "x"
    if conv == "T":
        return "*errors.errorString"
    if kind == "path":
        value = "/data/models/model-a/config.json"
    elif kind == "any" and not hint:
        value = "value"
    else:
        value = _string_value(hint)
        if value[:1].isdigit():  # a word's expression that only sounds like a number: printed as a word
            value = "value"
    if conv in "rq" and conv:
        return f"'{value}'" if conv == "r" else f'"{value}"'
    return value


def _string_value(hint: str) -> str:
    """A value for a placeholder of no declared type: what its expression's name says it holds."""
    if not hint:
        return "value"
    for pattern, value in (
        (_DEVICE_WORD, "GPU"),  # "the number of required {device_str}s": GPUs
        (_DEVICE_OBJ, "cuda:0"),
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


def typed_text(parts: list[str | Field]) -> str:
    """The template with typed placeholders (``{int}``, ``{path}``…); literal braces doubled, as in str.format."""
    return "".join(p.replace("{", "{{").replace("}", "}}") if isinstance(p, str) else "{" + type_of(p) + "}"
                   for p in parts).rstrip("\n")


def typed_regex(parts: list[str | Field]) -> str:
    """A pattern for the printed message: literal text escaped (runs of blanks as any blanks), each field by its
    type. Only the first line that carries words: a log holds a message one line at a time."""
    lines: list[list[str | Field]] = [[]]
    for p in parts:
        if isinstance(p, str) and "\n" in p:
            first, *rest = p.split("\n")
            lines[-1].append(first)
            lines.extend([r] for r in rest)
        else:
            lines[-1].append(p)
    line = next((ln for ln in lines if any(isinstance(p, str) and re.search(r"[A-Za-z]{2}", p) for p in ln)),
                lines[0])
    out = []
    for p in line:
        if isinstance(p, str):
            out.append(r"\s+".join(re.escape(chunk) for chunk in re.split(r"[ \t]+", p)))
        else:
            out.append("(?:" + TYPE_REGEX[type_of(p)] + ")")
    pattern = "".join(out)
    while pattern.endswith("(?:.*?)") or pattern.endswith("(?:.+?)"):  # a trailing lazy field matches nothing
        pattern = pattern[: -len("(?:.*?)")]
    while pattern.startswith("(?:.*?)") or pattern.startswith("(?:.+?)"):
        pattern = pattern[len("(?:.*?)"):]
    return pattern.removesuffix(r"\s+").removeprefix(r"\s+")


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_']*[A-Za-z0-9]")


def literal_words(parts: list[str | Field]) -> list[str]:
    """The literal words of three letters or more, in order, each once: the keys of a lookup index."""
    seen: dict[str, None] = {}
    for p in parts:
        if isinstance(p, str):
            for w in _WORD.findall(p):
                if sum(c.isalpha() for c in w) >= 3:
                    seen.setdefault(w, None)
    return list(seen)
