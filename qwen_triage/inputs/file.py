"""Files: ONE way to read a log file, for ``check``'s incremental reads and ``scan --follow``'s ``tail -F``.

Both read a file by its identity (device, inode), an offset and a hash of its first bytes
(:class:`~qwen_triage.inputs.position.FileCursor`), so both recognise the same three events the same way:

- rotation: the path names another inode. :class:`FileReader` (one read per ``check`` run) looks the old
  file up by its identity among the usual rotated names (``path.1``, ``path.0``, ``path-20250107``, …) and
  reads its unread tail first; :class:`FileFollower` (a process that stays) still holds the old file open,
  reads its last lines, then follows the new file from its start.
- truncation (``copytruncate``) or a rewrite in place: the file is shorter than the offset, or its first bytes
  changed; reading starts again at 0.
- a file that is missing: an error for a run of ``check``; waited for by a follower.

Compressed files (gzip) do not grow: :func:`is_gzip` lets ``--follow`` refuse them (``scan`` reads them whole:
:func:`open_source` opens a path or stdin, decompressing gzip found by its magic); stdin that is a regular file
is followed as ``/dev/stdin``. Decoding the bytes read (line limits, journal JSON, ANSI) is the engine's, by the kind a
chunk carries, not this module's.
"""

from __future__ import annotations

import io
import os
import stat
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Callable, Generator, Iterable, Iterator

from qwen_triage.inputs.base import Chunk, Reader, totals
from qwen_triage.inputs.source import InputError, Opened, Source, sniff

if TYPE_CHECKING:  # the positions import pydantic: only the readers that keep one need it (not `scan`)
    import gzip

    from qwen_triage.inputs.position import FileCursor, SourceState

GZIP_MAGIC = b"\x1f\x8b"

HEAD = 4096  # bytes of a file's start hashed to recognise it
READ_CHUNK = 4 << 20  # bytes read per step (and per chunk handed to the engine)
LONG_LINE = 1 << 20  # a "line" with no LF this long is taken as it is rather than waited for
MAX_ROTATED_CANDIDATES = 64
COMPRESSED = (".gz", ".xz", ".bz2", ".zst", ".lz4", ".z")
FOLLOW_READ_LIMIT = 4 << 20  # per file per round of a follower, so one huge file does not starve the others
BREAK = "break"  # marker in a poll result: end the partial line before the bytes that follow


def _head(fd: int, length: int = HEAD) -> bytes:
    try:
        return os.pread(fd, length, 0)
    except OSError:
        return b""


def _hash(data: bytes) -> str:
    import hashlib  # here: only a reader that keeps a cursor hashes, and hashlib loads OpenSSL (a plain scan never)

    return hashlib.sha256(data).hexdigest()


def new_cursor(fd: int, st: os.stat_result, offset: int, line: int = 0) -> FileCursor:
    """The position of a file opened just now: its identity, ``offset`` and the hash of its first bytes."""
    from qwen_triage.inputs.position import FileCursor

    head = _head(fd)
    return FileCursor(dev=st.st_dev, ino=st.st_ino, offset=offset, head_len=len(head), head_hash=_hash(head), line=line)


def still_same(fd: int, st: os.stat_result, cur: FileCursor) -> bool:
    """False when the file was truncated (shorter than the offset) or rewritten (other first bytes)."""
    if st.st_size < cur.offset:
        return False
    return _hash(_head(fd, cur.head_len)) == cur.head_hash


def grow_head(fd: int, cur: FileCursor) -> bytes:
    """Hash more of a file's start as it grows (up to HEAD bytes), while what was hashed is unchanged."""
    head = _head(fd)
    if cur.head_len < HEAD and len(head) > cur.head_len and _hash(head[: cur.head_len]) == cur.head_hash:
        cur.head_len, cur.head_hash = len(head), _hash(head)
    return head


def rotated_candidates(path: Path) -> list[Path]:
    """Names a rotated copy of ``path`` may have, most likely first (compressed ones cannot be resumed)."""
    first = [path.with_name(path.name + ".1"), path.with_name(path.name + ".0")]
    try:
        others = sorted(
            (p for p in path.parent.iterdir() if p.name.startswith(path.name) and p != path and p not in first
             and not p.name.lower().endswith(COMPRESSED)),
            key=lambda p: p.name,
        )
    except OSError:
        others = []
    return first + others[:MAX_ROTATED_CANDIDATES]


