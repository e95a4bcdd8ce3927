"""`scan --follow`: the polling loop that feeds followed files and streams (stdin, a pipe) into a live session.

Reading a file like `tail -F` (identity, rotation, truncation, a missing file waited for) is
:class:`qwen_triage.inputs.file.FileFollower`'s; this module only schedules it. Files are polled every 0.2 s
rather than watched with inotify (or the `watchdog` package, which is not a dependency): polling needs nothing
beyond the standard library, works the same on NFS, overlay and bind mounts where inotify misses changes, and the
rotation and truncation checks have to be made on each round anyway. An idle round costs one `fstat`, one `stat`
and one `read`; the latency it adds (≤ 0.2 s) is well inside the one second a diagnosis may take. Line numbers
count the lines of the followed path since following began, across rotations, so the engine's line windows stay
meaningful.
"""

from __future__ import annotations

import os
import selectors
import signal
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from qwen_triage.engine.scan import ScanOptions, compiled_for
from qwen_triage.inputs.file import FileFollower, is_gzip
from qwen_triage.inputs.registry import LiveSource, live

if TYPE_CHECKING:
    from qwen_triage.live.session import LiveInput, LiveSession

INTERVAL = 0.2
QUIET_AFTER = 0.5  # seconds without new bytes after which an open multi-line record is complete


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

    def add(self, src: LiveSource) -> "LiveInput":
        """Feed a live source (built by :func:`qwen_triage.inputs.registry.live`) into the session."""
        inp = self.session.add_input(src.name, kind=src.kind)
        if src.follower is not None:
            self.files.append((src.follower, inp))
        else:
            assert src.fd is not None, f"{src.name}: a live source needs a follower or a descriptor"
            self.streams[src.fd] = inp
            self.sel.register(src.fd, selectors.EVENT_READ)
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


def follow_scan(options: ScanOptions, fmt: str, note: Callable[[str], None] = lambda _: None) -> int:
    """`qwen-triage scan --follow`: live diagnoses on stderr, the report on stdout at the end; ``note`` takes
    remarks before the follow starts (rule files the pack does not hold)."""
    from qwen_triage.exits import EXIT_CLEAN, EXIT_ERROR, EXIT_FOUND
    from qwen_triage.live.live_report import LiveReporter, Sink
    from qwen_triage.live.session import LiveSession
    from qwen_triage.report.emit import emit_report

    compiled = compiled_for(options, note)
    paths = list(options.paths) or ["-"]
    for p in paths:
        if p != "-" and Path(p).expanduser().is_dir():
            print(f"qwen-triage: {p}: is a directory", file=sys.stderr)
            return EXIT_ERROR
        if p != "-" and is_gzip(Path(p).expanduser()):
            print(f"qwen-triage: {p}: compressed files do not grow; use `qwen-triage scan {p}`", file=sys.stderr)
            return EXIT_ERROR
    reporter = LiveReporter(Sink(2))
    session = LiveSession(compiled, on_event=reporter.event, max_line=options.max_line)
    loop = FollowLoop(session, note=reporter.note)
    for p in paths:
        if p == "-":
            src = live("stdin", note=reporter.note)
            if src.fd is not None and os.isatty(0):
                reporter.note("reading logs from the terminal (stdin); Ctrl-C ends and prints the summary")
        else:
            src = live("file", str(Path(p).expanduser()), name=p, note=reporter.note)
        loop.add(src)
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
    reporter.note(f"{what}: {session.scanner.lines_matched()} lines read; summary follows", always=True)
    try:
        emit_report(report, fmt)
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    return EXIT_FOUND if report.diagnoses else EXIT_CLEAN

