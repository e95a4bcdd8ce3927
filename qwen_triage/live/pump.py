"""The pass-through: a small process of its own that moves a child's output on.

Why a process: the wrapper's own interpreter is busy matching the same output,
and a pass-through that had to wait for Python's lock (or for a core that
triage is using) slowed a chatty child down. This process only moves the
child's two pipes on, each chunk unchanged, to our stdout/stderr and to the log
(on Linux inside the kernel: ``tee`` and ``splice``), and tells the wrapper over
a *records* pipe where the chunk is; so it costs about what ``cat`` costs,
however far behind triage is. It imports the standard library only and starts
while the child does.

The wrapper talks back on a *control* pipe: a block of its own (a diagnosis, a
stall report) to print on stdout or stderr. The pump writes it between two of
the child's chunks, never inside one, on a fresh line — it is the only writer
of those descriptors while the child runs, so it knows where a line ends.

Wire format, both ways: a 16-byte header ``(kind, stream, length, monotonic
time)`` and ``length`` bytes. CLOCK_MONOTONIC is one clock for every process on
the machine, so times stamped here mean the same in the wrapper.

Records (pump -> wrapper): LOGGED (a 4-byte count: that many more bytes of the
stream are in the log, right after the previous ones), DATA (a chunk the log
could not take, in the record itself), PAUSED (the child has said nothing for
:data:`FLUSH_AFTER_MS`: what came before it is a whole burst; its time is the
last chunk's), SKIPPED (an 8-byte count: the wrapper
was more than :data:`MAX_OUTBOX` bytes of such chunks behind), SINK_ERROR /
LOG_ERROR (``errno`` and message: that descriptor is given up, the rest goes
on), EOF (both pipes closed) and FINAL (the last byte written to stdout and to
stderr, after the last block). Control (wrapper -> pump): BLOCK (text for
``stream``) and STOP (leave now).

Signals: the pump ignores SIGINT, SIGQUIT and SIGHUP. Ctrl-C at a terminal
reaches every process in the foreground group, the pump too, and the child's
shutdown messages must still come through; the wrapper ends the pump itself.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import struct
import sys
import time
from time import monotonic as _now

HEADER = struct.Struct("<BBxxId")  # kind, stream, length, time.monotonic()
DATA, LOGGED, SKIPPED, SINK_ERROR, LOG_ERROR, EOF, FINAL, PAUSED = 1, 2, 3, 4, 5, 6, 7, 8  # pump -> wrapper
BLOCK, STOP = 10, 11  # wrapper -> pump
STDOUT, STDERR = 1, 2
READ_SIZE = 1 << 20  # a chatty child's whole backlog in one read
PIPE_SIZE = 1 << 20  # ask the kernel for 1 MiB pipes: fewer stalls of a chatty child
MAX_OUTBOX = 64 << 20  # bytes the wrapper may lag behind before chunks are skipped for triage
WRITE_SIZE = 1 << 20  # one non-blocking write to the records pipe at most
FLUSH_AT = 256 << 10  # records waiting this long are pushed as soon as the pipe takes them
FLUSH_EVERY = 0.01  # seconds: records go to the wrapper at least this often while the child talks…
# …and once it pauses this long, with a PAUSED record: one wake-up of the wrapper per batch, not per chunk, and the
# wrapper knows a burst has ended without a timer of its own (a timer shorter than FLUSH_EVERY would end every burst)
FLUSH_AFTER_MS = 2
# A child that writes again within this many seconds of the last move finds the pump asleep for as long: its lines
# gather in the pipe and move in one splice, not one wake-up of the pump per write (a logger writes each line).
# Short: a child that writes blocks fills the pipe faster than a longer sleep and a move can empty it
# (bench/bench_run.py: at 1 ms a child of 8 KB writes took 1.2-1.3x its time into `tee`).
COALESCE = 0.0003
# …and only after a small move: a move this large means the pipe already gathers the child's writes by itself
COALESCE_BELOW = 64 << 10


def grow_pipe(fd: int) -> None:
    """Ask for a larger pipe buffer; harmless where the kernel says no."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    except (OSError, AttributeError, ImportError):
        pass


def record(kind: int, stream: int = 0, payload: bytes = b"", when: float = 0.0) -> bytes:
    return HEADER.pack(kind, stream, len(payload), when) + payload