def printable_path(path: str) -> str:
    """A path as text that JSON, metrics and reports can carry: bytes that are not UTF-8 (the surrogates
    Python decodes them to) written as ``\\xNN``, so the state of a file named so can be saved."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


class FileReader(Reader):
    def __init__(self, path: str, from_end: bool = False):
        name = printable_path(path)
        super().__init__(key=f"file:{name}", label=name, via="file")
        self.path = Path(path)
        self.from_end = from_end

    def _open(self, path: Path) -> tuple[int, os.stat_result] | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return None
        return fd, st

    def _find_rotated(self, cur: FileCursor) -> tuple[int, os.stat_result, Path] | None:
        for cand in rotated_candidates(self.path):
            try:
                st = os.stat(cand)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) != (cur.dev, cur.ino):
                continue
            opened = self._open(cand)
            if opened is None:
                continue
            fd, st = opened
            if (st.st_dev, st.st_ino) == (cur.dev, cur.ino):
                return fd, st, cand
            os.close(fd)
        return None

    def read(self, prev: SourceState | None, budget: int, deadline: float, boot_id: str = "") -> Iterator[Chunk]:
        from qwen_triage.inputs.position import SourceState

        cur = prev.file if prev is not None else None
        total, total_bytes = totals(prev)
        opened = self._open(self.path)
        if opened is None and not self.path.exists():
            why = "no such file"
        elif opened is None:
            why = "not a readable regular file"
        else:
            why = ""
        if cur is not None and (opened is None or (opened[1].st_dev, opened[1].st_ino) != (cur.dev, cur.ino)):
            # The path names another file now (or none): rotated. Finish the old one first.
            old = self._find_rotated(cur)
            if old is not None:
                fd, st, where = old
                try:
                    ok = still_same(fd, st, cur)
                    if ok:
                        self.notes.append(f"{self.label}: rotated; reading the rest of {printable_path(where.name)} first")
                        done = yield from self._read_fd(fd, cur, budget, deadline)
                        budget -= self.bytes
                    else:
                        done = True
                        self.notes.append(f"{self.label}: rotated and {printable_path(where.name)} was rewritten; its tail is skipped")
                finally:
                    os.close(fd)
                if not done or opened is None:
                    # budget spent inside the old file, or no new file yet: keep the old file's position
                    if opened is None:
                        self.notes.append(f"{self.label}: rotated; the new file does not exist yet")
                    self.state = SourceState(kind="file", file=cur, lines_total=total + self.lines,
                                             bytes_total=total_bytes + self.bytes)
                    if opened is not None:
                        os.close(opened[0])
                    return
            elif opened is not None:
                self.notes.append(
                    f"{self.label}: rotated, and the old file was not found under a known name "
                    f"({printable_path(self.path.name)}.1, …): what was written to it after the last check was not read"
                )
            line = cur.line
            cur = None
        else:
            line = cur.line if cur is not None else 0
        if opened is None:
            self.error = f"{self.label}: {why}"
            self.state = prev
            return
        fd, st = opened
        try:
            if cur is not None and not still_same(fd, st, cur):
                self.notes.append(f"{self.label}: truncated or rewritten; reading it again from the start")
                cur = None
                line = 0
            if cur is None:
                start = st.st_size if self.from_end and prev is None else 0
                if start:
                    # from the end: begin after the last complete line
                    tail = os.pread(fd, min(start, LONG_LINE), start - min(start, LONG_LINE))
                    nl = tail.rfind(b"\n")
                    start = start - len(tail) + nl + 1 if nl >= 0 else start - len(tail)
                cur = new_cursor(fd, st, start, line)
            yield from self._read_fd(fd, cur, budget, deadline)
        finally:
            os.close(fd)
        self.state = SourceState(kind="file", file=cur, lines_total=total + self.lines,
                                 bytes_total=total_bytes + self.bytes)

    def _read_fd(self, fd: int, cur: FileCursor, budget: int, deadline: float) -> Generator[Chunk, None, bool]:
        """Read from cur.offset; advance cur past whole lines only. Returns True at the end of the file."""
        head = grow_head(fd, cur)
        kind = sniff(head)  # the journal's JSON saved to a file is read as journal entries
        spent = 0
        while True:
            if spent >= budget or time.monotonic() > deadline:
                self.more = True
                return False
            want = min(READ_CHUNK, budget - spent)
            try:
                data = os.pread(fd, want, cur.offset)
            except OSError as exc:
                self.error = f"{self.label}: read failed: {exc.strerror}"
                return True
            if not data:
                return True
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                if len(data) < LONG_LINE:
                    if len(data) == want:  # the budget ends inside a line: the rest next run
                        self.more = True
                        return False
                    return True  # an unfinished last line: wait for its end
                cut = len(data)  # one enormous line: take it (the engine keeps its prefix)
                data = data + b"\n"
                body = data
            else:
                body = data[:cut]
            n = body.count(b"\n")
            yield Chunk(data=body, first_line=cur.line + 1, kind=kind)
            cur.offset += cut
            cur.line += n
            spent += cut
            self.lines += n
            self.bytes += cut


class FileFollower:
    """One path followed across appends, rotation and truncation, like ``tail -F`` (``scan --follow``, ``attach``).

    The position is the same :class:`~qwen_triage.inputs.position.FileCursor` a :class:`FileReader` keeps, and
    truncation is recognised the same way (:func:`still_same`: shorter than the offset, or other first bytes).
    Unlike a reader, a follower hands on every byte as it arrives (a partial line too: the live session holds it
    until its end) and keeps the old file open across a rotation, so it needs no rotated-name lookup.
    """

    def __init__(self, path: str | Path, from_end: bool = False, note: Callable[[str], None] | None = None,
                 by_name: bool = True):
        self.path = str(path)
        self.from_end = from_end
        self.by_name = by_name  # False: the open file only, like `tail -f` (attach: /proc/PID/fd/N)
        self.note = note or (lambda _msg: None)
        self.fd: int | None = None
        self.cursor: FileCursor | None = None
        self.more = False  # the last poll stopped at FOLLOW_READ_LIMIT: call again soon
        self._missing_noted = False
        self._gone_noted = False
        self.rotations = 0
        self.truncations = 0

    @property
    def ident(self) -> tuple[int, int] | None:
        return None if self.cursor is None else (self.cursor.dev, self.cursor.ino)

    def _open(self, at_end: bool) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            if not self._missing_noted:
                self._missing_noted = True
                self.note(f"{self.path}: does not exist (yet); waiting for it")
            return False
        except OSError as exc:
            if not self._missing_noted:
                self._missing_noted = True
                self.note(f"{self.path}: cannot open ({exc.strerror}); retrying")
            return False
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            os.close(fd)
            raise IsADirectoryError(self.path)
        if self._missing_noted:
            self.note(f"{self.path}: appeared; following it")
        self._missing_noted = False
        self.fd = fd
        offset = os.lseek(fd, 0, os.SEEK_END) if at_end and stat.S_ISREG(st.st_mode) else 0
        self.cursor = new_cursor(fd, st, offset)
        return True

    def _read(self, limit: int) -> bytes:
        assert self.fd is not None and self.cursor is not None
        parts: list[bytes] = []
        got = 0
        while got < limit:
            try:
                data = os.pread(self.fd, min(1 << 20, limit - got), self.cursor.offset)
            except OSError:
                break
            if not data:
                break
            parts.append(data)
            got += len(data)
            self.cursor.offset += len(data)
        self.more = got >= limit
        return b"".join(parts)

    def poll(self) -> list[bytes | str]:
        """New bytes since the last call, with BREAK where the file under the path changed."""
        out: list[bytes | str] = []
        if self.fd is None:
            first = self.cursor is None
            if not self._open(at_end=self.from_end and first):
                return out
        assert self.fd is not None and self.cursor is not None
        try:
            st = os.fstat(self.fd)
        except OSError:
            st = None
        if st is not None and stat.S_ISREG(st.st_mode):
            if not still_same(self.fd, st, self.cursor):
                self.truncations += 1
                self.note(f"{self.path}: truncated; reading it again from the start")
                out.append(BREAK)
                self.cursor = new_cursor(self.fd, st, 0)
            grow_head(self.fd, self.cursor)
        data = self._read(FOLLOW_READ_LIMIT)
        if data:
            out.append(data)
        if self.more or not self.by_name:
            return out
        try:
            now_st = os.stat(self.path)
            now = (now_st.st_dev, now_st.st_ino)
        except OSError:
            now = None
        if now is None:
            if not self._gone_noted:
                self._gone_noted = True
                self.note(f"{self.path}: gone (rotated away?); still reading the old file, waiting for a new one")
            return out
        self._gone_noted = False
        if now != self.ident:
            rest = self._read(1 << 62)  # the old file's last lines
            if rest:
                out.append(rest)
            os.close(self.fd)
            self.fd = None
            self.rotations += 1
            self.note(f"{self.path}: rotated; following the new file")
            out.append(BREAK)
            if self._open(at_end=False):
                data = self._read(FOLLOW_READ_LIMIT)
                if data:
                    out.append(data)
        return out

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def is_gzip(path: Path) -> bool:
    """Whether the file starts as gzip does (such a file is read whole, never followed)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == GZIP_MAGIC
    except OSError:
        return False


