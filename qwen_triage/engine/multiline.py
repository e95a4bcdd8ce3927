"""Records that span several lines: NVRM messages, kernel AER and OOM reports, Go panics, tracebacks.

A candidate line that starts one of these families takes the lines that
continue it into its message (joined with a space, each continuation's own
prefix dropped), so a rule can match a sentence the driver wrapped over four
``NVRM:`` lines, whatever the wrapping of this driver version. The record keeps
the first line's number and raw text: evidence cites a real line. Families are
bounded (a few lines, a few KiB); in live mode a record completes on the next
line that does not continue it, or when the input goes quiet.

Python tracebacks go the other way: the final exception line is the record,
and the frame printed just before it tells which library raised it
(``raised_by``, a field rules can constrain with ``where``). Go panics name the
package of their first frame the same way. An exception line that is only its
class and a colon (``RuntimeError:``, ``torch.OutOfMemoryError:``: the message
began with a newline, or a copy split it) takes the next line as its text, so
the message is what the unexplained-error list shows and the catalogue looks
up; that family is read forward only: the line it takes stays a record of its
own, which rules match and evidence cites as before.

Triton's model status table cuts a long status into rows of its column's width, mid-word
(common/src/table_printer.cc: ``substr`` of exactly the column's share, padded with ``setw``);
a row with the first two cells blank continues the status above it, and its piece is joined
with nothing between, so ``[json.exception.out_`` / ``of_range.403] key 'num_layers' not found``
reads as the one message Triton had.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from qwen_triage.engine.origin import PROCESS_REPORT_PATTERN
from qwen_triage.lazydata import lazy_dataclass
from qwen_triage.lazyre import lazy

MAX_JOINED_CHARS = 4096

# An NVRM line that starts a message of its own rather than continuing one.
_NVRM_NEW = lazy(
    r"^NVRM: (?:Xid|SXid|GPU at|GPU \d|GPU [0-9a-fA-F]{4}:|loading|API mismatch|The NVIDIA|RmInit|rm_init|os[A-Z]|"
    r"nvidia-|knvlink|nvlink|This PCI|No NVIDIA|request_mem_region|Failed|[A-Za-z]+\(\)|"
    # an NV_PRINTF line: the GPU it is about and/or the HAL function that prints it (``GPU4
    # gpuHandleSanityCheckRegReadError_GH100: …``, ``_kgspRpcRecvPoll_IMPL: …``), one message each
    r"GPU\d{1,2} |_?[a-z]\w{2,60}_(?:IMPL|[A-Z]{2}\d{3}[A-Z]?): )"
)


@dataclass(frozen=True)
class Family:
    """How one kind of multi-line record starts, continues and ends."""

    name: str
    starts: re.Pattern[str]  # searched in the candidate line's message
    continues: re.Pattern[str]  # searched in a following line's message
    strip: re.Pattern[str] | None  # removed from the front of a continuation before joining
    max_lines: int  # continuation lines taken at most
    keep: re.Pattern[str] | None = None  # when set, continuations not matching it are passed over, not joined
    ends: re.Pattern[str] | None = None  # a continuation that matches this is the last one
    prompt: bool = False  # its lines are written in one go (one kernel message): a short pause completes it
    # read forward only: a line it takes is no continuation when met on its own (it stays its own record, its
    # pattern ids its own); for a family whose continuation is any line of words
    forward: bool = False
    max_chars: int = 4096  # the joined message's length at most
    # a table's cell: what ends the text so far (its border, removed before a piece is added) and what goes
    # between the text and a piece ("" for a cell cut at a fixed width, mid-word)
    cell_end: re.Pattern[str] | None = None
    joiner: str = " "
    # a cut that falls anywhere (mid-word) splits any pattern's literal between two raw lines, where the
    # prefilter never sees it whole: the joined record goes through the prefilter again (engine.matcher)
    rescan: bool = False

    def continuation(self, message: str, joined: str) -> bool:
        if not self.continues.search(message):
            return False
        if self.name == "nvrm":
            if _NVRM_NEW.search(message):
                return False
            # a wrapped sentence: the text so far has not ended, or the next piece starts in lower case
            rest = message[6:].lstrip()
            return not joined.rstrip().endswith((".", "!", ":")) or rest[:1].islower()
        if self.name == "aer" and "PCIe Bus Error: " in message and "PCIe Bus Error: " in joined:
            return False  # the next error of a storm, not a detail of this one
        return True


def _family(name: str, starts: str, continues: str, *, max_lines: int, strip: str | None = None,
            keep: str | None = None, ends: str | None = None, prompt: bool = False, forward: bool = False,
            max_chars: int = MAX_JOINED_CHARS, cell_end: str | None = None, joiner: str = " ",
            rescan: bool = False) -> Family:
    """A family from its patterns' text (compiled here, once)."""
    def compiled(p: str | None) -> re.Pattern[str] | None:
        return lazy(p) if p is not None else None

    return Family(name, lazy(starts), lazy(continues), compiled(strip), max_lines, compiled(keep),
                  compiled(ends), prompt, forward, max_chars, compiled(cell_end), joiner,
                  rescan)