def _reason(exc: OSError) -> bytes:
    """A SINK_ERROR / LOG_ERROR payload: ``errno:message``."""
    return f"{exc.errno}:{exc.strerror or exc}".encode()


def take_records(buf: bytearray) -> list[tuple[int, int, bytes, float]]:
    """The whole records at the head of ``buf`` as (kind, stream, payload, time), removed from it."""
    size = HEADER.size
    got = []
    while len(buf) >= size:
        kind, stream, length, when = HEADER.unpack_from(buf)
        if len(buf) < size + length:
            break
        got.append((kind, stream, bytes(buf[size : size + length]), when))
        del buf[: size + length]
    return got


def same_target(a: int, b: int) -> bool:
    """Two descriptors on one terminal or file: one line state for both."""
    try:
        sa, sb = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino, sa.st_rdev) == (sb.st_dev, sb.st_ino, sb.st_rdev)


def write_all(fd: int, data: bytes | memoryview) -> None:
    """All of ``data``, however many writes the descriptor takes."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Out:
    """One destination of the child's output (stdout or stderr), given up on its first error."""

    def __init__(self, fd: int):
        self.fd = fd
        self.alive = fd >= 0
        self.splices = True  # until the kernel says this descriptor takes no splice (some terminals)
        # The last byte written: the byte itself, or where the log holds it (chunks spliced unseen).
        self.last: bytes | int = b"\n"
        self.twin: "_Out | None" = None  # the other stream, when both are one terminal

    def mark(self, last: bytes | int) -> None:
        self.last = last
        if self.twin is not None:
            self.twin.last = last


def _kernel_tee():
    """libc's tee(2) (Python wraps splice, not tee): ``tee(src, dst, size, flags)``, -1 on error; None without."""
    if not hasattr(os, "splice"):
        return None
    try:
        import ctypes

        tee = ctypes.CDLL(None, use_errno=True).tee
    except (ImportError, OSError, AttributeError):
        return None
    tee.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint]
    tee.restype = ctypes.c_ssize_t
    return tee


