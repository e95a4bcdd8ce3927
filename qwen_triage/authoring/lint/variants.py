"""The variants of a `match` example that `rules lint` runs: the same failure, printed another way.

A rule is written from a few lines; the same failure reaches a user wrapped by whatever carried it
(journald, `docker compose`, `kubectl logs --timestamps`, Ray, torchrun, another engine's logger)
and in the wording of another release. Three kinds of variant, each its own check
(:mod:`.robustness`):

* **wrapper**: the example's message under each wrapper the normaliser strips
  (:data:`qwen_triage.engine.normalize.WRAPPER_SAMPLES`, the normaliser's own samples, so the two
  cannot disagree). A wrapper is tried where the normaliser really strips it off this example, and
  only where the record it makes is one the rule's ``sources`` may read (:mod:`qwen_triage.engine.origin`:
  a kernel rule reads kernel records, not a server's). The rule sees the same message: a miss is a bug.
* **head**: an engine's own head the normaliser leaves in the message (SGLang's ``[date TP0]``), for the
  rules of that engine: a pattern anchored at ``^`` misses it.
* **drift**: what real releases change: the case of a sentence's first word, the quotes around a value
  (' ↔ " ↔ none, backticks), an exception name repeated (``RuntimeError: RuntimeError: …``) or printed
  without its module, an errno moved (``[Errno 98] …`` ↔ ``… (errno 98)``), a word added inside a long
  matched phrase. Only what a release can reword drifts: a traceback's frames and the source lines they
  echo are the interpreter's own format (CPython always prints ``File "path", line N, in f``), a value
  after ``key=`` is quoted by its formatter (logfmt's ``error="…"``, a repr's ``host='…'``), a
  ``KeyError``'s message is the key's ``repr``, and a word is added between two words of prose, not
  between a field's name and its value or inside a column layout.

Every variant is rendered from the example alone, the same way each run: lint stays deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from qwen_triage.authoring.lint.examples import fires
from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.normalize import WRAPPER_SAMPLES, normalize
from qwen_triage.engine.origin import APP, KERNEL, SYSTEM_SOURCES, SYSTEMD, family
from qwen_triage.engine.records import LineRecord
from qwen_triage.rulepack.pack import LoadedRule, RulePack, compile_pattern

# Engine heads the normaliser does not strip (the message keeps them), for the rules of that engine.
# (TGI's and Dynamo's tracing head after its stamp, `…Z ERROR text_generation_launcher: `, is a wrapper now.)
HEADS: tuple[tuple[str, str], ...] = (
    ("sglang", "[2026-11-29 10:00:01 TP0] {}"),  # sglang's logger: date, then DP/TP/PP ranks
)

# A literal phrase longer than this many words is a sentence, not a core (lint's pattern-long-literal,
# and the drift that adds a word inside a longer matched phrase).
LONG_WORDS = 10


@dataclass(frozen=True)
class Variant:
    kind: str  # "wrapper", "head" or "drift"
    name: str  # what was done, as the report says it
    text: str


@dataclass(frozen=True)
class _Line:
    head: str  # the wrappers the line came in (stripped by the normaliser)
    message: str
    tail: str  # what the normaliser left off the end (a logfmt value's closing quote)
    record: LineRecord
    interpreter: bool = False  # a traceback's frame or the source line it echoes: no release rewords it

    def with_message(self, message: str) -> str:
        return self.head + message + self.tail


# CPython's traceback frame (`traceback.FrameSummary`, `PyTraceBack_Print`): always this form, double quotes.
_FRAME = re.compile(r'^\s*File "[^"\n]+", line \d+')


def _lines(example: str) -> list[_Line]:
    out: list[_Line] = []
    for text in example.splitlines() or [""]:
        rec = normalize(text)
        at = text.rfind(rec.message)  # the message is a substring of the line (engine.normalize)
        frame = _FRAME.match(rec.message) is not None
        # the source line a frame echoes: indented, right after its frame (the program's code, not a message)
        echo = bool(out) and out[-1].interpreter and _FRAME.match(out[-1].message) is not None \
            and rec.message[:1].isspace()
        out.append(_Line(text[:at], rec.message, text[at + len(rec.message):], rec, frame or echo))
    return out


def _template(template: str) -> tuple[str, str]:
    prefix, _, suffix = template.partition("{}")
    return prefix, suffix


# Not rendered as a logfmt value: a message that already holds logfmt's key="value" pairs (a line cut from
# one: quoting it again makes no real line), or a quote or backslash, which the value would escape
# (`\"`): only Go programs' own messages come quoted so, and their rules' examples show it.
_LOGFMT_ALREADY = re.compile(r'(?:^|\s)(?:msg|level|time)=|["\\]')


def _go_quoted(message: str) -> str:
    """A message as Go's logfmt writers quote a value (slog, logrus): backslash and double quote escaped."""
    return message.replace("\\", "\\\\").replace('"', '\\"')


