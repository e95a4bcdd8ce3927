"""Message templates of C, C++, CUDA and Go source, read with a bounded tokenizer.

What is needed is lexical: string literals (escapes, adjacent literals joined,
``"%" PRIu64`` macros, C++ raw strings, Go raw strings), comments to skip,
brackets to find a call's arguments, and enough of the structure to know the
enclosing function for ``__func__``. A grammar-level parser (tree-sitter) would
add four compiled packages to the tool for one authoring command, and does not
expand macros either — and the calls that print messages here are macros
(NCCL's ``WARN``/``INFO``, llama.cpp's ``LLAMA_LOG_ERROR``, ``GGML_ABORT``).

Hostile input: every token pattern is linear (an unterminated comment or string
runs to the end of the file instead of being retried at every position), a file
is read up to a size cap, argument lists are cut at a token budget, and nesting
is bounded.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Iterator

from qwen_triage.authoring.msg_template import MAX_TEMPLATE, PRINTF, Field, Template, printf_parts, text_of


def _token_pattern(go: bool) -> re.Pattern[str]:
    """C/C++ (raw strings R"d(…)d") or Go (raw strings in backquotes); each alternative linear.

    Whitespace, comments, numbers and punctuation no rule of this module reads are skipped inside
    the match of the next token, so the loop over tokens sees only what it uses.
    """
    strings = r"(?P<bq>`[^`]*`?)" if go else r'(?P<raw>(?:u8|[uUL])?R"(?P<d>[^()\\\s"]{0,16})\(.*?(?:\)(?P=d)"|\Z))'
    skip = r"(?:\s+|//[^\n]*|/\*.*?(?:\*/|\Z)|\d[\w.]*|[^\w\s\"'`(){},;+.:/]+|/(?![/*])|:(?!:))*"
    return re.compile(
        skip + r"(?:" + strings
        + r"""|(?P<str>(?:u8|[uUL])?"(?:[^"\\\n]|\\.)*"?)|(?P<chr>'(?:[^'\\\n]|\\.){0,10}'?)"""
        r"|(?P<id>[A-Za-z_]\w*)|(?P<p>::|[(){},;+.`'\"])|(?P<end>\Z))",
        re.S,
    )


_C_TOKEN = _token_pattern(False)
_GO_TOKEN = _token_pattern(True)
MAX_ARG_TOKENS = 600  # tokens of one call's argument list looked at
MAX_DEPTH = 64  # brackets and braces tracked

