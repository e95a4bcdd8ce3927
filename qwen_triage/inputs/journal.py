"""The systemd journal: ONE command builder, cursors, and the incremental :class:`JournalReader`.

Everything that reads the journal runs its command-line tool (:data:`JOURNAL_TOOL`) through a command line built
here by :func:`journal_command`: ``check``'s incremental reads (``--after-cursor`` with the ``__CURSOR`` of the last
entry read), ``journal UNIT`` (a window, or ``--follow``), ``attach`` (one process's entries), the kernel log of a
window (:mod:`qwen_triage.inputs.kernel`) and ``bugreport``. One builder, so every command selects a unit's entries
by the same rule:

- a system unit read alone: ``--unit=U``, the tool's own rule (the unit's output, systemd's messages about it,
  its core dumps and the messages about it, each only from the senders that may write them); the rule the
  unattended ``check`` has always used;
- a unit OR-ed with the kernel (``journal UNIT --kernel``), a user unit, or a process without a unit: explicit
  matches joined with ``+`` (:func:`unit_matches`, with the tool's own guards on the fields a sender sets itself:
  a core dump only from root with systemd-coredump's message id), so the journal itself merges them into one
  timeline;
- the kernel alone: ``--dmesg``.

The JSON read back is decoded by the engine (its decoder for :data:`~qwen_triage.inputs.source.JOURNAL_JSON`), which keeps each
line's program, pid and priority for the rules' ``where:`` constraints.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Generator, Iterator

from qwen_triage.inputs.base import Chunk, Reader, totals
from qwen_triage.inputs.helptext import JOURNAL_TOOL
from qwen_triage.inputs.position import SourceState
from qwen_triage.inputs.source import JOURNAL_JSON, JOURNAL_MAX_LINE

JOURNAL_TOOL_ENV = "QWEN_TRIAGE_JOURNALCTL"  # a journalctl to run instead (tests, containers with a host journal)
JOURNAL_DIRS = ("/run/log/journal", "/var/log/journal")
KERNEL_MATCH = "_TRANSPORT=kernel"  # the kernel's entries (what --dmesg selects), OR-ed into a unit's with "+"
UNIT_SUFFIXES = (".service", ".socket", ".scope", ".slice", ".mount", ".target", ".timer", ".path", ".swap", ".device")
READ_CHUNK = 4 << 20  # bytes read from the pipe per step at most
PIPE_CHUNK = 1 << 20  # bytes gathered from the pipe per chunk
HEAD = 4096  # bytes of an overlong entry searched for its cursor
MAX_ENTRY = JOURNAL_MAX_LINE  # an entry longer than the engine decodes is skipped, with a note
NOT_INSTALLED = f"{JOURNAL_TOOL} is not installed"


class JournalError(Exception):
    pass


def unit_name(unit: str) -> str:
    """`ollama` -> `ollama.service`; names with a unit suffix are kept (explicit matches are not mangled)."""
    unit = unit.strip()
    if not unit:
        raise JournalError("empty unit name")
    if any(c in unit for c in "*?[") or any(c.isspace() for c in unit):
        raise JournalError(f"{unit!r}: give one unit by its full name (no patterns)")
    return unit if unit.endswith(UNIT_SUFFIXES) else unit + ".service"


# systemd-coredump's "Process … dumped core" entries (catalog id SD_MESSAGE_COREDUMP)
COREDUMP_MESSAGE_ID = "fc2e22bc6ee647b6b90729ab34a250b1"


def unit_matches(unit: str, user: bool = False, kernel: bool = False, uid: int | None = None) -> list[str]:
    """Match arguments: the unit's lines OR systemd's about it OR its core dumps [OR the kernel's].

    Each part carries the guard of journalctl's own ``--unit``/``--user-unit`` rule
    (systemd's ``add_matches_for_unit``): a field a sender sets itself (``UNIT=``, ``USER_UNIT=``,
    ``COREDUMP_UNIT=``) counts only with a trusted field beside it — PID 1 for systemd's messages,
    root and the core-dump message id for core dumps, the user's own uid for a user unit —, so no
    other local user can add entries to the view (``logger --journald`` sets any field it likes).
    """
    u = unit_name(unit)
    core = [f"MESSAGE_ID={COREDUMP_MESSAGE_ID}", "_UID=0"]
    if user:
        mine = f"_UID={os.getuid() if uid is None else uid}"
        matches = [f"_SYSTEMD_USER_UNIT={u}", mine, "+", f"USER_UNIT={u}", mine, "+", f"COREDUMP_USER_UNIT={u}",
                   *core]
    else:
        matches = [f"_SYSTEMD_UNIT={u}", "+", f"UNIT={u}", "_PID=1", "+", f"COREDUMP_UNIT={u}", *core]
    if kernel:
        matches += ["+", KERNEL_MATCH]
    return matches


def journal_command(
    unit: str | None = None,
    since: str | None = None,
    *,
    kernel: bool = False,
    follow: bool = False,
    user: bool = False,
    pid: int | None = None,
    cursor: str | None = None,
    until: str | None = None,
    lines: int | str | None = None,
    boot: bool = True,
    quiet: bool = False,
    binary: str = JOURNAL_TOOL,
) -> list[str]:
    """The one command line that reads the journal as JSON.

    Where to start: after ``cursor``, else ``since`` (anything ``--since`` takes: ``2025-01-07 10:00``,
    ``-1h``, ``@1736244000``), else (``boot``) the current boot. What: ``unit`` [OR the kernel], the kernel
    alone, or process ``pid``'s entries. ``follow`` keeps reading (``lines`` of the past first: ``all`` by
    default); ``lines`` alone reads the newest ones.
    """
    cmd = [binary, "--output=json", "--all", "--no-pager"] + (["--quiet"] if quiet else [])
    if cursor:
        cmd.append(f"--after-cursor={cursor}")
    elif since:
        cmd.append(f"--since={since}")
    elif boot:
        cmd.append("--boot")
    if until:
        cmd.append(f"--until={until}")
    if follow:
        cmd += ["--follow", f"--lines={'all' if lines is None else lines}"]
    elif lines is not None:
        cmd.append(f"--lines={lines}")
    if unit is not None and not kernel and not user:
        return cmd + [f"--unit={unit}"]
    if unit is not None:
        return cmd + unit_matches(unit, user=user, kernel=kernel)
    if pid is not None:
        return cmd + [f"_PID={pid}"]
    return cmd + (["--dmesg"] if kernel else [])


def pid_command(pid: int, unit: str | None = None, user: bool = False, since: str | None = None,
                follow: bool = True) -> list[str]:
    """Follow what one process (or its unit) writes to the journal; `attach` uses it."""
    if unit is not None:
        unit = unit_name(unit)
    return journal_command(unit, since, user=user, pid=None if unit else pid, follow=follow,
                           lines=None if since or not follow else 0, boot=False)


def start_journal(cmd: list[str], stderr: Any = subprocess.DEVNULL) -> "subprocess.Popen[bytes]":
    """Start a journal command whose JSON the caller reads from its stdout (a follow: the caller stops it)."""
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL)


def read_unit(unit: str, lines: int, timeout: float, run: Any = subprocess.run) -> tuple[bytes | None, str]:
    """The newest ``lines`` entries of a unit for this boot, as JSON, and how they were read (or why not)."""
    cmd = journal_command(unit_name(unit), lines=lines)
    try:
        cp = run(cmd, capture_output=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{JOURNAL_TOOL} could not be run: {exc}"
    if cp.returncode != 0:
        err = (cp.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        return None, f"{JOURNAL_TOOL} failed: {err[0] if err else cp.returncode}"
    return cp.stdout, f"{JOURNAL_TOOL} for this boot (the newest {lines} lines)"


def journal_tool_path() -> str | None:
    """The tool ``check`` runs: the override (tests, containers with a host journal), else the one on PATH."""
    return os.environ.get(JOURNAL_TOOL_ENV) or shutil.which(JOURNAL_TOOL)


def journal_tool_available() -> bool:
    """Whether the interactive commands (``journal``, ``attach``), which run the tool by its name, can run it."""
    return shutil.which(JOURNAL_TOOL) is not None


JOURNAL_DIRS_ENV = "QWEN_TRIAGE_JOURNAL_DIRS"  # where journald keeps its files, when not the usual places


def journal_dirs() -> tuple[str, ...]:
    """Where journald keeps its files: ``QWEN_TRIAGE_JOURNAL_DIRS`` (os.pathsep-separated: a container with the
    host's journal mounted elsewhere, and tests, which never look at the host's) else the usual two."""
    given = os.environ.get(JOURNAL_DIRS_ENV)
    return tuple(d for d in given.split(os.pathsep) if d) if given else JOURNAL_DIRS


def journal_present() -> bool:
    """Whether journald keeps any file here (a container or ``Storage=none`` keeps none)."""
    if os.environ.get(JOURNAL_TOOL_ENV):
        return True
    for d in journal_dirs():
        try:
            if any(Path(d).iterdir()):
                return True
        except OSError:
            continue
    return False


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
    """A unit's entries (or, ``unit`` None, the kernel's) after the stored cursor; a vanished cursor is resumed
    from the time it names."""

    def __init__(self, unit: str | None):
        if unit is None:
            super().__init__(key="kernel", label="kernel", via="journalctl")
        else:
            name = unit if "." in unit else unit + ".service"
            super().__init__(key=f"journal:{name}", label=f"journal:{name}", via="journalctl")
        self.unit = None if unit is None else self.label.split(":", 1)[1]

    def read(self, prev: SourceState | None, budget: int, deadline: float, boot_id: str = "") -> Iterator[Chunk]:
        cursor = prev.cursor if prev is not None and prev.kind == "journal" else None
        total, total_bytes = totals(prev, "journal")
        binary = journal_tool_path()
        if binary is None:
            self.error = NOT_INSTALLED
            self.state = prev
            return
        since = None
        for attempt in (1, 2):
            cmd = journal_command(self.unit, since, kernel=self.unit is None, cursor=cursor, quiet=True, binary=binary)
            status, err, stopped = yield from self._run(cmd, budget, deadline, total)
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
        elif stopped and self._silent:
            # not one byte and no exit before the deadline: a journal that never answers is no healthy node
            self.error = "journalctl gave no answer before the check's --timeout (the journal is not answering)"
        if self._cursor:
            cursor = self._cursor
        self.state = SourceState(kind="journal", cursor=cursor, lines_total=total + self.lines,
                                 bytes_total=total_bytes + self.bytes)

    _cursor: str | None = None
    _silent = False  # the last run of journalctl was stopped before it printed anything or exited

    def _run(self, cmd: list[str], budget: int, deadline: float, total: int):
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
        received = False  # any byte at all from journalctl
        waited_out = False  # stopped after waiting for it until the deadline (not a deadline gone before it ran)
        try:
            while True:
                left = deadline - time.monotonic()
                if spent >= budget or left <= 0:
                    self.more = stopped = True
                    break
                ready, _, _ = select.select([fd], [], [], left)
                if not ready:
                    self.more = stopped = waited_out = True
                    break
                data = os.read(fd, min(READ_CHUNK, max(budget - spent - len(buf), 1)))
                received = received or bool(data)
                eof = not data
                if data and skipping:
                    rest, dropped = self._rest_of_skipped(data)
                    spent += dropped
                    if rest is None:
                        continue
                    skipping, data = False, rest
                if data:
                    nl = data.rfind(b"\n")
                    if nl >= 0:
                        whole = len(buf) + nl + 1
                    buf += data
                    if len(buf) - whole > MAX_ENTRY:  # an entry over the line limit
                        spent += yield from self._skip_overlong(buf, whole, total)
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
            err = _reap(proc, errf, kill=stopped)
        self._silent = waited_out and not received
        return proc.returncode, err, stopped

    def _rest_of_skipped(self, data: bytes) -> tuple[bytes | None, int]:
        """``data`` after the end of an entry being skipped (None: the entry goes on past it), and the bytes
        dropped."""
        nl = data.find(b"\n")
        dropped = len(data) if nl < 0 else nl + 1
        self.bytes += dropped
        if nl < 0:
            return None, dropped
        self.lines += 1
        return data[nl + 1 :], dropped

    def _skip_overlong(self, buf: bytearray, whole: int, total: int) -> Generator[Chunk, None, int]:
        """One entry longer than any message the engine reads (journald itself splits lines at 48 KiB; this came
        through the native protocol) after the whole entries of ``buf``: those are yielded, it is skipped, its
        cursor kept, reading goes on after it. Returns the bytes skipped."""
        yield from self._entries(buf, whole, total)
        cursor = _CURSOR_RE.search(bytes(buf[whole : whole + HEAD]))
        if cursor:
            self._cursor = cursor[1].decode("utf-8", "replace")
        self.notes.append(f"{self.label}: a journal entry of more than {MAX_ENTRY} bytes was "
                          "skipped (over the line limit); reading went on after it")
        self.bytes += len(buf) - whole
        return len(buf) - whole

    def _entries(self, buf: bytearray, whole: int, total: int) -> Iterator[Chunk]:
        """The whole entries at the start of ``buf`` as one chunk; the cursor of the last one kept."""
        if not whole:
            return
        body = bytes(buf[:whole])
        c = last_cursor(body)
        n = body.count(b"\n")
        yield Chunk(data=body, first_line=total + self.lines + 1, kind=JOURNAL_JSON)
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


def _reap(proc: subprocess.Popen[bytes], errf: IO[bytes], kill: bool) -> str:
    """Stop ``proc`` (when told to, or still running), wait for it a moment, close its output; the last line it
    wrote to ``errf``, its stderr."""
    if kill or proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    assert proc.stdout is not None
    proc.stdout.close()
    errf.seek(0)
    err = errf.read(4096).decode("utf-8", "replace").strip().splitlines()
    errf.close()
    return err[-1] if err else ""
