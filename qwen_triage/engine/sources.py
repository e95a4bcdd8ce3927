"""Inputs to blocks of whole lines.

Files are read as bytes in large chunks and split on LF only (a bare CR, as in
Ollama's pull progress, is not a line end — text mode would shift every later
line number). A line longer than ``max_line`` is cut to that prefix and the
rest skipped without being held, so a 100 MB line costs ``max_line`` bytes.
The journal's JSON export (``-o json``) is decoded into its MESSAGE lines, keeping each
one's journal fields and origin line.

Everything here reads text nobody vetted, so every number taken from it is
bounded (:func:`qwen_triage.units.bounded_int`), journal fields of the wrong
type are dropped, and a compressed input that ends early still yields what was
read, with a note (:attr:`Source.notes`).

Opening an input (a path, stdin, gzip by its magic) and telling its kind is not done here: that is
:mod:`qwen_triage.inputs` (:func:`~qwen_triage.inputs.file.open_source`, :func:`~qwen_triage.inputs.source.sniff`).
Here is one decoder per kind (:data:`DECODERS`): a new structured format is one sniff there and one decoder here.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import BinaryIO, Callable, Iterator, Mapping

from qwen_triage.engine.normalize import ANSI_BYTES_RE, PRIORITY_LEVELS
from qwen_triage.engine.origin import journal_program
from qwen_triage.engine.records import LineRecord
from qwen_triage.inputs.source import (
    CHUNK,
    JOURNAL_JSON,
    JOURNAL_MAX_LINE,
    MAX_LINE,
    MAX_WHOLE,
    READ_ERRORS,
    TEXT,
    WHOLE,
    InputError,
    Source,
)
from qwen_triage.lazydata import lazy_dataclass
from qwen_triage.units import bounded_int

MAX_FIELD = 256  # a host or program name longer than this is not one


@lazy_dataclass(frozen=True)
class LineMeta:
    """Per-line origin and fields for lines that did not come from plain text."""

    line: int
    timestamp: str | None = None
    host: str | None = None
    program: str | None = None
    pid: int | None = None
    level: str | None = None

    def apply(self, rec: LineRecord) -> None:
        rec.timestamp = self.timestamp
        rec.host = self.host
        rec.program = self.program
        rec.pid = self.pid
        rec.level = self.level
        rec.formats = (JOURNAL_JSON,)


@dataclass
class Block:
    data: bytes  # whole lines, each ending in LF, ANSI codes and NULs removed (clean_lines)
    first_line: int  # line number of the first line of data
    truncated: frozenset[int] = frozenset()  # line numbers whose text was cut
    meta: list[LineMeta] | None = None  # journal input: one per line of data
    counted: int = -1  # lines in data; -1 until someone counts them (the matcher does, walking its candidates)

    @property
    def nlines(self) -> int:
        """Lines in data, counted on first use: counting is a pass over the block, done once."""
        if self.counted < 0:
            self.counted = self.data.count(b"\n")
        return self.counted

    def origin_line(self, index: int) -> int:
        return self.meta[index].line if self.meta is not None else self.first_line + index


def raw_blocks(stream: BinaryIO, source: Source, max_line: int = MAX_LINE, chunk: int = CHUNK,
               first_line: int = 1, check_text: bool = True) -> Iterator[Block]:
    """Whole-line blocks of the stream; overlong lines cut to ``max_line``.

    ``first_line``: the number of the stream's first line (a part of a file read on its own, engine.split);
    ``check_text``: whether the stream's first bytes are the input's own, to be checked for text
    (:func:`text_verdict`)."""
    line_no = first_line
    pending = b""
    skipping = False  # inside the unread tail of an overlong line
    read = stream.read  # a compressed input reads one decompression step a read (Opened)
    sample = b""
    from_start = check_text and source.bytes_read == 0  # the text check is made once, on a source's first bytes
    while True:
        try:
            data = read(chunk)
        except READ_ERRORS as exc:
            if not source.bytes_read and not pending:
                raise InputError(f"{source.name}: read failed: {exc}") from None
            source.notes.append(f"{source.name}: input ended early ({exc}); the report covers what was read")
            break
        if not data:
            break
        if from_start and len(sample) < SAMPLE:
            sample += data[: SAMPLE - len(sample)]
        source.bytes_read += len(data)
        if skipping:
            nl = data.find(b"\n")
            if nl < 0:
                continue
            data = data[nl + 1 :]
            skipping = False
        buf = pending + data if pending else data
        pos = 0
        end = len(buf)
        block_start = 0
        truncated: set[int] = set()
        cut_parts: list[bytes] = []
        # Walk by at most max_line: each step finds the last LF within reach,
        # so ordinary text costs ~len/max_line steps, not one per line.
        while pos < end:
            reach = min(pos + max_line + 1, end)
            nl = buf.rfind(b"\n", pos, reach)
            if nl >= 0:
                pos = nl + 1
                continue
            if reach < end or end - pos > max_line:
                # an overlong line begins at pos
                cut_parts.append(buf[block_start:pos])
                nlines = sum(p.count(b"\n") for p in cut_parts)
                truncated.add(line_no + nlines)
                cut_parts.append(buf[pos : pos + max_line] + b"\n")
                nl = buf.find(b"\n", pos + max_line)
                if nl < 0:
                    skipping = True
                    pos = end
                    block_start = end
                    break
                pos = nl + 1
                block_start = pos
                continue
            break  # incomplete last line: keep for the next chunk
        complete = b"".join(cut_parts) + buf[block_start:pos] if cut_parts else buf[:pos]
        pending = buf[pos:] if not skipping else b""
        if complete:
            block = _block(complete, line_no, truncated)
            yield block
            line_no += block.nlines  # after the matcher, which counts them as it goes
            source.lines_read = line_no - 1
    if pending:
        source.lines_read = line_no
        yield _block(pending + b"\n", line_no, set())
    if from_start:
        text_verdict(source, sample)


SAMPLE = 64 * 1024  # bytes from the start that decide whether an input is text at all
_NON_TEXT = re.compile("[\x00-\x07\x0e-\x1a\x1c-\x1f\x7f\ufffd]")
NON_TEXT_SHARE = 0.10


# the journal tool's own lines, not log entries: "-- No entries --", "-- Boot 3f2a… --", "-- Logs begin at … --"
_JOURNAL_MARKER = re.compile(rb"^-- [^\n]{1,300} --\r?$")


def text_verdict(source: Source, sample: bytes) -> None:
    """Whether the input, whose first :data:`SAMPLE` bytes (or all, when it is shorter) are ``sample``, holds a
    log at all (:attr:`Source.empty`) and is text; a note when it is empty or not text."""
    source.empty = len(sample) < SAMPLE and holds_nothing(sample)  # a sample shorter than SAMPLE is all of it
    note = text_note(source.name, sample)
    if note is not None:
        source.notes.append(note)


def holds_nothing(sample: bytes) -> bool:
    """Whether text holds no log line: nothing, blank lines, or only the journal tool's ``-- … --`` lines."""
    return all(not line.strip() or _JOURNAL_MARKER.match(line) for line in sample.split(b"\n"))


