"""Inputs to blocks of whole lines.

Files are read as bytes in large chunks and split on LF only (a bare CR, as in
Ollama's pull progress, is not a line end — text mode would shift every later
line number). A line longer than ``max_line`` is cut to that prefix and the
rest skipped without being held, so a 100 MB line costs ``max_line`` bytes.
`journalctl -o json` input is decoded into its MESSAGE lines, keeping each
one's journal fields and origin line.
"""

from __future__ import annotations

import gzip
import io
import json
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO, Iterator

from qwen_triage.engine.normalize import ANSI_BYTES_RE, PRIORITY_LEVELS
from qwen_triage.engine.records import LineRecord

CHUNK = 1 << 20
MAX_LINE = 64 * 1024
GZIP_MAGIC = b"\x1f\x8b"


class InputError(Exception):
    """An input that cannot be read at all (missing file, broken gzip)."""


@dataclass(frozen=True)
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
        rec.formats = ("journal-json",)


@dataclass
class Block:
    data: bytes  # whole lines, each ending in LF, ANSI codes removed
    first_line: int  # line number of the first line of data
    truncated: frozenset[int] = frozenset()  # line numbers whose text was cut
    meta: list[LineMeta] | None = None  # journal input: one per line of data
    nlines: int = -1  # lines in data, when the reader already counted them

    def __post_init__(self) -> None:
        if self.nlines < 0:
            self.nlines = self.data.count(b"\n")

    def origin_line(self, index: int) -> int:
        return self.meta[index].line if self.meta is not None else self.first_line + index


@dataclass
class Source:
    name: str  # what reports show: the path, or "<stdin>"
    index: int = 0
    path: Path | None = None  # None for stdin or a stream
    stream: BinaryIO | None = None
    size: int | None = None  # bytes on disk, for progress (compressed size for gzip)
    lines_read: int = 0
    bytes_read: int = 0
    truncated_count: int = 0
    kind: str = "text"  # "text" or "journal-json"
    _raw: BinaryIO | None = field(default=None, repr=False)

    @classmethod
    def from_arg(cls, arg: str, index: int = 0) -> "Source":
        if arg == "-":
            return cls(name="<stdin>", index=index, stream=sys.stdin.buffer)
        path = Path(arg).expanduser()
        if path.is_dir():
            raise InputError(f"{arg}: is a directory")
        if not path.exists():
            raise InputError(f"{arg}: no such file")
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise InputError(f"{arg}: {exc.strerror}") from None
        return cls(name=str(arg), index=index, path=path, size=size)

    def position(self) -> int:
        """Bytes consumed from the underlying file so far (for progress)."""
        raw = self._raw
        try:
            return raw.tell() if raw is not None and raw.seekable() else self.bytes_read
        except (OSError, ValueError):
            return self.bytes_read

    def open(self) -> BinaryIO:
        if self.stream is not None:
            raw: BinaryIO = self.stream
        else:
            assert self.path is not None
            try:
                raw = open(self.path, "rb")  # noqa: SIM115 - closed by iter_blocks
            except OSError as exc:
                raise InputError(f"{self.name}: {exc.strerror}") from None
        self._raw = raw
        buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[arg-type]
        try:
            head = buffered.peek(2)[:2]
        except (OSError, ValueError):
            head = b""
        if head == GZIP_MAGIC:
            return gzip.GzipFile(fileobj=buffered)  # type: ignore[return-value]
        return buffered  # type: ignore[return-value]


def looks_like_journal_json(first: bytes) -> bool:
    line = first.lstrip().split(b"\n", 1)[0]
    if not line.startswith(b"{"):
        return False
    try:
        obj = json.loads(line)
    except ValueError:
        return False
    return isinstance(obj, dict) and ("MESSAGE" in obj or "__CURSOR" in obj)


def raw_blocks(stream: BinaryIO, source: Source, max_line: int = MAX_LINE, chunk: int = CHUNK) -> Iterator[Block]:
    """Whole-line blocks of the stream; overlong lines cut to ``max_line``."""
    line_no = 1
    pending = b""
    skipping = False  # inside the unread tail of an overlong line
    while True:
        try:
            data = stream.read(chunk)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise InputError(f"{source.name}: read failed after line {line_no - 1}: {exc}") from None
        if not data:
            break
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
            line_no += block.nlines
            source.lines_read = line_no - 1
            yield block
    if pending:
        source.lines_read = line_no
        yield _block(pending + b"\n", line_no, set())


def _block(data: bytes, first_line: int, truncated: set[int]) -> Block:
    if b"\x1b" in data:
        data = ANSI_BYTES_RE.sub(b"", data)
    return Block(data=data, first_line=first_line, truncated=frozenset(truncated))


def journal_blocks(blocks: Iterator[Block]) -> Iterator[Block]:
    """Turn blocks of `journalctl -o json` lines into blocks of their messages."""
    for block in blocks:
        out: list[bytes] = []
        meta: list[LineMeta] = []
        for i, line in enumerate(block.data.split(b"\n")[:-1]):
            origin = block.first_line + i
            try:
                obj = json.loads(line)
            except ValueError:
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
            pid = obj.get("_PID")
            program = obj.get("SYSLOG_IDENTIFIER") or obj.get("_COMM") or obj.get("_SYSTEMD_UNIT")
            if obj.get("_TRANSPORT") == "kernel":
                program = "kernel"
            fields = LineMeta(
                line=origin,
                timestamp=_journal_time(obj.get("__REALTIME_TIMESTAMP")),
                host=obj.get("_HOSTNAME"),
                program=program,
                pid=int(pid) if isinstance(pid, str) and pid.isdigit() else None,
                level=PRIORITY_LEVELS.get(str(obj.get("PRIORITY"))),
            )
            if b"\x1b" in raw:
                raw = ANSI_BYTES_RE.sub(b"", raw)
            for part in raw.replace(b"\r\n", b"\n").split(b"\n"):
                out.append(part[:MAX_LINE])
                meta.append(fields)
        if out:
            yield Block(data=b"\n".join(out) + b"\n", first_line=block.first_line, meta=meta, truncated=block.truncated)


def _journal_time(usec: object) -> str | None:
    if not isinstance(usec, str) or not usec.isdigit():
        return None
    return datetime.fromtimestamp(int(usec) / 1e6, tz=timezone.utc).isoformat(timespec="microseconds")


def iter_blocks(source: Source, max_line: int = MAX_LINE, chunk: int = CHUNK) -> Iterator[Block]:
    """Blocks of one source, detecting gzip and journal JSON from the first bytes."""
    stream = source.open()
    try:
        try:
            head = stream.peek(4096)[:4096] if hasattr(stream, "peek") else b""
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise InputError(f"{source.name}: {exc}") from None
        blocks = raw_blocks(stream, source, max_line, chunk)
        if looks_like_journal_json(head):
            source.kind = "journal-json"
            blocks = journal_blocks(blocks)
        for block in blocks:
            source.truncated_count += len(block.truncated)
            yield block
    finally:
        if source.stream is None:
            stream.close()
            if source._raw is not None:
                source._raw.close()


def is_terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):
        return False

