"""Error evidence no rule explains: never silent on a failing log.

The prefilter also looks for lines that *say* something failed — the final
exception line of a Python traceback, ``ERROR`` / ``FATAL`` / ``CRITICAL`` /
``panic:`` lines — and for the frames of tracebacks. A signal line on which no
rule matched is kept as a *template*: the line with its variable parts masked
(numbers, paths, addresses, quoted values…), so the same failure on eight ranks
is one item with a count. Each item keeps its first evidence line and who
raised it (the program, and for a traceback the library of the frame that
raised). Lines the known-benign list (``rules/benign.yaml``) names are dropped:
healthy servers print some error-looking lines every day.

Only what says something failed is listed: a traceback's final exception,
error lines, stalls. The rest of a traceback is its structure, not an error of
its own, even where a logger puts an ``ERROR`` prefix on each of its lines (vLLM
does): the ``Traceback (most recent call last):`` header, the chaining lines,
the source lines and carets between frames, and the indented detail lines
under the exception. A log that cut the header off (it starts inside the
traceback, the header ends another line, a frame is cut short, the indentation
is stripped) still quotes code, not errors: a source line opens the traceback
where the header would be (:func:`is_quoted_code`). A message logged line by line
(each line with the timestamp and logger source of the one before) is one
message: its later lines are its text. Tracebacks are followed per
process (input, process label, pid, rank), since ranks interleave theirs.

An item keeps where its traceback chain started and where its detail lines
end, so a line a rule diagnosed inside that span (or whose message it quotes)
makes the item part of that diagnosis rather than an error no rule explains
(:meth:`Collector.ordered`): ``ValidationError: 1 validation error for …`` is
the wrapper of the diagnosed line under it.

Bounded: at most ``MAX_TEMPLATES`` distinct templates per scan; at most one
pending traceback frame per input; at most ``MAX_TRACES`` processes followed,
``MAX_SPANS`` spans per item.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Protocol, Sequence

from qwen_triage.engine.records import SOURCE, LineRecord
from qwen_triage.lazydata import lazy_dataclass
from qwen_triage.lazyre import lazy
from qwen_triage.redact import redact_text


class BenignPattern(Protocol):
    """A known-benign template as the collector runs it (engine.compiled.GuardedPattern: a search under the
    confirm timeout, disabled after one timeout, which ``disabled_at`` says for the report)."""

    pattern: Any
    disabled_at: str | None

    def search(self, text: str) -> object: ...

MAX_TEMPLATES = 200
TAIL_LINES = 50  # heartbeats this close to the end of an input are where it stopped
MAX_TEMPLATE_CHARS = 240
MAX_TRACES = 512  # processes whose traceback is followed at once; the oldest goes first
MAX_SPANS = 8  # occurrences of one item whose traceback span is kept
TRACE_GAP = 2000  # lines between two seen lines of one traceback (frames between them are not seen)
DETAIL_LINES = 20  # indented lines under an exception that may be its detail
MIN_LAST_WORDS = 3  # a last line of fewer words is a table's cell or a status word, not a failure said
CONTINUED_GAP = 3  # lines of a logged message between two the collector sees (no signal in them: `You can inspect …`)
# what a traceback the log ends inside is listed as, whatever line stands for it (its header, or the first line of
# code of an error-level paste that starts inside it): the exception line is what is missing
CUT_TRACEBACK = "Traceback (most recent call last): … the input ends before its exception line"
# ... and what a native stack the input ends in is listed as: a process that aborted or crashed printed its frames
# (glibc's backtrace_symbols, ggml's abort, c10's `frame #N`, gdb's `#N 0x…`), and its error line is not there
NATIVE_BACKTRACE = "native backtrace … the input ends in a process's crash stack, without its error line"
MIN_NATIVE_FRAMES = 2  # of the input's last lines with words, frames of a native stack: one alone is a quoted line
MIN_CARRIED = 20  # characters of a diagnosed message another line must quote to carry it

# The words that have always made a line an error line: a line with one of them and an error level, or one the
# precise _ERROR finds, is listed beside a diagnosis too; one read only by the wider forms is listed only where
# nothing else is said (Item.weak).
_LOUD = (
    r"\b(?:ERROR|FATAL|CRITICAL|PANIC)\b|\blevel=(?:error|fatal|ERROR|FATAL)\b|\bpanic: |\bfatal error: "
    r"|\berror: |\bError: |terminate called after throwing"
)
# glog's header letter and month spelled out (E0312, F1107 …): without hyperscan the prefilter looks for a literal
# every match holds, and `[EF]\d{4}` alone gives none but the space after it (every line a candidate)
_GLOG_HEAD = "(?:" + "|".join(f"{c}{m:02d}" for c in "EF" for m in range(1, 13)) + ")"
# ggml's `CUDA error 9 at ggml-cuda.cu:6863: …` (a backend's code, then where): named by the backend, so the
# literal prefilter has more than ` error ` to look for
_BACKENDS = ("CUDA", "ROCm", "HIP", "SYCL", "Vulkan", "Metal", "MUSA", "CANN")
_BACKEND_ERROR_AT = r"\b(?:" + "|".join(f"{b} error" for b in _BACKENDS) + r") -?\d{1,6} at "
# c10's logger (torch's `[rank1]:[E909 08:45:30.126…]`, in brackets) leaves the month unpadded: E909 is September 9,
# so its head is spelled with the day's first digit (E90 … E93) and one digit follows
_GLOG_HEAD_UNPADDED = "(?:" + "|".join(f"{c}{m}{d}" for c in "EF" for m in range(1, 10) for d in range(4)) + ")"
# Signals, as prefilter patterns: wide (the prefilter sees raw lines with their wrappers);
# the collector confirms each on the message with the precise patterns below.
SIGNALS = {
    "frame": r'File "[^"]{1,500}", line \d+, in ',
    "exception": r"[A-Z]\w{0,80}(?:Error|Exception|Exit|Interrupt|Failure|Fault|Abort)\b|\bException: ",
    "error": _LOUD + (
        # the other ways programs say a line is an error (:data:`_ERROR_MORE`): a level spelled otherwise (logrus'
        # `level=Error`, a JSON log's `"level":"error"`, `[error]`), glog's E / F header, git's and Go's `fatal: `,
        # the Docker daemon's refusal, ggml's `CUDA error 9 at <file>:<line>: …`
        r'|\blevel=(?:Error|Fatal|eror|crit)\b|"level": ?"(?:error|fatal|ERROR|FATAL)"'
        r"|\[error\]|\[fatal\]|\[Error\]|\[Fatal\]|\[err\]|\[crit\]"
        r"|\b" + _GLOG_HEAD + r"\d\d \d\d:\d\d:\d\d\.\d{3}|\[" + _GLOG_HEAD_UNPADDED + r"\d \d\d:\d\d:\d\d\.\d{3}"
        r"|\bfatal: |\bError response from daemon: |" + _BACKEND_ERROR_AT
    ),
    # a traceback's structure: seen so that its lines are not taken for errors of their own
    "traceback": (
        r"Traceback \(most recent call last\):|During handling of the above exception, another exception occurred"
        r"|The above exception was the direct cause of the following exception"
    ),
}

_FRAME = lazy(r'^\s*File "(?P<file>[^"]{1,500})", line \d+, in \S')
_EXCEPTION = lazy(
    r"^(?P<exc>(?:[A-Za-z_]\w{0,60}\.){0,8}(?:[A-Z]\w{0,80}(?:Error|Exception|Exit|Interrupt|Failure|Fault|Abort)"
    r"|Exception))"  # Python's base class too: `raise Exception("…")`
    # the first 400 characters of its text, however long the line runs (lm-eval lists every model name it has)
    r"(?::\s?(?P<msg>.{0,400})|$)"
)
_ERROR = lazy(
    r"\b(?:ERROR|FATAL|CRITICAL|PANIC)\b|\blevel=(?:error|fatal|ERROR|FATAL)\b|^panic: |\bfatal error: "
    r"|^(?:error|Error): |\bterminate called after throwing"
)
# An error said inside the line rather than at its head: `docker: Error response from daemon: …`,
# `nvidia-container-cli: mount error: …`, `CUDA error: …`, `Server error: 400 - …`, git's `fatal: …`, a level in
# brackets or in a JSON field. Read only on a line whose logger gave no level, or an error level: an INFO line that
# reports an error it recovered from (`health check is pending with error: …`) is no failure.
_ERROR_MORE = lazy(
    r"^fatal: |\bError response from daemon: |(?:^|:\s)(?:[A-Za-z][\w.-]{0,30}\s)?[A-Za-z][\w-]{1,30} error: "
    # a program naming itself before the level, the Unix way (`psql: error: …`, `curl: error: …`, argparse's
    # `prog sub: error: …`), and ggml's `CUDA error 9 at ggml-cuda.cu:6863: …` (a code, then where)
    r"|^[A-Za-z][\w.-]{0,40}(?: [a-z][\w-]{0,20})?: (?:fatal )?error: |" + _BACKEND_ERROR_AT + r"\S{1,200}:\d{1,6}: "
    r'|\[(?:error|fatal|Error|Fatal|err|crit)\]|"level": ?"(?:error|fatal)"'
)
# What a log's last line says when the program died there without an error mark: the words of a failure (not the
# word "error", which a line with an error mark carries and a healthy line uses for options and logger names, nor an
# HTTP status' "404 Not Found"). Read only on an input's last line, only where nothing else is said
# (Collector.last_words).
_FAILURE_WORDS = lazy(
    r"(?i)\b(?:fail(?:ed|ure|s)?|cannot|can't|couldn't|could not|unable to|(?<!\d{3} )not found|no such|invalid"
    r"|denied|refused|timed out|timeout|unsupported|not supported|abort(?:ed)?|killed|segmentation fault"
    r"|core dumped|out of memory|mismatch|missing|unrecognized|unknown|fatal|panic|died|crash(?:ed)?"
    r"|not allowed|forbidden|no space left|unreachable|insufficient|exceed(?:s|ed)?)\b"
)
# a native backtrace's frame (torch's c10 "frame #3: <unknown function> + 0x…", gdb's / glibc's "#3 0x… in f", the
# kernel's "[<…>] f+0x…/0x…"): the structure of a crash report, not what failed
_BACKTRACE = lazy(r"^(?:frame #\d+: |#\d+\s+0x[0-9a-fA-F]+ |\[<[0-9a-fA-F]+>\] |\? [\w.]+\+0x)")
# a frame of a native stack a process prints of itself as it dies: glibc's backtrace_symbols (`/usr/lib/libllama.so
# (llama_decode+0xc)[0x7f15…]`, `/usr/bin/llama-server[0x40107e]`), c10's `frame #3: …`, gdb's `#3  0x… in …`
_NATIVE_FRAME = lazy(r"^(?:\S{1,500}\((?:[^()\s]{0,500}\+0x[0-9a-fA-F]{1,16})?\)\s?\[0x[0-9a-fA-F]{1,16}\]|\S{1,500}\[0x[0-9a-fA-F]{1,16}\]"
                     r"|frame #\d{1,4}: |#\d{1,4}\s+0x[0-9a-fA-F]{1,16} in )")
_QUIET = ("debug", "info", "notice", "warning")  # levels a logger gives lines that are no failure
_QUIET_HEAD = lazy(r"^\W{0,3}(?:INFO|DEBUG|TRACE|NOTICE|WARN(?:ING)?|[Ii]nfo|[Dd]ebug|[Ww]arn(?:ing)?)\b")  # ... in words
# a timestamp a pipe put before the line (Docker Desktop's `2024-02-09 17:32:34 `): the exception line is what follows
_STAMPED = lazy(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\s+(?=\S)")
_ERROR_LEVELS = ("error", "critical", "fatal")
_LOUD_RE = lazy(_LOUD)
# A traceback starts, or a chained one follows the exception before it (Python 3.11 groups: `+ Exception Group …`).
_TRACE_START = lazy(
    r"^(?:\+\s*)?(?:Exception Group )?Traceback \(most recent call last\):"
    # IPython's (a notebook's): the exception's class, then the header, no colon
    r"|^(?:[A-Za-z_]\w{0,60}\.){0,8}[A-Z]\w{0,80}\s{2,}Traceback \(most recent call last\)$"
    r"|^During handling of the above exception, another exception occurred:"
    r"|^The above exception was the direct cause of the following exception:"
)
_IPYTHON_SOURCE = lazy(r"^-+> \d+ ")  # IPython marks the line a frame was at (`--> 721     raise …`): its body
_CHAINED = lazy(r"^(?:During handling of the above|The above exception was the direct cause)")
_NAMED_ERROR = lazy(r"^(?:[A-Za-z_]\w{0,60}\.){0,8}[A-Z]\w{0,80}(?:Error|Exception)\b[^:]{0,200}:\s")  # Ray's `…Error(ValueError): `
_CARETS = lazy(r"^[\s^~]*\^[\s^~]*$|^[\s~]+$")  # Python 3.11+ marks the failing expression under a source line
_SOURCE_RAISE = lazy(r"^\s+raise\b")  # a traceback's source line, whatever prefix the logger added
_CUT_FRAME = lazy(r'^\s*File "[^"]{0,500}$')  # a frame line the log cut short (a line limit): structure too
# A line of Python code as a traceback quotes it: a statement word, an assignment, a call. Read only where a
# traceback is the likely frame (an indented line, or inside one whose header was seen), never on an exception.
_CODE = lazy(
    r"^(?:(?:return|raise|yield|await|assert|del|import|from)\b"
    r"|(?:with|for|if|elif|while|async with|async for)\b.{0,400}:$"
    r"|[A-Za-z_][\w.]{0,200}(?:\[[^\]]{0,200}\])?(?:\s?,\s?[A-Za-z_][\w.]{0,200})*\s?[-+*/|&]?=\s?[\w.\[({'\"]"
    r"|[A-Za-z_][\w.]{0,200}(?:\[[^\]]{0,200}\])*\((?:.{0,400}(?:[,(\[{]|\)))?$)"  # a call (opened: its arguments below)
)

# Masks, most specific first: each variable part becomes a placeholder.
_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (lazy(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<UUID>"),
    (lazy(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?\b"), "<IP>"),
    (lazy(r"\b[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?\b"), "<PCI>"),
    (lazy(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"), "<TIME>"),
    (lazy(r"\b\d\d:\d\d:\d\d(?:[.,]\d+)?\b"), "<TIME>"),
    (lazy(r"\b0x[0-9a-fA-F]+\b"), "<HEX>"),
    (lazy(r"\b[0-9a-f]{16,}\b"), "<HEX>"),
    (lazy(r"(?:(?<=\s)|^|(?<=[=(\['\"]))(?:[A-Za-z]:)?(?:/|\\\\)[^\s'\",:)\]]{1,300}"), "<PATH>"),
    # quoted single values (a name, an id); quoted phrases stay, they are the message
    (lazy(r"'[^'\s]{1,200}'"), "'<S>'"),
    (lazy(r'"[^"\s]{1,200}"'), '"<S>"'),
    (lazy(r"`[^`\s]{1,200}`"), "`<S>`"),
    (lazy(r"(?<![A-Za-z0-9_.])\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"), "<N>"),
)
_SPACES = lazy(r"\s+")
# a level as a word (glog's E / F head letter too), and what a line must hold besides to say anything: two letters
_LEVEL_WORDS = lazy(r"\b(?:ERROR|FATAL|CRITICAL|PANIC|[Ee]rror|[Ff]atal|[Cc]ritical|[Pp]anic|[EF])\b")
_A_WORD = lazy(r"[A-Za-z]{2}")
# Where a traceback frame lives: site-packages/<library>/…, dist-packages, or a local file.
_LIBRARY = lazy(r"(?:site|dist)-packages/(?P<lib>[A-Za-z_][\w]*)")


def says_nothing(message: str) -> bool:
    """Whether a line has no words but a level and its stamp (``[2026-04-22 21:34:21] ERROR``, unittest's verdict
    on the line under a test's name, a logger's head with its message on the next lines): no failure is named, so
    there is nothing to list, to template or to look up."""
    return _A_WORD.search(_LEVEL_WORDS.sub(" ", message)) is None


def template_of(message: str) -> str:
    """The message with its secrets and variable parts masked, whitespace folded, bounded.

    Secrets first: a token's digits turned into ``<N>`` would no longer have a token's shape
    (``xoxb-<N>-<N>-AbC…``), and the masker would let the rest of it through.
    """
    text = redact_text(message.strip()[: MAX_TEMPLATE_CHARS * 2])
    for pattern, placeholder in _MASKS:
        text = pattern.sub(placeholder, text)
    return _SPACES.sub(" ", text)[:MAX_TEMPLATE_CHARS]


def frame_file(message: str) -> str | None:
    """The file of a traceback frame line (``  File "/x/y.py", line 3, in f``), else None."""
    m = _FRAME.search(message)
    return m["file"] if m else None


def is_exception_line(message: str) -> bool:
    """Whether the message is a traceback's final line (``pkg.SomeError: text``)."""
    return _EXCEPTION.search(message.strip()) is not None