def text_note(name: str, sample: bytes) -> str | None:
    """A note when an input is empty or mostly not text, so "no diagnosis" is not taken for a healthy log."""
    if not sample:
        return f"{name}: empty input, nothing to triage"
    if len(sample) < SAMPLE and holds_nothing(sample):
        said = " (“-- No entries --”)" if b"-- No entries --" in sample else ""
        return f"{name}: no log line, only the journal's own marker lines{said}: nothing to triage"
    text = sample.decode("utf-8", "replace")
    odd = len(_NON_TEXT.findall(text))
    if odd > NON_TEXT_SHARE * len(text):
        return f"{name}: does not look like a text log ({100 * odd // len(text)}% of the first {len(sample)} bytes are not text)"
    return None


def strip_ansi_lines(data: bytes) -> bytes:
    """``data`` with ANSI codes removed, touching only the lines that hold an ESC.

    Codes go before the prefilter sees the block (a colour code inside a phrase
    would hide it), but most lines of a coloured log have none: running the
    substitution over the whole block cost more than finding the few that do.
    """
    esc = data.find(b"\x1b")
    if esc < 0:
        return data
    parts: list[bytes] = []
    done = 0
    while esc >= 0:
        start = data.rfind(b"\n", done, esc) + 1 or done
        end = data.find(b"\n", esc)
        end = len(data) if end < 0 else end
        parts.append(data[done:start])
        parts.append(ANSI_BYTES_RE.sub(b"", data[start:end]))
        done = end
        esc = data.find(b"\x1b", end)
    parts.append(data[done:])
    return b"".join(parts)


def clean_lines(data: bytes) -> bytes:
    """Whole lines as the prefilter should see them: what decoding removes from a line removed already.

    ANSI codes (:func:`strip_ansi_lines`) and NULs: a colour code or a NUL inside a
    phrase would hide it from the prefilter, yet :func:`~qwen_triage.engine.normalize.decode_line`
    drops both before any rule reads the message.
    """
    data = strip_ansi_lines(data)
    return data.replace(b"\x00", b"") if b"\x00" in data else data


def _block(data: bytes, first_line: int, truncated: set[int]) -> Block:
    return Block(data=clean_lines(data), first_line=first_line, truncated=frozenset(truncated))