_PCI_FUNCTION = r"(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]: +"  # a device's address, `0000:3b:00.0: `
_AER_DETAIL = (r"PCIe Bus Error: |^\s*(?:\S+ )?" + _PCI_FUNCTION
               + r"(?:device \[|\[ ?\d+\]|TLP Header|AER: +(?:aer_|\[))|^\s+(?:device \[|\[ ?\d+\]|TLP Header)")

# An exception line with no text after its class (Python printed a message that starts with a newline; a copy
# split the line): the shapes unrecognised._EXCEPTION reads, with nothing after the colon.
_BARE_EXCEPTION = (r"^\s*(?:[A-Za-z_]\w{0,60}\.){0,8}[A-Z]\w{0,80}"
                   r"(?:Error|Exception|Exit|Interrupt|Failure|Fault|Abort):\s*$")
# ... and the line that gives its text: words, not a traceback's structure or another exception's header
_EXCEPTION_TEXT = (r"^\s*(?!Traceback \(|File \"|During handling of|The above exception|\+\s)"
                   r"(?!" + _BARE_EXCEPTION[4:] + r")\S")
MAX_EXCEPTION_CHARS = 400  # what the collector reads of an exception line's text (unrecognised._EXCEPTION)
# Triton's model status table (server.cc, `| Model | Version | Status |`): a model that failed to load, and a row
# that continues its status (model and version cells blank; each cell is " " + text + " |")
_TABLE_FAILED = "| UNAVAILABLE: "  # the words between the version cell and the status of a model that failed
_TABLE_UNAVAILABLE = r"^\| [^|\s][^|]{0,300}\| +\d{1,19} +" + re.escape(_TABLE_FAILED)
_TABLE_CONTINUES_ROW = r"\|\s{2,}\|\s{2,}\| "  # a row whose model and version cells are blank
_TABLE_CONTINUES = "^" + _TABLE_CONTINUES_ROW

FAMILIES: tuple[Family, ...] = (
    # a process report whose program named itself "NVRM: …" is no driver message (engine.origin)
    _family("nvrm", rf"^(?!{PROCESS_REPORT_PATTERN})NVRM: ", rf"^(?!{PROCESS_REPORT_PATTERN})NVRM: ",
            strip=r"^NVRM: +", max_lines=8, prompt=True),
    _family("aer", r"AER: .{0,60}error received|PCIe Bus Error: ", _AER_DETAIL, strip=r"^\S+ " + _PCI_FUNCTION,
            max_lines=8, prompt=True),
    # an OOM report: only the lines that say what was killed are joined (the memory dump between is passed over)
    _family("oom", r"invoked oom-killer: ", r".", max_lines=160, ends=r"Killed process",
            keep=r"^oom-kill:|Out of memory|Killed process|Memory cgroup out of memory"),
    _family("go_panic", r"^panic: |^fatal error: ", r"^$|^goroutine \d+ \[|^\S+\(.*\)$|^\t|^\[signal ", max_lines=6,
            keep=r"^\[signal |^[\w./-]+\.\(?\*?[\w]+\)?\.?\w*\("),
    _family("exception_text", _BARE_EXCEPTION, _EXCEPTION_TEXT, max_lines=1, prompt=True, forward=True,
            max_chars=MAX_EXCEPTION_CHARS),
    # rows written in one go (one table); a Python backend's status carries its traceback over many rows
    _family("triton_table", _TABLE_UNAVAILABLE, _TABLE_CONTINUES, strip=_TABLE_CONTINUES, cell_end=r" \|\s*$",
            joiner="", rescan=True, max_lines=40, prompt=True),
)