@lru_cache(maxsize=64)
def _family_of_sample(template: str) -> str | None:
    return family(normalize(template.replace("{}", "x", 1)))


def _natural_family(lr: LoadedRule, lines: list[_Line]) -> str:
    """Who prints the example: what its own wrapper says, else what the rule's sources say."""
    fam = family(lines[0].record)
    if fam is not None:
        return fam
    sources = frozenset(lr.rule.sources)
    if sources <= SYSTEM_SOURCES:
        return KERNEL if KERNEL in sources else SYSTEMD
    return APP


# `where` fields that only the example's own head carries (NCCL's `transport/nvls.cc:244` before `NCCL WARN`, a
# Python logger's name): a rule keyed on one is wrapped around its whole line, head kept, as a carrier would
# pass the line on.
HEAD_FIELDS = frozenset({"source", "logger"})


def _wrapped(lines: list[_Line], fmt: str, template: str, keep_head: bool = False) -> str | None:
    """Every line's message under the wrapper, or None where the normaliser would not strip it exactly
    (NCCL's prefix is only ever stripped off NCCL's own lines; a multi-line message is one logfmt value).
    With ``keep_head`` the wrapper goes around the line as it was (its own head kept inside)."""
    prefix, suffix = _template(template)
    if fmt == "logfmt" and (len(lines) > 1 or _LOGFMT_ALREADY.search(lines[0].message)):
        return None
    out = []
    for line in lines:
        head = line.head if keep_head else ""
        body = _go_quoted(line.message) if fmt == "logfmt" else line.message
        text = prefix + head + body + suffix
        if normalize(text).message not in (body, body + suffix):
            return None
        out.append(text)
    return "\n".join(out)


def wrapper_variants(lr: LoadedRule, example: str, lines: list[_Line] | None = None) -> Iterator[Variant]:
    lines = lines or _lines(example)
    natural = _natural_family(lr, lines)
    keep_head = not HEAD_FIELDS.isdisjoint(lr.rule.match.where)
    for fmt, template in WRAPPER_SAMPLES:
        fam = _family_of_sample(template)
        if fam is not None and fam != natural:
            continue
        text = _wrapped(lines, fmt, template, keep_head)
        if text is not None and _format_allowed(lr, text):
            yield Variant("wrapper", f"{fmt} `{_template(template)[0]}`", text)


def _format_allowed(lr: LoadedRule, text: str) -> bool:
    """A rule keyed on its record's `format` (`where: {format: …}`) says which wrappers it reads: one it rules
    out is no robustness miss (LMDeploy's fatal line printed bare, not the same words its logger only warns)."""
    spec = lr.rule.match.where.get("format")
    return spec is None or compile_pattern(spec).fullmatch(normalize(text.split("\n", 1)[0]).format) is not None


def _headed(lines: list[_Line], prefix: str, suffix: str) -> str:
    """Each line under an engine's head, but a traceback's: the logger heads the record it writes, and the
    traceback it appends (frames, source lines, the exception line closing them) follows unheaded."""
    out = []
    for k, line in enumerate(lines):
        in_traceback = line.interpreter or (k > 0 and lines[k - 1].interpreter)
        out.append(line.message if in_traceback else prefix + line.message + suffix)
    return "\n".join(out)


def head_variants(lr: LoadedRule, example: str, lines: list[_Line] | None = None) -> Iterator[Variant]:
    lines = lines or _lines(example)
    if not HEAD_FIELDS.isdisjoint(lr.rule.match.where):
        return  # keyed on its own head's field (NCCL's source, a Python logger's name): no other head carries it
    for program, template in HEADS:
        if program in lr.rule.sources:
            prefix, suffix = _template(template)
            yield Variant("head", f"{program} head `{prefix}`", _headed(lines, prefix, suffix))


# -- drift -----------------------------------------------------------------------------------------------