# C/C++ calls that print a message: name -> (printed prefix, kind). The format is the first string
# literal among the arguments (NCCL's INFO takes its flags first).
C_CALLS: dict[str, tuple[str, str]] = {
    "WARN": ("node1:1234:1240 [0] NCCL WARN ", "WARN"),
    "INFO": ("node1:1234:1240 [0] NCCL INFO ", "INFO"),
    "fprintf": ("", "fprintf"),
    "GGML_ABORT": ("{file}:{line}: ", "GGML_ABORT"),
    "printf": ("", "printf"),
}
# Check and throw macros that concatenate their arguments into the message (Gloo's MakeString, torch's c10::str):
# name -> arguments before the message (the condition, the two values compared). Each literal argument is
# text, any other a field: ``GLOO_ERROR_MSG("Read error ", peer_.str(), ": ", strerror(errno))``.
C_CONCAT_CALLS: dict[str, int] = {
    "GLOO_ERROR_MSG": 0, "GLOO_ENFORCE": 1, "GLOO_ENFORCE_EQ": 2, "GLOO_ENFORCE_NE": 2, "GLOO_ENFORCE_LE": 2,
    "GLOO_ENFORCE_LT": 2, "GLOO_ENFORCE_GE": 2, "GLOO_ENFORCE_GT": 2,
    "TORCH_CHECK": 1, "TORCH_CHECK_VALUE": 1, "TORCH_CHECK_TYPE": 1, "TORCH_CHECK_INDEX": 1,
    "TORCH_CHECK_NOT_IMPLEMENTED": 1, "TORCH_INTERNAL_ASSERT": 1, "C10_THROW_ERROR": 1,
}
# Check and throw macros whose message is a printf format (TensorRT-LLM's, through fmtstr): name -> (index of
# the format among the arguments, what the exception prints before it).
C_PRINTF_CHECKS: dict[str, tuple[int, str]] = {
    "TLLM_THROW": (0, "[TensorRT-LLM][ERROR] "),
    "TLLM_CHECK_WITH_INFO": (1, "[TensorRT-LLM][ERROR] Assertion failed: "),
    "TLLM_CHECK_DEBUG_WITH_INFO": (1, "[TensorRT-LLM][ERROR] Assertion failed: "),
}
# An error code among a call's first arguments, the message the argument after it (Triton's
# ``Status(Status::Code::INVALID_ARG, "…")``, ``TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "…")``,
# ``RETURN_ERROR_IF_FALSE(cond, TRITONSERVER_ERROR_INVALID_ARG, std::string("…") + x)``); or a log level
# (``LOG_MESSAGE(TRITONSERVER_LOG_ERROR, (std::string("…") + x).c_str())``).
_ERROR_CODE = re.compile(r"^(?:(?:\w+::)*Status::Code::[A-Z_]+|TRITONSERVER_ERROR_[A-Z_]+)$")
_LOG_LEVEL_ARG = re.compile(r"^[A-Z0-9_]*LOG_(?:ERROR|WARN|WARNING|FATAL)$")
# any macro or function whose name says error / warning level: LLAMA_LOG_ERROR, GGML_LOG_WARN, LOG_ERR,
# SRV_ERR, SLT_WRN, ERROR, LOG_WARNING, gguf_log_error…
_LEVEL_NAME = re.compile(r"^(?:[A-Z0-9_]*_)?(?:ERR|ERROR|WRN|WARN|WARNING|FATAL|CRIT|CRITICAL)$|^LOG_?(?:ERR|ERROR|WRN|WARN)"
                         r"|^(?:[a-z0-9]+_)*log_(?:error|warn|warning)$")
_EXCEPTIONS = re.compile(r"^(?:std::)?(?:runtime_error|invalid_argument|out_of_range|logic_error|length_error|"
                         r"domain_error|range_error|overflow_error|underflow_error|system_error|[A-Za-z_]\w*(?:Error|"
                         r"Exception|_error))$")
_FORMATTERS = frozenset({"format", "string_format", "std::format", "fmt::format", "strprintf", "fmt.Sprintf",
                         "ggml_format", "llama_format_tensor_shape"})
GO_CALLS: dict[str, str] = {
    "fmt.Errorf": "error", "errors.New": "error", "slog.Error": "slog", "slog.Warn": "slog",
    "slog.ErrorContext": "slog", "slog.WarnContext": "slog", "log.Fatalf": "log", "log.Fatal": "log",
    "log.Panicf": "log", "panic": "panic", "fmt.Fprintf": "fprintf", "fmt.Fprintln": "fprintf",
}
_PRI = re.compile(r"^(?:PRI|SCN)([diouxX])(?:8|16|32|64|LEAST\d+|FAST\d+|MAX|PTR)$")
_KEYWORDS = frozenset({"if", "for", "while", "switch", "return", "sizeof", "catch", "else", "do", "case", "defined",
                       "func", "go", "defer", "range", "decltype", "alignof", "static_assert", "typeof"})
_ESC = {"n": "\n", "t": "\t", "r": "", "\\": "\\", '"': '"', "'": "'", "0": "", "a": "", "b": "", "f": "", "v": "",
        "e": "", "?": "?"}


@dataclass(slots=True)
class _Tok:
    kind: str  # id, str, p, num
    text: str
    pos: int