def exception_of(message: str) -> str | None:
    """The class name of a traceback's final line, without its module (``pkg.errors.SomeError`` → ``SomeError``)."""
    m = _EXCEPTION.search(message.strip())
    return m["exc"].rsplit(".", 1)[-1] if m else None


def raised_at(frame_file: str | None, parts: tuple[str, ...]) -> bool:
    """Whether a frame's file lies under one of ``parts`` (``vllm/config/``, ``vllm/engine/arg_utils.py``), as whole
    path components: in site-packages or in a source tree alike."""
    if not frame_file:
        return False
    path = "/" + frame_file.replace("\\", "/")
    return any(("/" + part) in path for part in parts)


def is_structure(message: str) -> bool:
    """Whether a line is part of a traceback's structure, never an error of its own: a header or chaining
    line, a frame (or one cut short), a source line that raises, a caret line (``rules suggest`` drafts no rule
    from one)."""
    return bool(
        _TRACE_START.match(message.strip()) or _FRAME.search(message) or _CUT_FRAME.match(message)
        or _CARETS.match(message) or _SOURCE_RAISE.match(message) or message.strip().startswith("raise ")
    )


def is_quoted_code(rec: LineRecord, message: str, in_traceback: bool) -> bool:
    """Whether a line is code a traceback quotes (or its frame, cut short), whatever level the logger gave it.

    The matcher marks a source line under its ``File "…"`` frame (``rec.quoted``); a log that starts inside a
    traceback, or a logger that strips indentation, leaves a bare line of code: read as such when it is
    indented as Python quotes source (4 or more), or inside a traceback whose header was seen. An exception
    line is never code (``ray.exceptions.RayTaskError(ValueError): …`` looks like a call).
    """
    if rec.quoted == SOURCE or _CUT_FRAME.match(message):
        return True
    stripped = message.strip()
    if not (in_traceback or indent_of(message) >= 4) or _EXCEPTION.search(stripped) or _NAMED_ERROR.search(stripped):
        return False
    return _CODE.match(stripped) is not None


