"""The kernel log: ONE module for ``/dev/kmsg``, the journal's kernel entries and ``dmesg``.

Xid errors, NVRM messages, PCIe AER reports and the OOM killer land in the kernel log, not in the server's
output. Two ways of reading it, both here so they agree on where the kernel log comes from:

- incrementally (``check --kernel``): :func:`kernel_reader` picks the best source this machine offers (the
  journal, else ``/dev/kmsg`` with its sequence numbers, else ``dmesg`` with its timestamps);
  ``QWEN_TRIAGE_JOURNALCTL`` (a journal tool to run) and then ``QWEN_TRIAGE_KMSG`` (a file in /dev/kmsg's
  format) choose one outright: containers, and tests, which never read the host's log;
- for a time window (``run``'s failed attempts, ``bugreport --kernel``): :func:`read_window`, the journal's
  entries of the window (exact times; the engine's journal decoder keeps each line's fields), else
  ``dmesg --time-format=iso`` cut to the window by its timestamps.

``journal UNIT --kernel`` merges the kernel into a unit's own journal query instead
(:data:`qwen_triage.inputs.journal.KERNEL_MATCH`). Command lines are plain functions and the runner of
subprocesses is a parameter, so the window reads are testable without a kernel log.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Iterator

from qwen_triage.inputs.base import Chunk, Reader, totals
from qwen_triage.inputs.helptext import JOURNAL_TOOL
from qwen_triage.inputs.journal import (
    JOURNAL_TOOL_ENV,
    JournalReader,
    journal_command,
    journal_present,
    journal_tool_path,
)
from qwen_triage.inputs.position import SourceState

READ_CHUNK = 4 << 20  # bytes of records gathered per chunk handed to the engine
KMSG_ENV = "QWEN_TRIAGE_KMSG"
KMSG_PATH = "/dev/kmsg"
JOURNAL_HOW = f"{JOURNAL_TOOL} -k"  # how a window read from the journal is described
SLACK_S = 2.0  # seconds added on both sides: clocks and the kernel's timestamps are coarse
TIMEOUT_S = 15

Runner = Callable[..., subprocess.CompletedProcess]


@dataclass(frozen=True)
class Window:
    """Wall-clock seconds (Unix time), widened by ``slack`` on both sides."""

    since: float
    until: float
    slack: float = SLACK_S

    @property
    def lo(self) -> int:
        return int(self.since - self.slack)

    @property
    def hi(self) -> int:
        return int(self.until + self.slack)

    def holds(self, t: float) -> bool:
        return self.lo <= t <= self.hi


@dataclass(frozen=True)
class KernelLog:
    """What was read: ``text`` (journal JSON or dmesg lines; None when unreadable) and ``how``, in words."""

    text: bytes | None
    how: str


def journal_window_command(window: Window) -> list[str]:
    """The kernel's journal entries of the window, as JSON (:func:`qwen_triage.inputs.journal.journal_command`)."""
    return journal_command(since=f"@{window.lo}", until=f"@{window.hi}", kernel=True, quiet=True)


def dmesg_command() -> list[str]:
    """``dmesg`` with ISO timestamps (cut to the window by :func:`dmesg_in_window`)."""
    return ["dmesg", "--time-format=iso"]


def dmesg_in_window(output: bytes, window: Window) -> bytes:
    """The lines of ``dmesg --time-format=iso`` output stamped inside the window."""
    keep = []
    for line in output.splitlines():
        stamp = line.split(b" ", 1)[0].decode("ascii", "replace")
        try:
            t = datetime.fromisoformat(stamp.replace(",", ".")).timestamp()
        except (ValueError, OverflowError, OSError):  # a stamp datetime cannot place
            continue
        if window.holds(t):
            keep.append(line)
    return b"\n".join(keep) + (b"\n" if keep else b"")


def read_window(window: Window, run: Runner = subprocess.run) -> KernelLog:
    """The kernel log of the window: the journal's, else dmesg's; ``text`` None and why, when neither is readable."""
    try:
        cp = run(journal_window_command(window), capture_output=True, timeout=TIMEOUT_S)
        if cp.returncode == 0 and cp.stdout.strip():
            return KernelLog(cp.stdout, JOURNAL_HOW)
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        cp = run(dmesg_command(), capture_output=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return KernelLog(None, f"kernel log not readable here (no {JOURNAL_TOOL}, no dmesg)")
    if cp.returncode != 0:
        err = cp.stderr.decode("utf-8", "replace").strip().splitlines()
        return KernelLog(None, f"kernel log not readable here ({err[0] if err else 'dmesg failed'})")
    return KernelLog(dmesg_in_window(cp.stdout, window), "dmesg")


# -- incremental reads: /dev/kmsg and dmesg ---------------------------------------------------------------


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


def _this_boot(prev: SourceState | None, kind: str, boot_id: str) -> SourceState | None:
    """``prev`` when it was read the same way (``kind``) in this boot; None to read from the start: the kernel's
    sequence numbers and uptime stamps start again at every boot."""
    if prev is None or prev.kind != kind or prev.boot_id != boot_id:
        return None
    return prev


class KmsgReader(Reader):
    def __init__(self, path: str | None = None):
        self.path = path or os.environ.get(KMSG_ENV) or KMSG_PATH
        # `via` names the file actually read: a fire drill's QWEN_TRIAGE_KMSG file must never pass for /dev/kmsg
        super().__init__(key="kernel", label="kernel", via=self.path)

    def read(self, prev: SourceState | None, budget: int, deadline: float, boot_id: str = "") -> Iterator[Chunk]:
        here = _this_boot(prev, "kmsg", boot_id)
        last = here.kmsg_seq if here is not None and here.kmsg_seq is not None else -1
        total, total_bytes = totals(prev)
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

    def read(self, prev: SourceState | None, budget: int, deadline: float, boot_id: str = "") -> Iterator[Chunk]:
        here = _this_boot(prev, "dmesg", boot_id)
        last = here.dmesg_ts if here is not None and here.dmesg_ts is not None else -1.0
        total, total_bytes = totals(prev)
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
    if os.environ.get(JOURNAL_TOOL_ENV):
        return JournalReader(None)
    if os.environ.get(KMSG_ENV):
        return KmsgReader()
    if journal_tool_path() and journal_present():
        return JournalReader(None)
    if os.access(KMSG_PATH, os.R_OK):
        return KmsgReader()
    return DmesgReader()  # the last resort: dmesg reads the ring buffer where /dev/kmsg is closed to this user