class Pump:
    """The loop of the pump process: pipes in, descriptors and records out.

    With a log, each chunk stays in the kernel: ``tee`` copies the pipe's pages to
    a spare pipe, ``splice`` moves them to the sink and the copy to the log, and
    the record says only "n more bytes of stream s are in the log" — the wrapper
    reads them there, at its own pace. Without a log, or where the kernel refuses
    a splice, the chunk is read and written as ``cat`` would, and travels in the
    record itself. Records of one stream are summed until the stream changes,
    :data:`FLUSH_EVERY` passes or the child pauses: one wake-up of the wrapper per
    batch, not per chunk.
    """

    def __init__(self, sources: dict[int, int], sinks: dict[int, int], log: int, records: int, control: int):
        self.sources = {fd: stream for stream, fd in sources.items() if fd >= 0}
        self.outs = {stream: _Out(fd) for stream, fd in sinks.items()}
        a, b = self.outs.get(STDOUT), self.outs.get(STDERR)
        if a is not None and b is not None and a.alive and b.alive and same_target(a.fd, b.fd):
            a.twin, b.twin = b, a
        self.log = log
        self.records = records
        self.control = control
        self.outbox = bytearray()
        self.skipped = 0
        self.inbox = bytearray()
        self.run_stream, self.run_bytes, self.run_when = 0, 0, 0.0  # logged bytes not yet recorded
        for fd in self.sources:
            grow_pipe(fd)
        os.set_blocking(records, False)
        self.tee = _kernel_tee() if log >= 0 else None
        self.spare_r = self.spare_w = -1
        self.at = 0  # the log's size: where the next chunk goes
        if self.tee is not None:
            try:
                self.at = os.lseek(log, 0, os.SEEK_CUR)
                self.spare_r, self.spare_w = os.pipe()
                grow_pipe(self.spare_w)
            except OSError:
                self.tee = None

    # -- the child's output ---------------------------------------------------

    def move(self, fd: int, stream: int, when: float) -> int:
        """Pass on what the pipe holds: how many bytes, 0 at its end."""
        out = self.outs.get(stream)
        if self.tee is not None:
            if out is None or not out.alive:
                try:
                    n = os.splice(fd, self.log, READ_SIZE)  # nobody to show it to: straight to the log
                except OSError:
                    n = -1
                if n > 0:
                    self.at += n
                    self._logged(stream, n, when)
                    return n
            elif out.splices:
                n = self.tee(fd, self.spare_w, READ_SIZE, 0)
                if n > 0:
                    try:
                        moved = os.splice(fd, out.fd, n)
                    except OSError as exc:
                        self._rest_to_sink(fd, stream, out, n, 0, exc)
                    else:
                        if moved != n:
                            self._rest_to_sink(fd, stream, out, n, moved, None)
                    try:
                        done = os.splice(self.spare_r, self.log, n)
                    except OSError as exc:
                        self._rest_to_log(stream, n, 0, exc, when)
                        return n
                    if done != n:
                        self._rest_to_log(stream, n, done, None, when)
                        return n
                    self.at += n
                    out.mark(self.at)
                    self._logged(stream, n, when)
                    return n
            else:
                n = -1  # a sink that takes no splice: read and write this stream
            if n == 0:
                return 0
            if out is None or out.splices:
                self.tee = None  # a kernel or log that takes no tee or splice: read and write from now on
        data = _read(fd)
        if data:
            self.chunk(stream, data, when)
        return len(data)

    def _rest_to_sink(self, fd: int, stream: int, out: _Out, n: int, moved: int, error: OSError | None) -> None:
        """The sink took part of the ``n`` teed bytes (it was full) or failed: the rest, or give it up."""
        while moved < n and error is None:
            try:
                moved += os.splice(fd, out.fd, n - moved)
            except OSError as exc:
                error = exc
        if moved >= n or error is None:
            return
        rest = _read_exactly(fd, n - moved)  # the bytes the sink did not take are still in the pipe
        if error.errno == errno.EINVAL and out.splices:
            out.splices = False  # a descriptor that takes no splice (some terminals): written from now on
            try:
                write_all(out.fd, rest)
                out.mark(rest[-1:] or out.last)
                return
            except OSError as exc:
                error = exc
        out.alive = False
        self._tell(SINK_ERROR, stream, _reason(error))

    def _rest_to_log(self, stream: int, n: int, done: int, error: OSError | None, when: float) -> None:
        """The log took part of the teed copy or failed: the rest, or hand it over in a record and log no more."""
        while done < n and error is None:
            try:
                done += os.splice(self.spare_r, self.log, n - done)
            except OSError as exc:
                error = exc
        self.at += done
        self._logged(stream, done, when)
        if done >= n or error is None:
            return
        self.log, self.tee = -1, None
        self._tell(LOG_ERROR, stream, _reason(error))
        self._inline(stream, _read_exactly(self.spare_r, n - done), when)

    def chunk(self, stream: int, data: bytes, when: float) -> None:
        """A chunk read into memory: to the sink, the log and the wrapper."""
        out = self.outs.get(stream)
        if out is not None and out.alive:
            self._write_out(stream, out, data)
        if self.log >= 0:
            try:
                write_all(self.log, data)
            except OSError as exc:
                self.log, self.tee = -1, None
                self._tell(LOG_ERROR, stream, _reason(exc))
            else:
                self.at += len(data)
                self._logged(stream, len(data), when)
                return
        self._inline(stream, data, when)

    def _logged(self, stream: int, n: int, when: float) -> None:
        """``n`` more bytes of ``stream`` are in the log: one record per run of a stream."""
        if stream != self.run_stream and self.run_bytes:
            self._end_run()
        self.run_stream, self.run_when = stream, when
        self.run_bytes += n

    def _end_run(self) -> None:
        if self.run_bytes and self.records >= 0:
            self.outbox += record(LOGGED, self.run_stream, self.run_bytes.to_bytes(4, "little"), self.run_when)
        self.run_bytes = 0

    def _inline(self, stream: int, data: bytes, when: float) -> None:
        """A chunk the log does not have: in the record itself, unless the wrapper is too far behind."""
        if self.records < 0 or not data:
            return  # the wrapper is gone: nobody to hand chunks to
        self._end_run()
        if len(self.outbox) + len(data) > MAX_OUTBOX:
            self.skipped += len(data)
            return
        if self.skipped:
            self._tell(SKIPPED, 0, struct.pack("<Q", self.skipped))
            self.skipped = 0
        self.outbox += HEADER.pack(DATA, stream, len(data), when)
        self.outbox += data

    def _tell(self, kind: int, stream: int, payload: bytes) -> None:
        self._end_run()
        self.outbox += record(kind, stream, payload)

    def flush(self) -> bool:
        """Send what the records pipe takes now; False once the wrapper is gone."""
        self._end_run()
        while self.outbox:
            try:
                n = os.write(self.records, memoryview(self.outbox)[:WRITE_SIZE])
            except BlockingIOError:
                return True
            except OSError:
                self.outbox.clear()
                return False
            del self.outbox[:n]
        return True

    # -- the wrapper's own blocks ---------------------------------------------

    def _last_byte(self, out: _Out) -> bytes:
        if isinstance(out.last, bytes):
            return out.last
        try:
            return os.pread(self.log, 1, out.last - 1) or b"\n"  # a spliced chunk's end: the log has it
        except OSError:
            return b"\n"

    def block(self, stream: int, text: bytes) -> None:
        out = self.outs.get(stream)
        if out is None or not out.alive or not text:
            return
        if self._last_byte(out) != b"\n":
            text = b"\n" + text
        self._write_out(stream, out, text)

    def _write_out(self, stream: int, out: _Out, data: bytes) -> None:
        """Bytes to stdout or stderr; on the first error that descriptor is given up, and the wrapper told."""
        try:
            write_all(out.fd, data)
            out.mark(data[-1:])
        except OSError as exc:
            out.alive = False
            self._tell(SINK_ERROR, stream, _reason(exc))

    def commands(self, data: bytes) -> bool:
        """Act on control bytes; False on STOP."""
        self.inbox += data
        for kind, stream, payload, _ in take_records(self.inbox):
            if kind == STOP:
                return False
            if kind == BLOCK:
                self.block(stream, payload)
        return True

    # -- the loop -------------------------------------------------------------

    def run(self) -> int:
        poller = select.poll()
        for fd in self.sources:
            poller.register(fd, select.POLLIN)
        poller.register(self.control, select.POLLIN)
        sources = self.sources
        control_open = True
        want_out = False
        flushed = moved = paused = _now()  # paused: the last chunk a PAUSED record was sent after
        last = 0  # bytes of the last move
        while sources:
            owed = moved > paused  # the child said something since: a PAUSED record is owed once it stops
            pending = (self.run_bytes or self.outbox or owed) and self.records >= 0
            if (len(self.outbox) >= FLUSH_AT and self.records >= 0) != want_out:
                want_out = not want_out
                if want_out:
                    poller.register(self.records, select.POLLOUT)
                else:
                    poller.unregister(self.records)
            events = poller.poll(FLUSH_AFTER_MS if pending else None)
            now = _now()
            if pending and not events:  # the child paused: hand over what it said, a whole burst
                if owed:
                    self._end_run()
                    self.outbox += HEADER.pack(PAUSED, 0, 0, moved)
                    paused = moved
                flushed = now
                self.flush()
            elif pending and now - flushed >= FLUSH_EVERY:  # it has talked for a while: what it said so far
                flushed = now
                self.flush()
            if now - moved < COALESCE and last < COALESCE_BELOW and any(fd in sources for fd, _ in events):
                time.sleep(COALESCE)  # a chatty child: let its next lines join these
                now = _now()
            for fd, _ in events:
                stream = sources.get(fd)
                if stream is not None:
                    last = self.move(fd, stream, now)
                    if last:
                        moved = now
                    else:  # end of file is not the child saying something: it owes no PAUSED record
                        poller.unregister(fd)
                        del sources[fd]
                elif fd == self.records:
                    if not self.flush():
                        poller.unregister(fd)
                        self.records = -1
                        want_out = False
                elif fd == self.control:
                    data = _read(fd)
                    if not data:
                        poller.unregister(fd)
                        control_open = False
                    elif not self.commands(data):
                        return 0
        # Both pipes are closed: hand over the rest, then print the wrapper's last blocks.
        self._tell(EOF, 0, b"")
        if self.records >= 0:
            os.set_blocking(self.records, True)
            self.flush()
        while control_open:
            data = _read(self.control)
            if not data or not self.commands(data):
                break
        lasts = b"".join(self._last_byte(self.outs[s]) if s in self.outs else b"\n" for s in (STDOUT, STDERR))
        self._tell(FINAL, 0, lasts)
        if self.records >= 0:
            self.flush()
        return 0