def _unescape(body: str) -> str:
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            n = body[i + 1]
            if n in "xX":  # \x1b etc: dropped, a control code is not a word
                j = i + 2
                while j < len(body) and j < i + 4 and body[j] in "0123456789abcdefABCDEF":
                    j += 1
                i = j
                continue
            if n in "uU":
                i += 6 if n == "u" else 10
                continue
            if n in "01234567":
                j = i + 1
                while j < len(body) and j < i + 4 and body[j] in "01234567":
                    j += 1
                i = j
                continue
            out.append(_ESC.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _literal(tok: _Tok) -> str:
    t = tok.text
    if tok.kind == "bq":
        return t[1:-1] if t.endswith("`") and len(t) > 1 else t[1:]
    if tok.kind == "raw":
        q = t.index('"')
        d = t[q + 1:t.index("(", q)]
        body = t[t.index("(", q) + 1:]
        end = f'){d}"'
        return body[: -len(end)] if body.endswith(end) else body
    q = t.index('"')
    body = t[q + 1:]
    body = body[:-1] if body.endswith('"') else body
    return _unescape(body)


def _tokens(text: str, go: bool) -> list[_Tok]:
    out = []
    for m in (_GO_TOKEN if go else _C_TOKEN).finditer(text):
        kind = m.lastgroup
        if kind is None or kind == "end":
            continue  # the end of the text, after whitespace or an unterminated comment
        if kind == "d":
            kind = "raw"
        out.append(_Tok(kind, m.group(kind), m.start(kind)))
    return out


def _is_str(t: _Tok) -> bool:
    return t.kind in ("str", "raw", "bq")


def _call_name(toks: list[_Tok], i: int) -> tuple[str, int]:
    """The qualified name ending at toks[i] (``std::runtime_error``, ``fmt.Errorf``) and its first index."""
    j = i
    while j >= 2 and toks[j - 1].text in ("::", ".") and toks[j - 2].kind == "id":
        j -= 2
    return "".join(t.text for t in toks[j:i + 1]), j


def _closers(toks: list[_Tok]) -> dict[int, int]:
    """Index of each ``(`` -> index of its ``)``, in one pass (brackets left open map to nothing)."""
    out: dict[int, int] = {}
    stack: list[int] = []
    for i, t in enumerate(toks):
        if t.kind != "p":
            continue
        if t.text == "(":
            stack.append(i)
        elif t.text == ")" and stack:
            out[stack.pop()] = i
    return out


def _args(toks: list[_Tok], open_i: int) -> tuple[list[list[_Tok]], int]:
    """The top-level arguments of the call whose ``(`` is at ``open_i``, and the index after its ``)``."""
    args: list[list[_Tok]] = [[]]
    depth = 0
    i = open_i + 1
    limit = min(len(toks), open_i + MAX_ARG_TOKENS)
    while i < limit:
        t = toks[i]
        if t.kind == "p" and t.text in "([{":
            depth += 1
        elif t.kind == "p" and t.text in ")]}":
            if depth == 0:
                return ([] if args == [[]] else args), i + 1
            depth -= 1
        elif t.kind == "p" and t.text == "," and depth == 0:
            args.append([])
            i += 1
            continue
        args[-1].append(t)
        i += 1
    return [], i  # no closing bracket in budget: not read


def _format_arg(arg: list[_Tok]) -> str | None:
    """The literal of an argument made of string literals and PRI macros only, else None."""
    got = _format_with_macros(arg)
    return got[0] if got is not None and not got[1] else None


def _format_with_macros(arg: list[_Tok]) -> tuple[str, list[tuple[int, str]]] | None:
    """Adjacent literals joined; ``PRIu64`` as its conversion; another identifier between literals (a macro
    parameter: ``"Call to " name " failed"``) as a ``%s`` field, returned with its place among the fields."""
    if not arg or not _is_str(arg[0]):
        return None
    out: list[str] = []
    inserted: list[tuple[int, str]] = []
    for t in arg:
        if _is_str(t):
            out.append(_literal(t))
        elif t.kind == "id" and (m := _PRI.match(t.text)):
            out.append({"d": "lld", "i": "lli", "u": "llu", "o": "llo", "x": "llx", "X": "llX"}[m[1]])
        elif t.kind == "id" and len(inserted) < 8:
            inserted.append((sum(1 for f in PRINTF.finditer("".join(out)) if f["conv"] != "%"), t.text))
            out.append("%s")
        else:
            return None
    return "".join(out), inserted


def _hint(arg: list[_Tok]) -> str:
    return "".join(t.text if t.kind != "p" or t.text not in ("::", "->", ".") else t.text for t in arg)[:80]


def _message(args: list[list[_Tok]], toks_of_call: bool = True) -> tuple[str, list[str]] | None:
    """The format (the first literal argument) and the hints of the arguments after it."""
    for k, arg in enumerate(args[:4]):
        got = _format_with_macros(arg)
        if got is not None:
            fmt, inserted = got
            hints = [_hint(a) for a in args[k + 1:]]
            for index, name in inserted:
                hints.insert(index, name)
            return fmt, hints
    return None


def clike_templates(text: str, rel: str, *, go: bool = False) -> Iterator[Template]:
    """Every message site of one C/C++/CUDA or Go file."""
    toks = _tokens(text, go)
    lines = [m.start() for m in re.finditer("\n", text)]

    def line_of(pos: int) -> int:
        return bisect.bisect_right(lines, pos) + 1

    funcs: list[str] = []  # enclosing function names by brace depth ("" for a non-function block)
    pending_func = ""  # an identifier followed by (...) since the last statement boundary
    paren = 0
    i = 0
    n = len(toks)
    closers = _closers(toks)
    spent, budget = 0, 50 * n + 100_000  # tokens of argument lists read, at most
    while i < n:
        t = toks[i]
        if t.kind == "p":
            if t.text == "(":
                if paren == 0 and i > 0 and toks[i - 1].kind == "id" and toks[i - 1].text not in _KEYWORDS:
                    pending_func = _call_name(toks, i - 1)[0].rsplit(":", 1)[-1].rsplit(".", 1)[-1]
                paren = min(paren + 1, MAX_DEPTH)
            elif t.text == ")":
                paren = max(paren - 1, 0)
            elif t.text == "{":
                if len(funcs) < MAX_DEPTH:
                    funcs.append(pending_func if paren == 0 else "")
                pending_func = ""
            elif t.text == "}":
                if funcs:
                    funcs.pop()
                pending_func = ""
                paren = 0
            elif t.text == ";":
                pending_func = ""
                paren = 0
            i += 1
            continue
        if not go and t.kind == "id" and _LEVEL_NAME.search(t.text) and i + 1 < n \
                and text[t.pos + len(t.text):toks[i + 1].pos].lstrip().startswith("<<"):
            found = _stream_site(toks, i, rel, next((f for f in reversed(funcs) if f), ""), line_of)
            if found is not None:
                yield found
            i += 1
            continue
        if t.kind != "id" or i + 1 >= n or toks[i + 1].text != "(":
            i += 1
            continue
        close = closers.get(i + 1, n)
        if close - i > MAX_ARG_TOKENS:  # unclosed, or too long to be a message call
            i += 1
            continue
        spent += close - i
        if spent > budget:
            return  # a file built to make this slow: what was found so far stands
        name, start = _call_name(toks, i)
        function = next((f for f in reversed(funcs) if f), "")
        found = _site(toks, i, name, start, rel, function, line_of, go)
        if found is not None:
            yield found
        i += 1


def _site(toks: list[_Tok], i: int, name: str, start: int, rel: str, function: str, line_of, go: bool
          ) -> Template | None:
    line = line_of(toks[start].pos)
    args, _end = _args(toks, i + 1)
    if not args:
        return None
    prev = toks[start - 1].text if start > 0 else ""
    if go:
        return _go_site(args, name, rel, line, function)
    if prev == "throw" or (prev == "new" and start > 1 and toks[start - 2].text == "throw"):
        if not _EXCEPTIONS.match(name):
            return None
        got = _message(args) or _inner_format(args[0])
        if got is None:
            concat = _concat_parts(args[0])
            return _make(rel, line, "throw", concat, text_of(concat), "", function) if concat else None
        fmt, hints = got
        # a plain literal is the message itself; only a format call's literal holds conversions
        thrown: list[str | Field] = printf_parts(fmt, hints) if hints or not _format_arg(args[0]) else [fmt]
        return _make(rel, line, "throw", thrown, fmt, "", function)
    if name in C_PRINTF_CHECKS:
        k, prefix = C_PRINTF_CHECKS[name]
        fmt_arg = _format_with_macros(args[k]) if len(args) > k else None
        if fmt_arg is None:
            return None
        hints = [_hint(a) for a in args[k + 1:]]
        for index, hint in fmt_arg[1]:
            hints.insert(index, hint)
        return _make(rel, line, "throw", printf_parts(fmt_arg[0], hints), fmt_arg[0], prefix, function)
    for k, arg in enumerate(args[:3]):
        code = "".join(t.text for t in arg) if all(t.kind == "id" or t.text == "::" for t in arg) else ""
        if k + 1 < len(args) and (_ERROR_CODE.match(code) or (k == 0 and _LOG_LEVEL_ARG.match(code))):
            said = _expr_parts(args[k + 1])
            if not said:
                return None
            kind = "throw" if _ERROR_CODE.match(code) else "LOG_" + code.rsplit("LOG_", 1)[-1]
            return _make(rel, line, kind, said, text_of(said), "", function)
    if name in C_CONCAT_CALLS:
        concat = _variadic_parts(args[C_CONCAT_CALLS[name]:])
        return _make(rel, line, "throw", concat, text_of(concat), "", function) if concat else None
    if name in C_CALLS:
        prefix, kind = C_CALLS[name]
        if name in ("fprintf",) and _hint(args[0]) != "stderr":
            return None
        if name == "printf":
            return None  # stdout: progress and results, not failures
    elif _LEVEL_NAME.search(name.rsplit(":", 1)[-1]):
        prefix, kind = "", name
    else:
        return None
    got = _message(args)
    if got is None:
        return None
    fmt, hints = got
    prefix = prefix.replace("{file}", rel).replace("{line}", str(line))
    return _make(rel, line, kind, printf_parts(fmt, hints), fmt, prefix, function)


def _go_site(args: list[list[_Tok]], name: str, rel: str, line: int, function: str) -> Template | None:
    """A Go call's message: a logger (slog, log), an error value (errors.New, fmt.Errorf), a panic, stderr."""
    kind = GO_CALLS.get(name)
    if kind is None:
        return None
    if kind == "fprintf":
        if not _hint(args[0]).startswith("os.Stderr"):
            return None
        kind = "log"
    if kind == "panic" and args and args[0] and args[0][0].kind == "id":
        inner = _inner_format(args[0])
        if inner is None:
            return None
        fmt, hints = inner
    else:
        got = _message(args)
        if got is None:
            concat = _concat_parts(args[0]) if name in ("errors.New", "panic") else None
            if not concat:
                return None
            return _make(rel, line, name, concat, text_of(concat), "panic: " if kind == "panic" else "", function)
        fmt, hints = got
    plain = ("errors.New", "slog.Error", "slog.Warn", "slog.ErrorContext", "slog.WarnContext", "log.Fatal", "panic")
    parts: list[str | Field] = printf_parts(fmt, hints, go=True) if kind == "panic" or name not in plain else [fmt]
    prefix, suffix = "", ""
    if kind == "slog":
        level = "ERROR" if "Error" in name else "WARN"
        prefix = f'time=2026-12-01T10:00:00.000Z level={level} source={rel.rsplit("/", 1)[-1]}:{line} msg="'
        suffix = '"'
    elif kind == "panic":
        prefix = "panic: "
    return _make(rel, line, name, parts, fmt, prefix, function, suffix)


def _stream_site(toks: list[_Tok], i: int, rel: str, function: str, line_of) -> Template | None:
    """``LOG_ERROR << "text " << x << " more";`` (Triton's level streams): the literals up to the statement's end
    as text (adjacent ones joined), each run of other tokens between them a field."""
    parts: list[str | Field] = []
    run: list[_Tok] = []
    depth = 0
    for t in toks[i + 1:i + 1 + MAX_ARG_TOKENS]:
        if t.kind == "p" and t.text in "([{":
            depth += 1
        elif t.kind == "p" and t.text in ")]}":
            depth -= 1
            if depth < 0:
                break
        elif t.kind == "p" and t.text in ";{}" and depth == 0:
            break
        if _is_str(t) and depth == 0:
            if run:
                parts.append(Field("s", _hint(run)))
                run = []
            if parts and isinstance(parts[-1], str):
                parts[-1] += _literal(t)
            else:
                parts.append(_literal(t))
        else:
            run.append(t)
    else:
        return None  # no statement end in budget: not read
    if run:
        parts.append(Field("s", _hint(run)))
    if not any(isinstance(p, str) and p.strip() for p in parts):
        return None
    return _make(rel, line_of(toks[i].pos), toks[i].text, parts, text_of(parts), "", function)


def _unwrap(arg: list[_Tok]) -> list[_Tok]:
    """An expression without what only carries a message: ``( X )``, ``X.c_str()``, ``std::string( X )``."""
    while len(arg) > 2:
        if len(arg) > 4 and arg[-4].text == "." and arg[-3].text == "c_str" and arg[-2].text == "(" \
                and arg[-1].text == ")":
            arg = arg[:-4]
            continue
        start = 0
        if arg[0].text == "std" and len(arg) > 4 and arg[1].text == "::" and arg[2].text == "string":
            start = 3
        elif arg[0].text == "string":
            start = 1
        if arg[start].text != "(" or arg[-1].text != ")":
            break
        depth = 0
        for j, t in enumerate(arg[start:], start):  # the bracket at ``start`` closes at the end, not before
            if t.kind == "p" and t.text in "([{":
                depth += 1
            elif t.kind == "p" and t.text in ")]}":
                depth -= 1
                if depth == 0 and j != len(arg) - 1:
                    return arg
        arg = arg[start + 1:-1]
    return arg


def _expr_parts(arg: list[_Tok]) -> list[str | Field] | None:
    """A message argument: a literal (the message as written), else a concatenation of literals and values."""
    lit = _format_arg(arg)
    return [lit] if lit is not None else _concat_parts(arg)


def _concat_parts(arg: list[_Tok], depth_left: int = 4) -> list[str | Field] | None:
    """``"text " + std::to_string(x) + " more"``: literals and the expressions between them (a bracketed or
    ``std::string(…)`` operand read the same way)."""
    arg = _unwrap(arg)
    operands: list[list[_Tok]] = [[]]
    depth = 0
    for t in arg:
        if t.kind == "p" and t.text in "([{":
            depth += 1
        elif t.kind == "p" and t.text in ")]}":
            depth -= 1
        if t.kind == "p" and t.text == "+" and depth == 0:
            operands.append([])
            continue
        operands[-1].append(t)
    parts: list[str | Field] = []
    for op in operands:
        lit = _format_arg(op)
        if lit is not None:
            parts.append(lit)
            continue
        # a bracketed or `std::string(…)` operand: its own concatenation
        nested = _concat_parts(op, depth_left - 1) if depth_left > 0 and len(_unwrap(op)) < len(op) else None
        if nested:
            parts.extend(nested)
        elif op:
            inner = _inner_format(op)
            parts.extend(printf_parts(*inner) if inner else [Field("s", _hint(op))])
    return parts if any(isinstance(p, str) for p in parts) else None


def _variadic_parts(args: list[list[_Tok]]) -> list[str | Field] | None:
    """A concatenating macro's message arguments: literals as text, anything else a field; None without text."""
    parts: list[str | Field] = []
    for arg in args[:32]:
        lit = _format_arg(arg)
        parts.append(lit if lit is not None else Field("s", _hint(arg)))
    return parts if any(isinstance(p, str) and p.strip() for p in parts) else None


def _inner_format(arg: list[_Tok]) -> tuple[str, list[str]] | None:
    """``format("…", x)`` / ``fmt.Sprintf("…", x)`` as an argument: its format and hints."""
    if len(arg) < 3 or arg[0].kind != "id":
        return None
    j = 0
    while j + 2 < len(arg) and arg[j + 1].text in ("::", ".") and arg[j + 2].kind == "id":
        j += 2
    name = "".join(t.text for t in arg[: j + 1])
    if name not in _FORMATTERS or j + 1 >= len(arg) or arg[j + 1].text != "(":
        return None
    inner, _ = _args(arg, j + 1)
    return _message(inner) if inner else None


def _make(rel: str, line: int, kind: str, parts: list[str | Field], fmt: str, prefix: str, function: str,
          suffix: str = "") -> Template | None:
    if len(fmt) > MAX_TEMPLATE:
        return None
    return Template(file=rel, line=line, kind=kind, parts=parts, text=fmt, prefix=prefix, function=function,
                    suffix=suffix)
