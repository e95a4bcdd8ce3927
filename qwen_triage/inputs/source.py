"""What an input is before the engine decodes it: a :class:`Source`, the bytes it opens to (:class:`Opened`), its
kind (:func:`sniff`), and the limits every reader keeps.

Why here, below the engine: readers (:mod:`qwen_triage.inputs.file`, ``journal``, ``kernel``, ``process``) hand
the engine a source and name the kind of what they read; the engine picks the decoder for that kind
(:data:`qwen_triage.engine.sources.DECODERS`). Nothing in this package imports the engine, so a new structured
format is one sniff here and one decoder there.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable
from zlib import error as zlib_error

# The kinds of input the engine can decode. A reader that knows what it reads says so (the journal reader reads
# the journal's JSON export); otherwise :func:`sniff` decides from the first line.
TEXT = "text"
JOURNAL_JSON = "journal-json"
KINDS = (TEXT, JOURNAL_JSON)
FLIGHT = "flight-recorder"  # a PyTorch Flight Recorder dump: not lines, read whole by engine.flight
RAS_JSON = "ncclras-json"  # an NCCL RAS report in JSON (`ncclras -f json`): read whole by engine.ras
MAX_WHOLE = 256 << 20  # bytes of an input read whole (a dump, a RAS report); a larger one is not read
WHOLE = (FLIGHT, RAS_JSON)  # kinds read whole, not as lines

CHUNK = 1 << 20
MAX_LINE = 64 * 1024
# A journal JSON line holds one message of up to MAX_LINE bytes; a non-UTF-8
# message is a byte array, up to four characters a byte ("255,"), plus fields.
JOURNAL_MAX_LINE = 5 * MAX_LINE
JOURNAL_START = re.compile(rb'\s*\{\s*"(?:__CURSOR|__REALTIME_TIMESTAMP|__MONOTONIC_TIMESTAMP|MESSAGE)"\s*:')
# what reading a stream may raise: a file's errors, a gzip cut short or corrupt (gzip.BadGzipFile is an OSError)
READ_ERRORS = (OSError, EOFError, zlib_error)


class InputError(Exception):
    """An input that cannot be read at all (missing file, broken gzip)."""


@dataclass
class Opened:
    """An input opened for reading (by :mod:`qwen_triage.inputs.file`): what the engine decodes, and the rest.

    ``stream`` gives the bytes to decode (already decompressed; a compressed one reads one decompression step
    a ``read``, so an input cut short loses nothing already decompressed); ``raw`` is the file under it, whose
    position is the progress bar's; ``close`` closes what the opener opened, never a stream it was given.
    """

    stream: BinaryIO
    raw: BinaryIO | None = None
    close: Callable[[], None] = lambda: None


@dataclass
class Source:
    """One input of a scan and what reading it found (counters, kind, notes), for the report.

    The engine does not open inputs: a source brings its bytes as :attr:`stream`, or an :attr:`opener`
    (:func:`qwen_triage.inputs.file.open_source` sets one) that the engine calls when it starts reading.
    A live source (``add_source``) has neither: its lines are fed to the scanner.
    """

    name: str  # what reports show: the path, or "<stdin>"
    index: int = 0
    path: Path | None = None  # None for stdin or a stream
    stream: BinaryIO | None = None  # bytes given to decode as they are (no opener); never closed here
    size: int | None = None  # bytes on disk, for progress (compressed size for gzip)
    lines_read: int = 0
    bytes_read: int = 0
    truncated_count: int = 0
    kind: str = TEXT  # one of KINDS
    empty: bool = False  # it held no log line: empty, or only the journal's own "-- No entries --" lines
    notes: list[str] = field(default_factory=list)  # about reading it (a gzip that ended early, not text)
    # opens the input when reading starts (inputs.file.open_source): N inputs named hold no file open until read
    opener: Callable[[], Opened] | None = field(default=None, repr=False)
    _raw: BinaryIO | None = field(default=None, repr=False)
    _close: Callable[[], None] | None = field(default=None, repr=False)

    def position(self) -> int:
        """Bytes consumed from the underlying file so far (for progress)."""
        raw = self._raw
        try:
            return raw.tell() if raw is not None and raw.seekable() else self.bytes_read
        except (OSError, ValueError):
            return self.bytes_read

    def begin(self) -> BinaryIO:
        """The bytes to decode: what :attr:`opener` opens now (:class:`InputError` when it cannot), else
        :attr:`stream` as given. :meth:`end` closes what was opened here."""
        if self.opener is None:
            assert self.stream is not None, f"{self.name}: a source needs a stream or an opener"
            self._raw = self.stream
            return self.stream
        opened = self.opener()
        self._raw, self._close = opened.raw, opened.close
        return opened.stream

    def begin_sniffed(self) -> BinaryIO:
        """:meth:`begin`, having looked at the first line to set :attr:`kind` (:func:`sniff`); the stream returned
        still gives every byte from the start. :class:`InputError` when the input cannot be opened or read."""
        stream = self.begin()
        try:
            head = _first_line(stream, JOURNAL_MAX_LINE)
        except READ_ERRORS as exc:
            raise InputError(f"{self.name}: {exc}") from None
        if head.strip() == b"{":  # a pretty-printed JSON document (NCCL RAS's): its first key is on the next line
            try:
                head += _first_line(stream, JOURNAL_MAX_LINE)
            except READ_ERRORS as exc:
                raise InputError(f"{self.name}: {exc}") from None
        self.kind = FLIGHT if looks_like_flight_dump(head) else RAS_JSON if looks_like_ras_json(head) else sniff(head)
        return _Prefixed(head, stream)  # type: ignore[return-value]

    def end(self) -> None:
        """Close what :meth:`begin` opened (a stream given as :attr:`stream` stays open: it is the caller's)."""
        close, self._close = self._close, None
        if close is not None:
            close()


def looks_like_flight_dump(head: bytes) -> bool:
    """Whether an input's first bytes are a PyTorch Flight Recorder dump: a pickle (protocol 2 and up) whose first
    key is its version, or the same as JSON (`{"version": …, "pg_config": …, "entries": [`)."""
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return b"version" in head[:64]
    return head.lstrip()[:1] == b"{" and b'"version"' in head[:200] and b'"pg_config"' in head[:1 << 16] \
        and b'"entries"' in head[:1 << 16]


def looks_like_ras_json(head: bytes) -> bool:
    """Whether an input's first bytes are an NCCL RAS report in JSON (`ncclras -f json`, NCCL 2.28.7+): an object
    whose first key is `nccl_version` (src/ras/client_support.cc, jsonWriteHeader), pretty-printed as NCCL writes
    it or compacted."""
    s = head.lstrip()
    return s[:1] == b"{" and s[1:200].lstrip().startswith(b'"nccl_version"')


def looks_like_journal_json(first: bytes) -> bool:
    """Whether the first line is a record of the journal's JSON export.

    ``first`` is the first line, or its first bytes when it is longer than
    anything a journal writes: then a record's opening key decides.
    """
    line = first.lstrip().split(b"\n", 1)[0]
    if not line.startswith(b"{"):
        return False
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return b"\n" not in first and bool(JOURNAL_START.match(line))
    return isinstance(obj, dict) and ("MESSAGE" in obj or "__CURSOR" in obj)


def sniff(first: bytes) -> str:
    """The kind of an input from its first line (or first bytes): :data:`JOURNAL_JSON` or :data:`TEXT`."""
    return JOURNAL_JSON if looks_like_journal_json(first) else TEXT


class _Prefixed:
    """A stream whose first read returns ``head`` (bytes already taken to look at the input)."""

    def __init__(self, head: bytes, stream: BinaryIO):
        self.head = head
        self._read = stream.read

    def read(self, n: int = -1) -> bytes:
        if not self.head:
            return self._read(n)
        if 0 <= n < len(self.head):  # a read shorter than the look: its first n bytes, as without the look
            head, self.head = self.head[:n], self.head[n:]
            return head
        head, self.head = self.head, b""
        if n == len(head):
            return head
        try:  # the same first chunk as without the look: block boundaries do not depend on it
            return head + self._read(n - len(head) if n > 0 else -1)
        except READ_ERRORS:
            return head  # the next read fails again and says so


def _first_line(stream: BinaryIO, limit: int) -> bytes:
    """Bytes from the start up to the first LF, or ``limit`` bytes; without waiting for more than one read."""
    read1 = getattr(stream, "read1", stream.read)
    head = b""
    while b"\n" not in head and len(head) < limit:
        try:
            data = read1(limit - len(head))
        except READ_ERRORS:
            if not head:
                raise
            break  # what was read is kept; reading on fails again and says so
        if not data:
            break
        head += data
    return head