def stamp_of(rec: LineRecord) -> tuple[str, str] | None:
    """A line's timestamp and logger source (``core.py:1100``), where its logger printed both; None otherwise."""
    source = rec.extra.get("source")
    return (rec.timestamp, source) if rec.timestamp and source else None


def library_of(frame_file: str) -> str:
    """``…/site-packages/vllm/worker/x.py`` → ``vllm``; a file outside any package → its name."""
    m = _LIBRARY.search(frame_file)
    if m:
        return m["lib"]
    name = frame_file.replace("\\", "/").rsplit("/", 1)[-1]
    return name[:-3] if name.endswith(".py") else name


Key = tuple[int, "str | None", "int | None", "int | None"]  # input, process label, pid, rank


def key_of(rec: LineRecord) -> Key:
    """Whose line it is: lines of one process make one traceback, whatever other ranks print between them."""
    return (rec.source_index, rec.process, rec.pid, rec.rank)


@lazy_dataclass
class Span:
    """Where one occurrence of an item sits: its traceback chain, its line, the end of its detail lines."""

    key: Key
    start: int  # the first header of its traceback chain (its own line when it has none)
    line: int
    end: int  # the last line that may be one of its indented detail lines
    indent: int = 0  # its message's own indentation: a detail line is indented deeper

    def holds(self, rec: LineRecord) -> bool:
        """Whether ``rec`` belongs to this occurrence: inside its traceback chain, or an indented detail under it."""
        if key_of(rec) != self.key:
            return False
        return self.start <= rec.line <= self.line or (
            self.line < rec.line <= self.end and indent_of(rec.message) > self.indent)