_EXCEPTION = r"[A-Z]\w{0,60}(?:Error|Exception|Exit|Interrupt|Failure)"
# the first word of the message, or of what follows an exception's name: its case is what releases change
# ("Failed to…" / "failed to…"; Go's errors are lower case, Python's messages capitalised)
# (a word of a sentence: followed by a space, not a file or program name; a traceback's frames are Python's own)
_SENTENCE_HEAD = re.compile(rf"^(?!\s*(?:File \"|Traceback \())\s*(?:(?:[A-Za-z_]\w*\.){{0,6}}{_EXCEPTION}: )?"
                            r"([A-Za-z])(?=[a-z]+ )")
# a quoted value in a sentence; not one after `key=` (logfmt's `error="…"`, a repr's `host='…'`: the formatter
# quotes it, always the same way), a KeyError's key (its message is the key's repr) nor an exception's repr
# (`ImportError('libcuda.so.1: …')`, printed by `repr(e)` / `{e!r}`)
_QUOTED = re.compile(r"""(?<![\w'"`\\=])(?<!\bKeyError: )(?<!Error\()(?<!Exception\()(['"`])([^'"`\s\\](?:[^'"`\\\n]{0,200}?[^'"`\s\\])?)\1"""
                     r"""(?![\w'"`])""")
_SWAP = {"'": '"', '"': "'", "`": "'"}
_EXC_HEAD = re.compile(rf"^(\s*)((?:[A-Za-z_]\w*\.){{0,6}}{_EXCEPTION}): (?=\S)")
_EXC_QUALIFIED = re.compile(rf"^(\s*)(?:[A-Za-z_]\w*\.){{1,6}}({_EXCEPTION}): ")
_ERRNO_BRACKET = re.compile(r"\[Errno (\d{1,4})\] ([^\n,;:'\"()\[\]]{3,80}?)(?=$|[,;:'\"()\[\]])")
_ERRNO_PAREN = re.compile(r"\(errno:? ?=?(\d{1,4})(?: - ([^)\n]{3,80}))?\)")


def _flip_case(message: str) -> str:
    return _SENTENCE_HEAD.sub(lambda m: m.group(0)[:-1] + m.group(1).swapcase(), message, count=1)


def _quotes_swapped(message: str) -> str:
    return _QUOTED.sub(lambda m: _SWAP[m.group(1)] + m.group(2) + _SWAP[m.group(1)], message)


def _quotes_dropped(message: str) -> str:
    return _QUOTED.sub(lambda m: m.group(2), message)


def _exception_repeated(message: str) -> str:
    return _EXC_HEAD.sub(lambda m: f"{m.group(1)}{m.group(2)}: {m.group(2)}: ", message, count=1)


def _exception_unqualified(message: str) -> str:
    return _EXC_QUALIFIED.sub(lambda m: f"{m.group(1)}{m.group(2)}: ", message, count=1)


def _errno_moved(message: str) -> str:
    moved = _ERRNO_BRACKET.sub(lambda m: f"{m.group(2)} (errno {m.group(1)})", message)
    if moved != message:
        return moved
    return _ERRNO_PAREN.sub(lambda m: f"[Errno {m.group(1)}]" + (f" {m.group(2)}" if m.group(2) else ""), message)


_DRIFTS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("case of a sentence's first word flipped", _flip_case),
    ("quotes swapped (' <-> \", ` -> ')", _quotes_swapped),
    ("quotes dropped", _quotes_dropped),
    ("exception name repeated", _exception_repeated),
    ("exception printed without its module", _exception_unqualified),
    ("errno moved ([Errno N] <-> (errno N))", _errno_moved),
)


def _on_messages(lines: list[_Line], change: Callable[[str], str]) -> str:
    out = []
    for k, line in enumerate(lines):
        # the line closing a traceback names its exception as CPython does: `module.qualname` (never unqualified)
        closing = k > 0 and lines[k - 1].interpreter and change is _exception_unqualified
        out.append(line.with_message(line.message if line.interpreter or closing else change(line.message)))
    return "\n".join(out)


@lru_cache(maxsize=4096)
def _compiled(pattern: str):
    return compile_pattern(pattern)


# where a release can add a word: one space between two words of prose (not after a field's `name:` or
# before its value, not inside a column layout, not between a hex address and the next field)
_WORD = re.compile(r"[A-Za-z][^\s]*")
_PROSE_GAP = re.compile(r"(?<![\w'])[A-Za-z][a-z']*( )(?=[A-Za-z][a-z']*(?![\w']))")


