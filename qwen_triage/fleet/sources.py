"""Incremental readers for `qwen-triage check`: each run reads only what is new since the last.

A reader turns one source into :class:`Chunk` s of whole lines (or whole
`journalctl -o json` entries), reading at most ``budget`` bytes and stopping at a
``deadline``; once exhausted it leaves the position to store in ``reader.state``.
The caller stores that state only after it has matched every chunk, so a run
that dies half-way reads the same lines again next time rather than skipping them.

- files: the position is the file's identity (device, inode), the offset and a
  hash of its first bytes. A path that names another inode was rotated: the old
  file is looked for by its identity among the usual rotated names (``path.1``,
  ``path.0``, ``path-20250107``, …) and its unread tail read first; a file
  shorter than the offset, or whose first bytes changed, was truncated
  (``copytruncate``) or rewritten and is read again from the start.
- journal (``--journal UNIT``, and ``--kernel`` where there is a journal):
  ``journalctl -o json --after-cursor`` with the ``__CURSOR`` of the last entry read.
- /dev/kmsg (``--kernel`` without a journal): non-blocking reads, skipping
  records up to the stored sequence number (reset when the boot id changes).
- dmesg (last resort): lines after the stored timestamp.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import select
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from qwen_triage.fleet.state import FileCursor, SourceState
from qwen_triage.engine.sources import JOURNAL_MAX_LINE, looks_like_journal_json

HEAD = 4096  # bytes of a file's start hashed to recognise it
READ_CHUNK = 4 << 20  # bytes read per step (and per chunk handed to the engine)
PIPE_CHUNK = 1 << 20  # bytes gathered from journalctl's pipe per chunk
LONG_LINE = 1 << 20  # a "line" with no LF this long is taken as it is rather than waited for
MAX_ENTRY = JOURNAL_MAX_LINE  # a `journalctl -o json` entry longer than the engine decodes is skipped, with a note
MAX_ROTATED_CANDIDATES = 64
JOURNALCTL_ENV = "QWEN_TRIAGE_JOURNALCTL"
KMSG_ENV = "QWEN_TRIAGE_KMSG"
KMSG_PATH = "/dev/kmsg"
JOURNAL_DIRS = ("/run/log/journal", "/var/log/journal")
COMPRESSED = (".gz", ".xz", ".bz2", ".zst", ".lz4", ".z")


@dataclass
class Chunk:
    data: bytes  # whole lines, each ending in LF
    first_line: int  # line number of the first one, counted over the source's life
    journal: bool = False  # the lines are `journalctl -o json` entries


@dataclass
class Reader:
    key: str  # state key: "kernel", "journal:ollama.service", "file:/var/log/x.log"
    label: str  # what reports and metrics call it
    state: SourceState | None = None  # after read(): the position to store
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # the source could not be read this run
    more: bool = False  # stopped at the budget or the deadline; the rest is left for the next run
    lines: int = 0
    bytes: int = 0
    via: str = ""  # how it was read (journalctl, /dev/kmsg, dmesg, file)

    def read(self, prev: SourceState | None, budget: int, deadline: float, boot_id: str) -> Iterator[Chunk]:
        raise NotImplementedError


# -- files ----------------------------------------------------------------------------------------


def _head(fd: int, length: int = HEAD) -> bytes:
    try:
        return os.pread(fd, length, 0)
    except OSError:
        return b""


def _hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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

    def read(self, prev: SourceState | None, budget: int, deadline: float, boot_id: str) -> Iterator[Chunk]:
        cur = prev.file if prev is not None else None
        total = prev.lines_total if prev else 0
        total_bytes = prev.bytes_total if prev else 0
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
                    ok = self._still_same(fd, st, cur)
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
            if cur is not None and not self._still_same(fd, st, cur):
                self.notes.append(f"{self.label}: truncated or rewritten; reading it again from the start")
                cur = None
                line = 0
            if cur is None:
                head = _head(fd)
                start = st.st_size if self.from_end and prev is None else 0
                if start:
                    # from the end: begin after the last complete line
                    tail = os.pread(fd, min(start, LONG_LINE), start - min(start, LONG_LINE))
                    nl = tail.rfind(b"\n")
                    start = start - len(tail) + nl + 1 if nl >= 0 else start - len(tail)
                cur = FileCursor(dev=st.st_dev, ino=st.st_ino, offset=start, head_len=len(head),
                                 head_hash=_hash(head), line=line)
            yield from self._read_fd(fd, cur, budget, deadline)
        finally:
            os.close(fd)
        self.state = SourceState(kind="file", file=cur, lines_total=total + self.lines,
                                 bytes_total=total_bytes + self.bytes)

    @staticmethod
    def _still_same(fd: int, st: os.stat_result, cur: FileCursor) -> bool:
        if st.st_size < cur.offset:
            return False
        return _hash(_head(fd, cur.head_len)) == cur.head_hash

    def _read_fd(self, fd: int, cur: FileCursor, budget: int, deadline: float) -> Iterator[Chunk]:
        """Read from cur.offset; advance cur past whole lines only. Returns True at the end of the file."""
        head = _head(fd)
        if cur.head_len < HEAD and len(head) > cur.head_len and _hash(head[: cur.head_len]) == cur.head_hash:
            cur.head_len, cur.head_hash = len(head), _hash(head)
        journal = looks_like_journal_json(head)  # a saved `journalctl -o json`: read as journal entries
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
            yield Chunk(data=body, first_line=cur.line + 1, journal=journal)
            cur.offset += cut
            cur.line += n
            spent += cut
            self.lines += n
            self.bytes += cut


# -- the journal ----------------------------------------------------------------------------------


def journalctl_path() -> str | None:
    return os.environ.get(JOURNALCTL_ENV) or shutil.which("journalctl")


def journal_present() -> bool:
    if os.environ.get(JOURNALCTL_ENV):
        return True
    for d in JOURNAL_DIRS:
        try:
            if any(Path(d).iterdir()):
                return True
        except OSError:
            continue
    return False


def journal_command(binary: str, unit: str | None, cursor: str | None, since: str | None = None) -> list[str]:
    cmd = [binary, "--output=json", "--all", "--no-pager", "--quiet"]
    cmd += ["--dmesg"] if unit is None else [f"--unit={unit}"]
    if cursor:
        cmd.append(f"--after-cursor={cursor}")
    elif since:
        cmd.append(f"--since={since}")
    else:
        cmd.append("--boot")
    return cmd


_CURSOR_RE = re.compile(rb'"__CURSOR"\s*:\s*"((?:[^"\\]|\\.)*)"')


def last_cursor(lines: bytes) -> str | None:
    """The __CURSOR of the last entry in a block of `journalctl -o json` lines."""
    end = len(lines.rstrip(b"\n"))
    start = lines.rfind(b"\n", 0, end) + 1
    line = lines[start:end]
    try:
        obj = json.loads(line)
        cursor = obj.get("__CURSOR") if isinstance(obj, dict) else None
        return cursor if isinstance(cursor, str) else None
    except ValueError:
        m = _CURSOR_RE.search(line)
        return m[1].decode("utf-8", "replace") if m else None


class JournalReader(Reader):
    def __init__(self, unit: str | None):
        if unit is None:
            super().__init__(key="kernel", label="kernel", via="journalctl")
        else:
            name = unit if "." in unit else unit + ".service"
            super().__init__(key=f"journal:{name}", label=f"journal:{name}", via="journalctl")
        self.unit = None if unit is None else self.label.split(":", 1)[1]

    def read(self, prev: SourceState | None, budget: int, deadline: float, boot_id: str) -> Iterator[Chunk]:
        cursor = prev.cursor if prev is not None and prev.kind == "journal" else None
        total = prev.lines_total if prev and prev.kind == "journal" else 0
        total_bytes = prev.bytes_total if prev and prev.kind == "journal" else 0
        binary = journalctl_path()
        if binary is None:
            self.error = "journalctl is not installed"
            self.state = prev
            return
        since = None
        for attempt in (1, 2):
            status, err, stopped = yield from self._run(journal_command(binary, self.unit, cursor, since), budget,
                                                        deadline, total)
            if status in (0, None) or stopped or self.lines or not cursor or attempt == 2:
                break
            # the cursor is no longer in the journal (vacuumed, or the journal was replaced): go on from the
            # time it names rather than failing forever
            since = cursor_time(cursor)
            self.notes.append(f"journal cursor no longer valid ({err[:120]}); reading from "
                              f"{'its time' if since else 'the start of this boot'} instead")
            cursor = None
        if status not in (0, None) and not stopped and self.lines == 0:
            self.error = f"journalctl failed (status {status}): {err[:300] or 'no message'}"
        if self._cursor:
            cursor = self._cursor
        self.state = SourceState(kind="journal", cursor=cursor, lines_total=total + self.lines,
                                 bytes_total=total_bytes + self.bytes)

    _cursor: str | None = None

    def _run(self, cmd: list[str], budget: int, deadline: float, total: int):  # type: ignore[no-untyped-def]
        """Run journalctl, yield chunks of whole entries; returns (exit status, stderr tail, stopped early)."""
        errf = tempfile.TemporaryFile()
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errf, stdin=subprocess.DEVNULL)
        except OSError as exc:
            errf.close()
            return 127, f"cannot run journalctl: {exc.strerror}", False
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = bytearray()
        whole = 0  # bytes of buf that are whole entries (up to and including its last LF)
        spent = 0
        stopped = False
        skipping = False  # inside an entry over the line limit: its bytes are dropped up to its LF
        try:
            while True:
                left = deadline - time.monotonic()
                if spent >= budget or left <= 0:
                    self.more = stopped = True
                    break
                ready, _, _ = select.select([fd], [], [], left)
                if not ready:
                    self.more = stopped = True
                    break
                data = os.read(fd, min(READ_CHUNK, max(budget - spent - len(buf), 1)))
                eof = not data
                if data and skipping:
                    nl = data.find(b"\n")
                    dropped = len(data) if nl < 0 else nl + 1
                    self.bytes += dropped
                    spent += dropped
                    if nl < 0:
                        continue
                    skipping = False
                    self.lines += 1
                    data = data[nl + 1 :]
                if data:
                    nl = data.rfind(b"\n")
                    if nl >= 0:
                        whole = len(buf) + nl + 1
                    buf += data
                    if len(buf) - whole > MAX_ENTRY:
                        # one entry longer than any message the engine reads (journald itself splits lines at
                        # 48 KiB; this came through the native protocol): skip it, keep its cursor, go on
                        yield from self._entries(buf, whole, total)
                        cursor = _CURSOR_RE.search(bytes(buf[whole : whole + HEAD]))
                        if cursor:
                            self._cursor = cursor[1].decode("utf-8", "replace")
                        self.notes.append(f"{self.label}: a journal entry of more than {MAX_ENTRY} bytes was "
                                          "skipped (over the line limit); reading went on after it")
                        self.bytes += len(buf) - whole
                        spent += len(buf) - whole
                        buf.clear()
                        whole = 0
                        skipping = True
                        continue
                    # a pipe gives 64 KiB at a time: gather about PIPE_CHUNK before matching
                    if (len(buf) < PIPE_CHUNK and spent + len(buf) < budget
                            and select.select([fd], [], [], 0)[0]):
                        continue
                if whole:
                    spent += whole
                    yield from self._entries(buf, whole, total)
                    del buf[:whole]
                    whole = 0
                if eof:
                    break
        finally:
            if stopped or proc.poll() is None:
                proc.kill()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            proc.stdout.close()
            errf.seek(0)
            err = errf.read(4096).decode("utf-8", "replace").strip().splitlines()
            errf.close()
        return proc.returncode, (err[-1] if err else ""), stopped

    def _entries(self, buf: bytearray, whole: int, total: int) -> Iterator[Chunk]:
        """The whole entries at the start of ``buf`` as one chunk; the cursor of the last one kept."""
        if not whole:
            return
        body = bytes(buf[:whole])
        c = last_cursor(body)
        n = body.count(b"\n")
        yield Chunk(data=body, first_line=total + self.lines + 1, journal=True)
        if c:
            self._cursor = c
        self.lines += n
        self.bytes += whole


_CURSOR_TIME = re.compile(r"(?:^|;)t=([0-9a-fA-F]+)")


def cursor_time(cursor: str) -> str | None:
    """`--since` value for the realtime a journal cursor names (its `t=` field, hex microseconds)."""
    m = _CURSOR_TIME.search(cursor)
    if not m:
        return None
    return f"@{int(m[1], 16) // 1_000_000}"


# -- /dev/kmsg and dmesg ---------------------------------------------------------------------------


def parse_kmsg(record: bytes) -> tuple[int, int, bytes] | None:
    """One /dev/kmsg record -> (seq, usec, message); None when it is not one."""
    head, sep, rest = record.partition(b";")
    if not sep:
        return None
    fields = head.split(b",")
    if len(fields) < 3:
        return None
    try:
        seq, usec = int(fields[1]), int(fields[2])
    except ValueError:
        return None
    message = rest.split(b"\n", 1)[0]  # continuation lines (" KEY=value") are dictionary data
    return seq, usec, message


def kmsg_records(buf: bytes) -> tuple[list[bytes], bytes]:
    """Split bytes read from /dev/kmsg into records (a record's continuation lines start with a space)."""
    out: list[bytes] = []
    lines = buf.split(b"\n")
    rest = lines.pop()  # after the last LF (empty when buf ends in LF)
    for line in lines:
        if line.startswith(b" ") and out:
            out[-1] += b"\n" + line
        else:
            out.append(line)
    return out, rest


class KmsgReader(Reader):
    def __init__(self, path: str | None = None):
        super().__init__(key="kernel", label="kernel", via="/dev/kmsg")
        self.path = path or os.environ.get(KMSG_ENV) or KMSG_PATH

    def read(self, prev: SourceState | None, budget: int, deadline: float, boot_id: str) -> Iterator[Chunk]:
        same = prev is not None and prev.kind == "kmsg" and prev.boot_id == boot_id and prev.kmsg_seq is not None
        last = prev.kmsg_seq if same and prev is not None else -1
        total = prev.lines_total if prev is not None else 0
        total_bytes = prev.bytes_total if prev is not None else 0
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            self.error = f"{self.path}: {exc.strerror}"
            self.state = prev
            return
        out: list[bytes] = []
        size = 0
        spent = 0
        pending = b""
        try:
            while True:
                if spent >= budget or time.monotonic() > deadline:
                    self.more = True
                    break
                try:
                    data = os.read(fd, 1 << 16)
                except BlockingIOError:
                    break
                except OSError as exc:
                    if exc.errno == errno.EPIPE:
                        self.notes.append("kernel ring buffer wrapped while reading: some records were overwritten")
                        continue
                    self.error = f"{self.path}: read failed: {exc.strerror}"
                    break
                if not data:
                    break
                spent += len(data)
                records, pending = kmsg_records(pending + data)
                for rec in records:
                    parsed = parse_kmsg(rec)
                    if parsed is None:
                        continue
                    seq, usec, message = parsed
                    if seq <= last:
                        continue
                    if last >= 0 and seq > last + 1 and not out and self.lines == 0:
                        self.notes.append(f"kernel log: {seq - last - 1} record(s) were overwritten before this check")
                    last = seq
                    line = b"[%5d.%06d] %s\n" % (usec // 1_000_000, usec % 1_000_000, message)
                    out.append(line)
                    size += len(line)
                if size >= READ_CHUNK:
                    yield from self._flush(out, total)
                    out, size = [], 0
            yield from self._flush(out, total)
        finally:
            os.close(fd)
        self.state = SourceState(kind="kmsg", kmsg_seq=last if last >= 0 else None, boot_id=boot_id,
                                 lines_total=total + self.lines, bytes_total=total_bytes + self.bytes)

    def _flush(self, out: list[bytes], total: int) -> Iterator[Chunk]:
        if not out:
            return
        body = b"".join(out)
        yield Chunk(data=body, first_line=total + self.lines + 1)
        self.lines += len(out)
        self.bytes += len(body)


_DMESG_TS = re.compile(rb"^\[\s*(\d+\.\d+)\]")


class DmesgReader(Reader):
    def __init__(self) -> None:
        super().__init__(key="kernel", label="kernel", via="dmesg")

    def read(self, prev: SourceState | None, budget: int, deadline: float, boot_id: str) -> Iterator[Chunk]:
        same = prev is not None and prev.kind == "dmesg" and prev.boot_id == boot_id and prev.dmesg_ts is not None
        last = prev.dmesg_ts if same and prev is not None else -1.0
        total = prev.lines_total if prev is not None else 0
        total_bytes = prev.bytes_total if prev is not None else 0
        try:
            cp = subprocess.run(["dmesg"], capture_output=True, timeout=max(0.5, deadline - time.monotonic()),
                                stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as exc:
            self.error = f"cannot run dmesg: {exc}"
            self.state = prev
            return
        if cp.returncode != 0:
            tail = cp.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
            self.error = f"dmesg failed (status {cp.returncode}): {tail[0][:300]}"
            self.state = prev
            return
        keep: list[bytes] = []
        ts = last
        for line in cp.stdout.split(b"\n"):
            m = _DMESG_TS.match(line)
            if m:
                ts = float(m[1])
            if ts > last and line:
                keep.append(line + b"\n")
        body = b"".join(keep)[:budget]
        body = body[: body.rfind(b"\n") + 1]
        if body:
            yield Chunk(data=body, first_line=total + 1)
            self.lines = body.count(b"\n")
            self.bytes = len(body)
            lastline = body.rstrip(b"\n").rsplit(b"\n", 1)[-1]
            m = _DMESG_TS.match(lastline)
            ts = float(m[1]) if m else ts
        self.state = SourceState(kind="dmesg", dmesg_ts=ts if ts >= 0 else None, boot_id=boot_id,
                                 lines_total=total + self.lines, bytes_total=total_bytes + self.bytes)


def kernel_reader() -> Reader:
    """The best kernel log this machine offers: the journal, else /dev/kmsg, else dmesg.

    ``QWEN_TRIAGE_JOURNALCTL`` (a journalctl to run) and then ``QWEN_TRIAGE_KMSG`` (a file in
    /dev/kmsg's format) choose one outright: containers, and tests, which never read the host's log.
    """
    if os.environ.get(JOURNALCTL_ENV):
        return JournalReader(None)
    if os.environ.get(KMSG_ENV):
        return KmsgReader()
    if journalctl_path() and journal_present():
        return JournalReader(None)
    if os.access(KMSG_PATH, os.R_OK):
        return KmsgReader()
    return DmesgReader()