def indent_of(message: str) -> int:
    """Leading whitespace of a message; compared within one process only (a `[rank3]: ` prefix leaves a space)."""
    return len(message) - len(message.lstrip())


@lazy_dataclass
class Item:
    """One unrecognised template: how often, where first, who raised it."""

    template: str
    kind: str  # "exception", "error", "exit"
    count: int
    first: LineRecord
    program: str | None = None
    raised_by: str | None = None  # the library of the frame that raised, for exceptions
    exception: str | None = None  # the exception's class name
    hint: str | None = None  # for a stall: what usually hangs there
    spans: list[Span] = field(default_factory=list)  # its first occurrences, for what it carries
    # read only by the wider forms of an error line (a glog E header, `mount error: `, `[error]`, `fatal: `): the
    # evidence of a log nothing else explains, never listed beside a diagnosis (the watchdog's E lines after an
    # NCCL timeout, the daemon's wrapper of a diagnosed hook error are that diagnosis' echoes)
    weak: bool = False
    # a traceback the log cut before its exception: the file of the innermost frame seen, where it was raised
    # (engine.locate places the item there, as it places an exception by its raising frame)
    raised_in: str | None = None
    # every occurrence was taken as one part of these `all` rules only (and so is weak): not listed once one of them
    # fired (completed); listed where none did and nothing is diagnosed (Collector.ordered)
    pending: frozenset[str] | None = None

    def carries(self, diagnosed: Sequence[LineRecord]) -> bool:
        """Whether a diagnosed line is part of this item: in its traceback or detail lines, or quoted by it; for an
        exception line that took its text from the next line (engine.multiline), that line diagnosed."""
        text = None
        taken = _taken_text(self.first)
        for rec in diagnosed:
            if any(span.holds(rec) for span in self.spans):
                return True
            if taken is not None and taken in _fold(rec.message):
                return True
            quoted = _carried_text(rec.message)
            if quoted is not None:
                text = _fold(self.first.message) if text is None else text
                if quoted in text:
                    return True
        return False