def _values(m: re.Match[str]) -> list[tuple[int, int]]:
    """The spans of the facts a match captured (named groups holding no other): values, not the rule's words."""
    spans = {m.span(name) for name in m.re.groupindex if m.span(name)[0] >= 0}
    return [s for s in spans if not any(o != s and s[0] <= o[0] and o[1] <= s[1] for o in spans)]


def _spelled_words(m: re.Match[str], values: list[tuple[int, int]]) -> int:
    """How many words of the match the pattern spells itself (the captured values left out)."""
    text = list(m.string[m.start():m.end()])
    for start, end in values:
        text[start - m.start():end - m.start()] = " " * (end - start)
    return len(_WORD.findall("".join(text)))


def _extra_word(lr: LoadedRule, lines: list[_Line]) -> str | None:
    """A word added between two words of prose near the middle of the phrase the rule matched, when the
    pattern spells more than LONG_WORDS of its words (a captured value is the log's, not the rule's)."""
    for i, line in enumerate(lines):
        if line.interpreter:
            continue
        for pattern in (*lr.rule.match.any, *lr.rule.match.all):
            m = _compiled(pattern).search(line.message)
            if m is None:
                continue
            values = _values(m)
            if _spelled_words(m, values) <= LONG_WORDS:
                continue
            gaps = [g.end(1) for g in _PROSE_GAP.finditer(line.message, m.start(), m.end())
                    if not any(start < g.end(1) < end for start, end in values)]
            if not gaps:
                continue
            middle = (m.start() + m.end()) // 2
            at = min(gaps, key=lambda j: abs(j - middle))
            changed = line.message[:at] + "now " + line.message[at:]
            return "\n".join(ln.with_message(changed if k == i else ln.message) for k, ln in enumerate(lines))
    return None


def drift_variants(lr: LoadedRule, example: str, lines: list[_Line] | None = None) -> Iterator[Variant]:
    lines = lines or _lines(example)
    same = _on_messages(lines, str)
    for name, change in _DRIFTS:
        text = _on_messages(lines, change)
        if text != same:
            yield Variant("drift", name, text)
    added = _extra_word(lr, lines)
    if added is not None:
        yield Variant("drift", f"a word added inside a matched phrase of more than {LONG_WORDS} words", added)


def variants(lr: LoadedRule, example: str) -> Iterator[Variant]:
    lines = _lines(example)  # normalised once for all three kinds
    yield from wrapper_variants(lr, example, lines)
    yield from head_variants(lr, example, lines)
    yield from drift_variants(lr, example, lines)


# -- runs ------------------------------------------------------------------------------------------------

SHOWN = 200  # characters of a variant the report shows


@dataclass(frozen=True)
class VariantRun:
    """One variant of one `match` example and whether its rule still fires on it."""

    loaded: LoadedRule
    example: str
    variant: Variant
    ok: bool

    def describe(self) -> str:
        """What the report (lint, `rules test`) says of a variant that misses."""
        return (f"stops firing under {self.variant.kind} {self.variant.name}: {self.variant.text[:SHOWN]!r} "
                f"(from {self.example[:SHOWN]!r})")


def variant_runs(pack: RulePack, compiled: CompiledPack, wrappers_every: int = 1) -> list[VariantRun]:
    """Every variant of every `match` example that fires its rule as written (one that does not is
    `example-match-misses`' to report).

    ``wrappers_every``: with n > 1, each example runs every head and drift variant but only the wrappers whose
    place in the wrapper list is the example's own place modulo n, so every wrapper still meets a spread n-th of
    the pack's examples. The suite's second prefilter runs so: the ~115 000 wrapped variants are nine in ten of all,
    and under the literal prefilter they cost ten times what they cost under Hyperscan (lint and `rules test` run
    all of them)."""
    runs = []
    place = 0
    for lr in pack.rules:
        rid = lr.rule.id
        for example in lr.rule.examples.match:
            if not fires(compiled, rid, example):
                continue
            place += 1
            wrapper = 0
            for v in variants(lr, example):
                if v.kind == "wrapper":
                    wrapper += 1
                    if (wrapper + place) % wrappers_every:
                        continue
                runs.append(VariantRun(lr, example, v, fires(compiled, rid, v.text)))
    return runs


def misses(runs: list[VariantRun], kind: str) -> Iterator[VariantRun]:
    """The first miss of each rule and variant of this kind: one report says what broke the rule."""
    seen: set[tuple[str, str]] = set()
    for run in runs:
        key = (run.loaded.rule.id, run.variant.name)
        if run.variant.kind == kind and not run.ok and key not in seen:
            seen.add(key)
            yield run