def journal_blocks(blocks: Iterator[Block]) -> Iterator[Block]:
    """Turn blocks of the journal's JSON lines into blocks of their messages."""
    for block in blocks:
        out: list[bytes] = []
        meta: list[LineMeta] = []
        for i, line in enumerate(block.data.split(b"\n")[:-1]):
            origin = block.first_line + i
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser goes
                obj = None
            if not isinstance(obj, dict):
                out.append(line)
                meta.append(LineMeta(line=origin))
                continue
            message = obj.get("MESSAGE")
            if isinstance(message, list):  # journald stores non-UTF-8 text as a byte array
                try:
                    raw = bytes(b & 0xFF for b in message if isinstance(b, int))
                except ValueError:
                    raw = b""
            elif isinstance(message, str):
                raw = message.encode("utf-8", "surrogatepass")
            else:
                raw = b""
            # who wrote it: the name it gives, unless journald's own fields belie it (engine.origin)
            program = journal_program(obj, _text(obj.get("SYSLOG_IDENTIFIER")) or _text(obj.get("_COMM"))
                                      or _text(obj.get("_SYSTEMD_UNIT")))
            priority = obj.get("PRIORITY")
            fields = LineMeta(
                line=origin,
                timestamp=_journal_time(obj.get("__REALTIME_TIMESTAMP")),
                host=_text(obj.get("_HOSTNAME")),
                program=program,
                pid=_pid(obj.get("_PID")),
                level=PRIORITY_LEVELS.get(priority) if isinstance(priority, str) else None,
            )
            raw = clean_lines(raw)
            for part in raw.replace(b"\r\n", b"\n").split(b"\n"):
                out.append(part[:MAX_LINE])
                meta.append(fields)
        if out:
            yield Block(data=b"\n".join(out) + b"\n", first_line=block.first_line, meta=meta, truncated=block.truncated)


def _text(value: object) -> str | None:
    """A journal field that should be a short string; anything else is dropped."""
    return value if isinstance(value, str) and 0 < len(value) <= MAX_FIELD else None


def _pid(value: object) -> int | None:
    if not isinstance(value, str) or not value.isdigit():
        return None
    return bounded_int(value, max_digits=10)


def _journal_time(usec: object) -> str | None:
    if not isinstance(usec, str) or not usec.isdigit():
        return None
    number = bounded_int(usec, max_digits=19)
    if number is None:
        return None
    from datetime import datetime, timezone  # here, not at import: only journal JSON needs it

    try:
        return datetime.fromtimestamp(number / 1e6, tz=timezone.utc).isoformat(timespec="microseconds")
    except (OverflowError, ValueError, OSError):  # beyond the years datetime can hold
        return None


@dataclass(frozen=True)
class Decoder:
    """How the engine turns one kind of input into blocks of log lines: the longest raw line it keeps
    (``max_line``: the caller's limit, or what one record of the format may take) and the decoding step."""

    max_line: Callable[[int], int]
    decode: Callable[[Iterator[Block]], Iterator[Block]]


def _as_is(blocks: Iterator[Block]) -> Iterator[Block]:
    return blocks


# One decoder per kind of input (qwen_triage.inputs.source.KINDS); the readers name the kind.
DECODERS: Mapping[str, Decoder] = MappingProxyType({
    TEXT: Decoder(max_line=lambda limit: limit, decode=_as_is),
    # an entry is decoded whole, then each of its lines cut to the limit
    JOURNAL_JSON: Decoder(max_line=lambda limit: max(limit, JOURNAL_MAX_LINE), decode=journal_blocks),
})


def decode(kind: str, blocks: Iterator[Block]) -> Iterator[Block]:
    """Blocks of raw lines of an input of ``kind`` as blocks of log lines."""
    return DECODERS[kind].decode(blocks)


def line_limit(kind: str, max_line: int = MAX_LINE) -> int:
    """The longest raw line to keep when reading an input of ``kind`` whose log lines are cut at ``max_line``."""
    return DECODERS[kind].max_line(max_line)


def source_blocks(source: Source, max_line: int = MAX_LINE, chunk: int = CHUNK) -> Iterator[Block]:
    """Raw blocks of whole lines of one source, its :attr:`~Source.kind` set from its first bytes (gzip is the
    opener's); each to be decoded by that kind (:func:`decode`)."""
    stream = source.begin_sniffed()
    try:
        if source.kind in WHOLE:  # a dump or a JSON report, not lines: one block of its bytes (its reader bounds it)
            yield Block(data=stream.read(MAX_WHOLE + 1), first_line=1, counted=0)
            return
        yield from raw_blocks(stream, source, line_limit(source.kind, max_line), chunk)
    finally:
        source.end()


def iter_blocks(source: Source, max_line: int = MAX_LINE, chunk: int = CHUNK) -> Iterator[Block]:
    """Blocks of log lines of one source: :func:`source_blocks`, decoded by the kind its first bytes show."""
    raw = source_blocks(source, max_line, chunk)
    first = next(raw, None)  # reading starts: the sniff sets source.kind
    if first is not None:
        yield from decode(source.kind, itertools.chain((first,), raw))


def chunk_blocks(data: bytes, first_line: int, source: Source, kind: str, max_line: int = MAX_LINE) -> Iterator[Block]:
    """Raw blocks of one reader chunk of whole lines (:class:`~qwen_triage.inputs.base.Chunk`), numbered as lines
    of the whole source, overlong lines cut at the limit of ``kind``."""
    shift = first_line - 1
    for b in raw_blocks(io.BytesIO(data), source, line_limit(kind, max_line)):
        yield Block(data=b.data, first_line=b.first_line + shift,
                    truncated=frozenset(n + shift for n in b.truncated), counted=b.counted)


def is_terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):
        return False