def _fold(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def _taken_text(rec: LineRecord) -> str | None:
    """The text a bare exception line (``torch.OutOfMemoryError:``) took from the line after it, where it did
    (a record joined forward keeps its first line's share of the message, ``head_len``)."""
    if not 0 <= rec.head_len < len(rec.message):
        return None
    m = _EXCEPTION.search(rec.message[: rec.head_len].strip())
    if m is None or m["msg"]:
        return None
    text = _fold(rec.message[rec.head_len:])
    return text if len(text) >= MIN_CARRIED else None


def _carried_text(message: str) -> str | None:
    """What another line must quote to carry this diagnosed message: its text without the exception name."""
    text = message.strip()
    m = _EXCEPTION.search(text)
    if m is not None and m["msg"]:
        text = m["msg"]
    text = _fold(text)
    return text if len(text) >= MIN_CARRIED else None


@lazy_dataclass
class _Trace:
    """One process's traceback as the collector follows it."""

    start: int  # the first header of the chain
    last: int  # the latest line of it seen
    indent: int  # the header's indentation (then that of the line that ended it): its body is indented deeper
    open: bool = True  # inside the body: header seen, final line not yet
    header: LineRecord | None = None  # an error-level header: listed if the traceback never ends
    # its `Traceback (most recent call last):` line, at any level (both prefilters pass it to the collector, unlike
    # its frames and code, which the matcher may keep back): listed if the log ends inside the traceback
    opener: LineRecord | None = None
    span: Span | None = None  # the latest line of its own, while its detail lines may follow
    details: bool = False  # that line ended a traceback: indented lines under it are its detail, not errors
    stamp: tuple[str, str] | None = None  # the timestamp and logger source of that line, where its logger gave both
    # the exceptions before it in its chain (`During handling of the above exception …`): the exception that ends
    # the chain was raised while handling them, and its span is theirs too (a diagnosis of it holds them)
    chained: list[Span] = field(default_factory=list)

    def cut_before(self, line: int) -> None:
        """A new traceback (or its quoted code) starts at ``line``: the last line's detail span ends before it."""
        if self.span is not None:
            self.span.end = min(self.span.end, line - 1)

    def continued_by(self, rec: LineRecord, stripped: str) -> bool:
        """Whether a line (no deeper than it: a deeper one is its detail) goes on with the message of the line just
        before it: the next line after it (or after a few lines of that message that no rule and no signal read: none
        of its process seen since), from the same log call (same timestamp and logger source: vLLM logs an
        exception's text line by line, ``Tensor parallel size may exceed …`` under ``ValueError: Cannot provide a
        placement group …``), no exception of its own."""
        return (self.stamp is not None and self.span is not None and self.last == self.span.line
                and self.span.line < rec.line <= self.span.line + 1 + CONTINUED_GAP
                and stamp_of(rec) == self.stamp and _EXCEPTION.search(stripped) is None
                and _NAMED_ERROR.search(stripped) is None and not _TRACE_START.match(stripped))


@lazy_dataclass
class Progress:
    """Where one input's launch got to: its latest stage and the heartbeat it keeps repeating."""

    stage: str | None = None
    beat_template: str | None = None
    beats: int = 0  # consecutive lines of that heartbeat
    beat_last: LineRecord | None = None

    def same_run(self, template: str, rec: LineRecord) -> bool:
        """Whether a heartbeat line of ``template`` goes on the run of them (else a new run starts there)."""
        return template == self.beat_template and self.beat_last is not None \
            and rec.line - self.beat_last.line <= TAIL_LINES


MIN_BEATS = 3  # a heartbeat repeated this often, at the end of the input, is a hang


@dataclass
class Collector:
    """Signals of one scan, deduplicated by template; the benign ones and a traceback's structure dropped."""

    benign: tuple[BenignPattern, ...] = ()
    stages: dict[str, dict] = field(default_factory=dict)  # stage id -> its data (rank, label, resets, hint…)
    items: dict[str, Item] = field(default_factory=dict)
    dropped: int = 0  # distinct templates beyond MAX_TEMPLATES
    progress_of: dict[int, Progress] = field(default_factory=dict)  # source -> where its launch got to
    traces: dict[Key, _Trace] = field(default_factory=dict)  # process -> its latest traceback
    unfinished: list[_Trace] = field(default_factory=list)  # tracebacks that never ended, with an error-level header
    last_lines: dict[int, LineRecord] = field(default_factory=dict)  # input -> its last line with words (ended)
    # input -> the frame line of the traceback its last lines are inside (ended): a paste cut before the header too
    cut_frames: dict[int, LineRecord] = field(default_factory=dict)
    # input -> the first frame of the native stack its last lines are (ended): a process died printing it
    native_ends: dict[int, LineRecord] = field(default_factory=dict)
    last_added: tuple[Key, int, str] | None = None  # the latest line listed: its process, line and template

    def heartbeat(self, rec: LineRecord, stage_before: Callable[[], str | None]) -> None:
        """A line a stuck launch repeats; a new run of them looks up the stage it repeats in."""
        p = self.progress_of.setdefault(rec.source_index, Progress())
        template = template_of(rec.message)
        if p.same_run(template, rec):
            p.beats += 1
        else:
            p.beat_template, p.beats = template, 1
            p.stage = stage_before() or p.stage
        p.beat_last = rec

    def beating(self, source_index: int) -> bool:
        p = self.progress_of.get(source_index)
        return p is not None and p.beats > 0

    def ready(self, rec: LineRecord) -> None:
        """A line of a stage where the server is up (rules/stages.yaml ``quiet_ok``): the launch got past its wait,
        and the run of heartbeats before it is no stall."""
        p = self.progress_of.get(rec.source_index)
        if p is not None:
            p.beat_template, p.beats, p.beat_last = None, 0, None

    def stalls(self, lines_read: dict[int, int]) -> list[Item]:
        """Inputs that end repeating a heartbeat, short of a stage where silence is normal."""
        out = []
        for src, p in sorted(self.progress_of.items()):
            last = p.beat_last
            stage = self.stages.get(p.stage or "")
            if p.beats < MIN_BEATS or last is None or (stage is not None and stage.get("quiet_ok")):
                continue
            if lines_read.get(src, 0) - last.line > TAIL_LINES:
                continue  # the launch went on after the heartbeats
            where = f" in stage “{stage['label']}”" if stage else ""
            template = f"no progress{where}: the input ends repeating “{p.beat_template}”"  # its count: Item.count
            hint = (stage.get("hint") or None) if stage else None
            out.append(Item(template, "stall", p.beats, last, last.program, hint=hint))
        return out

    def signal(self, rec: LineRecord, parts_of: frozenset[str] | None = None) -> None:
        """A candidate line no rule matched (or only ``parts_of``: one part of those `all` rules): kept when it says
        something failed and is not known benign."""
        message = rec.message
        stripped = message.strip()
        if not stripped:
            return
        if _CARETS.match(message):
            self._code_above(rec)
            return
        if says_nothing(stripped):
            return
        if 'File "' in message and (file := frame_file(message)) is not None:  # the matcher's `frame` lines
            self._frame(rec, file)
            return
        if self._quoted_code(rec, message):
            return
        span = self._follow(rec, message, stripped)
        if span is None:
            return
        m = _EXCEPTION.search(stripped)
        if m is None and (stamp := _STAMPED.match(stripped)) is not None:
            m = _EXCEPTION.search(stripped[stamp.end():])
        loud = m is not None or _ERROR.search(stripped) is not None or (
            rec.level in _ERROR_LEVELS and _LOUD_RE.search(rec.text) is not None)
        if not loud and rec.level not in _ERROR_LEVELS and not (rec.level is None and _ERROR_MORE.search(stripped)):
            return
        if _SOURCE_RAISE.match(message) or any(p.search(stripped) for p in self.benign):
            return
        kind = "exception" if m else "error"
        exception = m["exc"].rsplit(".", 1)[-1] if m else None
        if m is not None and not m["msg"] and span.start == rec.line:
            # a bare exception (`AssertionError`) with no traceback seen: Python prints the code that raised it on
            # the line above (`assert total_num_heads % tp_size == 0`), which may be what a rule diagnosed
            span.start = rec.line - 1
        # a line one part of `all` rules took is their family's known line: weak (never listed beside a diagnosis),
        # and pending on them (not listed once one of them completed)
        self.add(kind, stripped, rec, raised_by=rec.raised_by, exception=exception, span=span,
                 weak=not loud or parts_of is not None, pending=parts_of)

    def ended(self, rec: LineRecord, before: Sequence[LineRecord] = ()) -> None:
        """An input's last line with words: where a program died without marking its error, its last words.

        ``before``: the few lines with words above it, nearest first. When the last line is a traceback's frame,
        code or carets and a frame line lies among them with no exception line between, the input ends inside a
        traceback, whatever was seen of its header (a paste that starts inside it, a header the prefilter never
        passed on): read from the input's last lines, not from the matcher's candidates, so both prefilters and a
        scan split in parts say the same."""
        self.last_lines[rec.source_index] = rec
        message = rec.message
        if is_exception_line(message) or not message.strip():
            return
        if _NATIVE_FRAME.match(message.strip()):
            frames = [rec]
            for above in before:
                if not _NATIVE_FRAME.match(above.message.strip()):
                    break
                frames.append(above)
            if len(frames) >= MIN_NATIVE_FRAMES:
                self.native_ends[rec.source_index] = frames[-1]
            return
        frame = rec if frame_file(message) is not None else None
        for above in () if frame is not None else before:
            if is_exception_line(above.message):
                return
            if frame_file(above.message) is not None:
                frame = above
                break
        if frame is not None and (frame is rec or is_structure(message) or is_quoted_code(rec, message, True)):
            self.cut_frames[rec.source_index] = frame

    def last_words(self) -> list[Item]:
        """Each input's last line, when it says something failed (a failure's words, no level that says otherwise,
        not benign, not a traceback's structure or code): listed only where nothing else is said, so a failing log
        whose error line carries no error mark (``NVIDIA-SMI couldn't find libnvidia-ml.so``, a kernel's ``probe
        of … failed with error -22``) is never an empty report; looked up in the catalogue like any error line."""
        out: dict[str, Item] = {}
        for rec in self.last_lines.values():
            stripped = rec.message.strip()
            if (rec.level in _QUIET or _QUIET_HEAD.match(stripped) or len(stripped.split()) < MIN_LAST_WORDS
                    or not _FAILURE_WORDS.search(stripped)
                    or is_structure(rec.message) or _BACKTRACE.match(stripped)
                    or is_quoted_code(rec, rec.message, False) or any(p.search(stripped) for p in self.benign)):
                continue
            template = template_of(stripped)
            if template not in out:
                out[template] = Item(template, "error", 1, rec, rec.program, weak=True)
        return list(out.values())

    def explained(self, rec: LineRecord) -> None:
        """A candidate line a rule took: not listed, but it may end a traceback the collector follows, or be the code
        one quotes (``assert self.total_num_kv_heads % tp_size == 0``): then the exception that ends it holds it."""
        message = rec.message
        if message.strip() and not self._quoted_code(rec, message):
            self._follow(rec, message, message.strip())

    def _code_above(self, rec: LineRecord) -> None:
        """Carets mark the line of code just above them: where a logger stripped the indentation that would have
        said so (a Logs Explorer copy), that line was listed as an error; it is taken back."""
        last = self.last_added
        if last is None or last[0] != key_of(rec) or last[1] != rec.line - 1:
            return
        item = self.items.get(last[2])
        if item is not None and item.kind == "error" and _CODE.match(item.first.message.strip()):
            item.count -= 1
            if item.count <= 0:
                del self.items[last[2]]
        self.last_added = None

    def _frame(self, rec: LineRecord, file: str) -> None:
        """A traceback's frame line (the matcher's `frame` signal): structure, never an error; inside a traceback
        the collector follows, it is a line of it (where a cut one was raised is read from the input's end: ended)."""
        trace = self._current(key_of(rec), rec)
        if trace is not None and trace.open:
            trace.last = rec.line

    def _quoted_code(self, rec: LineRecord, message: str) -> bool:
        """A traceback's source line (or cut frame) is its body: where no header was seen (the log starts inside
        it, or the header ends another line: ``EngineCore hit an exception: Traceback …``), it opens the
        traceback there, so its final exception carries the chain as it would with its header."""
        key = key_of(rec)
        trace = self._current(key, rec)
        if not is_quoted_code(rec, message, trace is not None and trace.open):
            return False
        if trace is None or not trace.open:
            if trace is not None:
                trace.cut_before(rec.line)
            # Python quotes source 4 deeper than the exception line that ends the traceback; at error level, the
            # line stands for the header: a log cut inside the traceback is never silent (ordered)
            trace = _Trace(start=rec.line, last=rec.line, indent=max(indent_of(message) - 4, 0),
                           header=rec if rec.level in _ERROR_LEVELS else None)
            self._keep(key, trace)
        trace.last = rec.line
        return True

    def _follow(self, rec: LineRecord, message: str, stripped: str) -> Span | None:
        """Move the line's process through its traceback; the line's span, or None when it is structure."""
        key = key_of(rec)
        trace = self._current(key, rec)
        indent = indent_of(message)
        if _TRACE_START.match(stripped):
            # a chained traceback continues the chain of the exception just before it
            chained = trace is not None and (trace.open or (trace.details and _CHAINED.match(stripped) is not None))
            if trace is not None:
                trace.cut_before(rec.line)
                if chained and trace.details and trace.span is not None and len(trace.chained) < MAX_SPANS:
                    trace.chained.append(trace.span)
            if trace is None or not chained:
                if trace is not None:
                    self._expire(key, trace)
                trace = _Trace(start=rec.line, last=rec.line, indent=indent, opener=rec)
                self._keep(key, trace)
            trace.open, trace.last, trace.span, trace.details = True, rec.line, None, False
            trace.indent = min(trace.indent, indent)
            if trace.header is None and rec.level in _ERROR_LEVELS:
                trace.header = rec
            return None
        if trace is not None and trace.open:
            trace.last = rec.line
            if indent > trace.indent or _IPYTHON_SOURCE.match(message):
                return None  # a source line, a caret, a group's inner line: the traceback's body
            trace.open, trace.header, trace.details, trace.indent = False, None, True, indent  # its final line
            # an exception line is the traceback's own; any other line ends it without taking its chain
            own = _EXCEPTION.search(stripped) is not None
            start = trace.start if own else rec.line
            trace.span = Span(key, start, rec.line, rec.line + DETAIL_LINES, indent)
            for earlier in trace.chained if own else ():
                earlier.line = rec.line  # ... up to the exception that ends the chain
                earlier.end = max(earlier.end, rec.line)
            trace.chained = []
            trace.stamp = stamp_of(rec)
            return trace.span
        if (trace is not None and trace.span is not None and indent <= trace.indent
                and trace.continued_by(rec, stripped)):
            # the next line of the same logged message: a multi-line exception's text goes on (its details follow)
            trace.last = trace.span.line = rec.line
            trace.span.end = rec.line + DETAIL_LINES
            return None
        deeper = trace is not None and indent > trace.indent
        if trace is not None and trace.span is not None and rec.line <= trace.span.end:
            if deeper and trace.details:
                trace.last = rec.line
                return None  # a detail line of the exception above: part of it
            if not deeper:
                trace.span.end = rec.line - 1  # a line of its own ends the details of the one before
        span = Span(key, rec.line, rec.line, rec.line + DETAIL_LINES, indent)
        if not deeper:  # a line of its own: lines under it may be its detail (skipped under an exception only)
            if trace is None:
                trace = _Trace(start=rec.line, last=rec.line, indent=indent, open=False)
                self._keep(key, trace)
            trace.last, trace.span, trace.indent = rec.line, span, indent
            trace.details = _EXCEPTION.search(stripped) is not None
            trace.stamp = stamp_of(rec)
        return span

    def _current(self, key: Key, rec: LineRecord) -> _Trace | None:
        """The traceback the line's process is in, unless it went quiet too long ago (then it is expired)."""
        trace = self.traces.get(key)
        if trace is not None and rec.line - trace.last > TRACE_GAP:
            self._expire(key, trace)
            return None
        return trace

    def _keep(self, key: Key, trace: _Trace) -> None:
        if len(self.traces) >= MAX_TRACES:
            oldest = next(iter(self.traces))
            self._expire(oldest, self.traces[oldest])
        self.traces[key] = trace

    def _expire(self, key: Key, trace: _Trace) -> None:
        """A traceback left behind: an error-level header whose traceback never ended is all there is of it."""
        self.traces.pop(key, None)
        if trace.open and trace.header is not None and len(self.unfinished) < MAX_TRACES:
            self.unfinished.append(trace)

    def add(self, kind: str, message: str, rec: LineRecord, *, raised_by: str | None = None,
            exception: str | None = None, span: Span | None = None, weak: bool = False,
            pending: frozenset[str] | None = None) -> None:
        template = template_of(message)
        item = self.items.get(template)
        if item is None:
            if len(self.items) >= MAX_TEMPLATES:
                self.dropped += 1
                return
            item = self.items[template] = Item(template, kind, 0, rec, rec.program, raised_by, exception, weak=weak,
                                               pending=pending)
        elif item.pending is not None:
            item.pending = item.pending | pending if pending is not None else None
        item.weak = item.weak and weak
        item.count += 1
        self.last_added = (key_of(rec), rec.line, template)
        if span is not None and len(item.spans) < MAX_SPANS:
            item.spans.append(span)

    def ordered(self, diagnosed: Sequence[LineRecord] = (), relayed: Sequence[LineRecord] = (),
                fired: Collection[str] = ()) -> list[Item]:
        """Exceptions first (the likeliest cause), then by first appearance; none that carries a diagnosed line.

        ``diagnosed``: the evidence lines of the diagnoses; an item that carries one of them (a wrapper
        exception around it, the exception whose detail it is) is part of that diagnosis. ``relayed``: the lines
        relay rules took; an item that carries one (the ``ValidationError`` whose detail line relays, the bare
        ``ImportError:`` whose text a relay rule read) is that relay's, listed or held as the relay is. ``fired``:
        the ids of the rules that fired; an item whose lines were only parts of `all` rules (:attr:`Item.pending`)
        is one of theirs when one of them completed; it is also weak, so it is listed only where nothing is
        diagnosed and none of its rules completed (never silent).
        """
        items = [i for i in self.items.values() if i.pending is None or i.pending.isdisjoint(fired)]
        # tracebacks that never ended (the log was cut inside one): when nothing else is to be said, an
        # error-level header is the only sign of them (never silent); beside anything else it is noise. So is the
        # header, at any level, of the one a process was still in when its input ended: a pasted log cut before the
        # exception line, listed as that, where its innermost frame seen was raised (Item.raised_in)
        # Where no header of one was seen but an input's last lines are inside a traceback (ended), its innermost
        # frame there stands for it. One item, however many processes were cut.
        if not (diagnosed or items) and CUT_TRACEBACK not in self.items:
            heads = [head for t in (*self.unfinished, *self.traces.values())
                     if t.open and (head := t.header or t.opener) is not None] or list(self.cut_frames.values())
            if heads:
                head = heads[0]
                # where it was raised: the innermost frame among the input's last lines, when they are this
                # traceback's (the frames themselves reach the collector under one prefilter only: the matcher
                # keeps them back)
                end = self.cut_frames.get(head.source_index)
                raised_in = frame_file(end.message) if end is not None and end.line >= head.line else None
                items.append(Item(CUT_TRACEBACK, "error", len(heads), head, head.program, raised_in=raised_in))
            elif self.native_ends and NATIVE_BACKTRACE not in self.items:
                # no traceback either: an input that ends in a native stack ends where its process died
                stacks = list(self.native_ends.values())  # in the order the inputs ended, as cut_frames
                items.append(Item(NATIVE_BACKTRACE, "error", len(stacks), stacks[0], stacks[0].program))
        if diagnosed:
            items = [i for i in items if not i.weak and not i.carries(diagnosed)]
        if relayed:
            items = [i for i in items if not i.carries(relayed)]
        rank = {"exit": 0, "exception": 1, "error": 2, "stall": 3}
        return sorted(items, key=lambda i: (rank.get(i.kind, 3), i.first.source_index, i.first.line))