RECORD_LINES = max(f.max_lines for f in FAMILIES) + 1
"""lines one record spans at most: its first and the continuation lines it takes"""

_GO_FRAME = lazy(r"^(?P<pkg>[\w.-]+(?:/[\w.-]+)*)\.(?:\(\*?\w+\)\.)?\w+\(")


# Words one of the families needs on a line: most candidate lines have none, and skip the families.
_HINTS = (
    "NVRM: ", "AER: ", "PCIe Bus Error", "device [", "TLP Header", "   [", "oom-kill", "Killed process",
    "Out of memory", "panic: ", "fatal error: ", "goroutine ", "[signal ", _TABLE_FAILED,
)
# ... and the shape of a table row that continues a cell (two blank cells, then text): no word to look for
_HINT_SHAPES = (_TABLE_CONTINUES_ROW + r"\S",)


_HINT_RE = lazy("|".join((*(re.escape(h) for h in _HINTS), *_HINT_SHAPES)))


_BARE_EXCEPTION_RE = lazy(_BARE_EXCEPTION)


def may_span(message: str) -> bool:
    """Whether the line could start or continue a multi-line record (a cheap test before the families): a hint
    word, a tab, or an exception line that ends at its colon (the only lines that start a forward-only family;
    the prefilter already points at them, as exception lines)."""
    return message.startswith("\t") or _HINT_RE.search(message) is not None or (
        message.rstrip().endswith(":") and _BARE_EXCEPTION_RE.match(message) is not None)


# For the prefilter: a line carrying a hint word is marked in the same pass that finds candidates.
HINTS_PATTERN = _HINT_RE.pattern
# ... and a line that starts a record whose words may all be cut across its lines (a Triton status cell): a
# candidate even when no rule's pattern is whole on it, so that its record is assembled and read
STARTS_PATTERN = re.escape(_TABLE_FAILED)


def may_span_raw(raw: bytes) -> bool:
    """For a raw line the prefilter marked with no hint word: could its decoded message still :func:`may_span`?

    Only through what decoding removes (a NUL or an ESC could join a hint) or a
    tab: the message is a suffix of the decoded line. Three ``memchr`` calls.
    """
    return b"\t" in raw or b"\x00" in raw or b"\x1b" in raw


def family_of(message: str) -> Family | None:
    for family in FAMILIES:
        if family.starts.search(message):
            return family
    return None


def continuing_family(message: str) -> Family | None:
    """The family a line could be a continuation of (its kept lines, for families that pass lines over)."""
    for family in FAMILIES:
        if family.forward:
            continue  # its continuation is any line of words: never looked back from
        probe = family.keep if family.keep is not None else family.continues
        if probe.search(message) and family.continues.search(message):
            if family.name == "nvrm" and _NVRM_NEW.search(message):
                continue
            return family
    return None


@lazy_dataclass
class Assembly:
    """A record being assembled: its message so far and what it still accepts."""

    family: Family
    message: str
    taken: int = 0  # continuation lines looked at
    done: bool = False
    raised_by: str | None = None
    raised_in: str | None = None

    def offer(self, message: str) -> bool:
        """One following line; False when it does not continue the record (the record is complete)."""
        fam = self.family
        if self.done or self.taken >= fam.max_lines or not fam.continuation(message, self.message):
            self.done = True
            return False
        self.taken += 1
        if fam.keep is not None and not fam.keep.search(message):
            return True
        if fam.name == "go_panic" and self.raised_by is None:
            m = _GO_FRAME.search(message)
            if m:
                self.raised_by = self.raised_in = m["pkg"]
        piece = fam.strip.sub("", message, count=1) if fam.strip is not None else message.strip()
        if piece and len(self.message) < fam.max_chars:
            head = self.message.rstrip() if fam.forward else self.message  # `RuntimeError: ` + its text
            if fam.cell_end is not None:
                head = fam.cell_end.sub("", head, count=1)
            self.message = (head + fam.joiner + piece)[:fam.max_chars]
        if fam.ends is not None and fam.ends.search(message):
            self.done = True
        return True