class PumpLink:
    """The wrapper's end of a pump process: starts it, reads its records, sends it blocks.

    ``sources`` are the read ends of the child's pipes, ``sinks`` the descriptors
    its output goes to (-1: not forwarded), ``log`` the log (-1: none); all by
    stream. The pump gets its own copies; the caller keeps and closes its own.
    """

    def __init__(self, sources: dict[int, int], sinks: dict[int, int], log: int):
        import subprocess

        records_r, records_w = os.pipe()  # not inherited unless passed
        control_r, control_w = os.pipe()
        grow_pipe(records_w)
        fds = [sources.get(STDOUT, -1), sources.get(STDERR, -1), sinks.get(STDOUT, -1), sinks.get(STDERR, -1),
               log, records_w, control_r]
        # The pump's 0 is /dev/null and its 1 and 2 are ours: any other descriptor that happens to be 0, 1
        # or 2 (a wrapper started with them closed) goes to a copy above them for the start.
        moved = []
        for i, fd in enumerate(fds):
            if 0 <= fd <= 2 and not (i in (2, 3) and fd == i - 1):
                import fcntl

                fds[i] = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
                moved.append(fds[i])
        from qwen_triage.live.procs import helper_command

        try:
            self.proc = subprocess.Popen(
                helper_command("qwen_triage.live.pump", *map(str, fds)),
                stdin=subprocess.DEVNULL,
                pass_fds=sorted({fd for fd in fds if fd > 2}),
            )
        except BaseException:
            for fd in (records_r, records_w, control_r, control_w, *moved):
                os.close(fd)
            raise
        for fd in (records_w, control_r, *moved):
            os.close(fd)
        self.records = records_r
        self.control = control_w
        self._buf = bytearray()

    def receive(self, timeout: float) -> "list[tuple[int, int, bytes, float]] | None":
        """Records that came within ``timeout`` seconds ([] for none); None once the pump is gone."""
        if self.records < 0:
            return None
        ready, _, _ = select.select([self.records], [], [], timeout)
        if not ready:
            return []
        try:
            data = os.read(self.records, READ_SIZE)
        except OSError:
            data = b""
        if not data:
            return None
        self._buf += data
        return take_records(self._buf)

    def send_block(self, stream: int, text: bytes) -> bool:
        """A block for the pump to print between two chunks; False when the pump is not listening."""
        if self.control < 0:
            return False
        try:
            write_all(self.control, record(BLOCK, stream, text))
        except OSError:
            return False
        return True

    def end_control(self) -> None:
        """No more blocks: the pump prints what it has, reports its last bytes and exits."""
        if self.control >= 0:
            os.close(self.control)
            self.control = -1

    def close(self, grace: float = 0.5) -> None:
        """Stop the pump (STOP, then SIGKILL after ``grace``) unless it ended by itself; release everything."""
        if self.control >= 0:
            try:
                os.set_blocking(self.control, False)
                os.write(self.control, record(STOP))
            except OSError:
                pass
        self.end_control()
        try:
            self.proc.wait(grace)
        except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: stuck writing to a paused terminal
            self.proc.kill()
            self.proc.wait()
        if self.records >= 0:
            os.close(self.records)
            self.records = -1


def _read_exactly(fd: int, n: int) -> bytes:
    """``n`` bytes known to be waiting in a pipe."""
    parts = []
    while n > 0:
        part = os.read(fd, n)
        if not part:
            break
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


def _read(fd: int) -> bytes:
    """A chunk, or b"" at the end (EIO from a pipe is an end too)."""
    try:
        return os.read(fd, READ_SIZE)
    except OSError:
        return b""


def main(argv: list[str] | None = None) -> int:
    """``out_src err_src out_sink err_sink log records control``: descriptors, -1 for none."""
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    fds = [int(a) for a in (sys.argv[1:] if argv is None else argv)]
    out_src, err_src, out_sink, err_sink, log, records, control = fds
    pump = Pump({STDOUT: out_src, STDERR: err_src}, {STDOUT: out_sink, STDERR: err_sink}, log, records, control)
    return pump.run()


if __name__ == "__main__":
    sys.exit(main())
