"""`scan --follow`: files like `tail -F`, and streams (stdin, a pipe) that may never end.

Files are polled every 0.2 s rather than watched with inotify (or the
`watchdog` package, which is not a dependency): polling needs nothing beyond the
standard library, works the same on NFS, overlay and bind mounts where inotify
misses changes, and the rotation and truncation checks (`stat` of the path
against the open file, size against our position) have to be made on each
round anyway. An idle round costs one `fstat`, one `stat` and one `read`; the
latency it adds (≤ 0.2 s) is well inside the one second a diagnosis may take.

Rotation (the path now names another file): the rest of the old file is read,
then the new one from its start. Truncation (the file is shorter than what was
read, `copytruncate`): reading restarts at 0. A missing file is waited for. Line
numbers count the lines of the followed path since following began, across
rotations, so the engine's line windows stay meaningful.
"""

from __future__ import annotations

import os
import selectors
import signal
import stat
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from qwen_triage.engine.sources import MAX_LINE

if TYPE_CHECKING:
    from qwen_triage.live.session import LiveInput, LiveSession
    from qwen_triage.engine.matcher import CompiledPack

INTERVAL = 0.2
QUIET_AFTER = 0.5  # seconds without new bytes after which an open multi-line record is complete
READ_LIMIT = 4 << 20  # per file per round, so one huge file does not starve the others
BREAK = "break"  # marker in a poll result: end the partial line before the bytes that follow


class FileFollower:
    """One path followed across appends, rotation and truncation."""

    def __init__(self, path: str | Path, from_end: bool = False, note: Callable[[str], None] | None = None,
                 by_name: bool = True):
        self.path = str(path)
        self.from_end = from_end
        self.by_name = by_name  # False: the open file only, like `tail -f` (attach: /proc/PID/fd/N)
        self.note = note or (lambda _msg: None)
        self.fd: int | None = None
        self.ident: tuple[int, int] | None = None
        self.pos = 0
        self.more = False  # the last poll stopped at READ_LIMIT: call again soon
        self._missing_noted = False
        self._gone_noted = False
        self.rotations = 0
        self.truncations = 0

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
        self.ident = (st.st_dev, st.st_ino)
        self.pos = os.lseek(fd, 0, os.SEEK_END) if at_end and stat.S_ISREG(st.st_mode) else 0
        return True

    def _read(self, limit: int) -> bytes:
        assert self.fd is not None
        parts: list[bytes] = []
        got = 0
        while got < limit:
            try:
                data = os.pread(self.fd, min(1 << 20, limit - got), self.pos)
            except OSError:
                break
            if not data:
                break
            parts.append(data)
            got += len(data)
            self.pos += len(data)
        self.more = got >= limit
        return b"".join(parts)

    def poll(self) -> list[bytes | str]:
        """New bytes since the last call, with BREAK where the file under the path changed."""
        out: list[bytes | str] = []
        if self.fd is None:
            first = self.ident is None
            if not self._open(at_end=self.from_end and first):
                return out
        assert self.fd is not None
        try:
            size = os.fstat(self.fd).st_size
        except OSError:
            size = self.pos
        if size < self.pos:
            self.truncations += 1
            self.note(f"{self.path}: truncated; reading it again from the start")
            out.append(BREAK)
            self.pos = 0
        data = self._read(READ_LIMIT)
        if data:
            out.append(data)
        if self.more or not self.by_name:
            return out
        try:
            st = os.stat(self.path)
            now = (st.st_dev, st.st_ino)
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
                data = self._read(READ_LIMIT)
                if data:
                    out.append(data)
        return out

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class FollowLoop:
    """Feeds followed files and readable streams into a live session until told to stop."""

    def __init__(self, session: "LiveSession", note: Callable[[str], None] | None = None, interval: float = INTERVAL):
        self.session = session
        self.note = note or (lambda _msg: None)
        self.interval = interval
        self.files: list[tuple[FileFollower, LiveInput]] = []
        self.streams: dict[int, LiveInput] = {}
        self.sel = selectors.DefaultSelector()
        self._last_data = time.monotonic()
        self._released = True

    def add_file(self, path: str, name: str | None = None, from_end: bool = False, kind: str = "auto",
                 by_name: bool = True) -> "LiveInput":
        inp = self.session.add_input(name or path, kind=kind)
        self.files.append((FileFollower(path, from_end=from_end, note=self.note, by_name=by_name), inp))
        return inp

    def add_stream(self, fd: int, name: str, kind: str = "auto") -> "LiveInput":
        inp = self.session.add_input(name, kind=kind)
        self.streams[fd] = inp
        self.sel.register(fd, selectors.EVENT_READ)
        return inp

    def _fed(self) -> None:
        self._last_data = time.monotonic()
        self._released = False

    def poll_files(self) -> bool:
        """One round over the files; True when one has more to read right away."""
        busy = False
        for follower, inp in self.files:
            for item in follower.poll():
                if isinstance(item, str):  # BREAK
                    self.session.break_line(inp)
                else:
                    self.session.feed(inp, item)
                    self._fed()
            busy = busy or follower.more
        return busy

    def _read_streams(self, timeout: float) -> None:
        if not self.streams:
            if timeout:
                time.sleep(timeout)
            return
        for key, _ in self.sel.select(timeout):
            inp = self.streams[key.fd]
            try:
                data = os.read(key.fd, 1 << 16)
            except OSError:
                data = b""
            if data:
                self.session.feed(inp, data)
                self._fed()
            else:
                self.sel.unregister(key.fd)
                del self.streams[key.fd]
                self.session.end_input(inp)

    def run(self, should_stop: Callable[[], bool] = lambda: False, on_tick: Callable[[], None] | None = None) -> str:
        """Until every input has ended ("eof") or ``should_stop`` says so ("stopped")."""
        while True:
            if should_stop():
                return "stopped"
            busy = self.poll_files()
            if not self.files and not self.streams:
                return "eof"
            self._read_streams(0 if busy else self.interval)
            if not self._released and time.monotonic() - self._last_data >= QUIET_AFTER:
                self.session.release_held()  # the inputs paused: open multi-line records are complete
                self._released = True
            if on_tick is not None:
                on_tick()

    def drain(self) -> None:
        """Read what is already there, without waiting."""
        while self.poll_files():
            pass
        for _ in range(1000):
            before = sum(i.source.bytes_read for i in self.streams.values())
            self._read_streams(0)
            if not self.streams or sum(i.source.bytes_read for i in self.streams.values()) == before:
                break

    def close(self) -> None:
        for follower, _ in self.files:
            follower.close()
        self.sel.close()