def stdin_is_regular_file() -> bool:
    """``< file`` on the command line: stdin can then be followed like the file it is."""
    try:
        return stat.S_ISREG(os.fstat(0).st_mode)
    except OSError:
        return False


# --- whole inputs for `scan` -----------------------------------------------------------------------------


def open_source(arg: str, index: int = 0) -> Source:
    """A command-line input for the engine to decode: ``-`` is stdin, anything else a file path.

    The path is checked now (a directory, a missing file, one that cannot be stat'ed: :class:`InputError` with
    the message ``scan`` prints) and opened only when the engine starts reading it (:attr:`Source.opener`), so
    a scan of ten thousand paths holds one file open at a time, and closed when it has been read.
    """
    if arg == "-":
        stdin = sys.stdin.buffer
        return Source(name="<stdin>", index=index, opener=lambda: _decompressed(stdin))
    path = Path(arg).expanduser()
    if path.is_dir():
        raise InputError(f"{arg}: is a directory")
    if not path.exists():
        raise InputError(f"{arg}: no such file")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InputError(f"{arg}: {exc.strerror}") from None
    name = str(arg)
    return Source(name=name, index=index, path=path, size=size, opener=lambda: _open_file(path, name))


def _open_file(path: Path, name: str) -> Opened:
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed by Opened.close, when the engine has read it
    except OSError as exc:
        raise InputError(f"{name}: {exc.strerror}") from None
    opened = _decompressed(raw)

    def close() -> None:
        opened.stream.close()
        raw.close()

    return Opened(stream=opened.stream, raw=raw, close=close)