@contextmanager
def stop_signals() -> Iterator[Callable[[], bool]]:
    """Ctrl-C, SIGTERM and SIGHUP ask the follow loop to stop and print the summary.

    The handlers only set a flag that the loop checks between reads (at least
    every poll interval). Raising KeyboardInterrupt instead can lose the signal
    when it lands inside a C callback (the Hyperscan match handler), which left
    `scan --follow` running after Ctrl-C on a busy machine.
    """
    requested: list[int] = []

    def handler(signum: int, _frame: object) -> None:
        requested.append(signum)

    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            old[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread
            pass
    try:
        yield lambda: bool(requested)
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def _is_gzip(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"\x1f\x8b"
    except OSError:
        return False


def _stdin_is_regular_file() -> bool:
    try:
        return stat.S_ISREG(os.fstat(0).st_mode)
    except OSError:
        return False


def follow_scan(paths: list[str], compiled: "CompiledPack", fmt: str, max_line: int = MAX_LINE) -> int:
    """`qwen-triage scan --follow`: live diagnoses on stderr, the report on stdout at the end."""
    from qwen_triage.exits import EXIT_CLEAN, EXIT_ERROR, EXIT_FOUND
    from qwen_triage.report.emit import emit_report
    from qwen_triage.live.live_report import LiveReporter, Sink
    from qwen_triage.live.session import LiveSession

    for p in paths:
        if p != "-" and Path(p).expanduser().is_dir():
            print(f"qwen-triage: {p}: is a directory", file=sys.stderr)
            return EXIT_ERROR
        if p != "-" and _is_gzip(Path(p).expanduser()):
            print(f"qwen-triage: {p}: compressed files do not grow; use `qwen-triage scan {p}`", file=sys.stderr)
            return EXIT_ERROR
    reporter = LiveReporter(Sink(2))
    session = LiveSession(compiled, on_event=reporter.event, max_line=max_line)
    loop = FollowLoop(session, note=reporter.note)
    for p in paths:
        if p == "-":
            if _stdin_is_regular_file():
                loop.add_file("/dev/stdin", name="<stdin>")
            else:
                if os.isatty(0):
                    reporter.note("reading logs from the terminal (stdin); Ctrl-C ends and prints the summary")
                loop.add_stream(0, "<stdin>")
        else:
            loop.add_file(str(Path(p).expanduser()), name=p)
    files = [p for p in paths if p != "-"]
    if files:
        reporter.note(f"following {', '.join(files)} (rotation and truncation are followed); Ctrl-C for the summary")
    reason = "interrupted"
    with stop_signals() as stop_requested:
        try:
            reason = loop.run(should_stop=stop_requested)
        except KeyboardInterrupt:
            reason = "interrupted"
        try:
            report = session.finish()
        except KeyboardInterrupt:
            report = session.report()
    loop.close()
    what = "input ended" if reason == "eof" else "stopped"
    reporter.note(f"{what}: {session.scanner.matcher.stats.lines} lines read; summary follows", always=True)
    try:
        emit_report(report, fmt)
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    return EXIT_FOUND if report.diagnoses else EXIT_CLEAN