def _decompressed(raw: BinaryIO) -> Opened:
    """``raw`` buffered, and decompressed when it starts as gzip does (its magic decides, not its name).

    Closing is the caller's: stdin stays open; a file is closed by :func:`_open_file`'s ``close``.
    """
    buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[type-var]
    try:
        head = buffered.peek(2)[:2]
    except (OSError, ValueError):
        head = b""
    if head == GZIP_MAGIC:
        import gzip  # here: most inputs are plain text

        return Opened(stream=_Stepwise(gzip.GzipFile(fileobj=buffered)), raw=raw)  # type: ignore[arg-type]
    return Opened(stream=buffered, raw=raw)


class _Stepwise:
    """A gzip stream whose ``read`` is one decompression step (``read1``): an input that ends early (a cut
    download) loses nothing already decompressed; the engine reports what was read, with a note."""

    def __init__(self, gz: gzip.GzipFile):
        self._gz = gz
        self.read = self.read1 = gz.read1

    def close(self) -> None:
        self._gz.close()


def expand_inputs(args: Iterable[str]) -> list[str]:
    """The files ``scan --jobs`` covers: files as given; directories -> their regular files, recursively, sorted,
    hidden names skipped (``.git``, ``.cache``…), symlinked directories not followed. :class:`InputError` for
    stdin or a missing path."""
    out: list[str] = []
    for arg in args:
        if arg == "-":
            raise InputError("batch mode reads files; give stdin to a plain `scan`")
        path = Path(arg).expanduser()
        if path.is_dir():
            found = []
            for root, dirs, files in os.walk(path):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                found += [os.path.join(root, f) for f in files if not f.startswith(".")]
            out += sorted(f for f in found if os.path.isfile(f))
        elif path.exists():
            out.append(arg)
        else:
            raise InputError(f"{arg}: no such file or directory")
    return out
