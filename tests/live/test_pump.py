"""The pass-through process: bytes exact on every path, blocks between chunks, failures given up one by one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import tty

import pytest

from qwen_triage.live import pump
from qwen_triage.live.pump import Pump, PumpLink, record, take_records
from tests.timelimits import wait_until

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the pump's kernel path is Linux's")


class Rig:
    """A Pump on a thread, between test pipes: feed the child's side, read sink, log and records."""

    def __init__(self, tmp_path, *, kernel: bool = True, sink_fd: int | None = None, log_path: str | None = None):
        self.out_r, self.out_w = os.pipe()
        self.err_r, self.err_w = os.pipe()
        self.rec_r, self.rec_w = os.pipe()
        self.ctl_r, self.ctl_w = os.pipe()
        if sink_fd is None:
            self.sink_r, sink_fd = os.pipe()
        else:
            self.sink_r = -1
        self.sink_w = sink_fd
        path = log_path or str(tmp_path / "child.log")
        self.log = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self.pump = Pump({1: self.out_r, 2: self.err_r}, {1: sink_fd, 2: -1}, self.log, self.rec_w, self.ctl_r)
        if not kernel:
            self.pump.tee = None
        self.result: list[int] = []
        self.thread = threading.Thread(target=lambda: self.result.append(self.pump.run()), daemon=True)
        self.sunk = bytearray()
        self.records: list[tuple[int, int, bytes, float]] = []
        self._readers = [threading.Thread(target=self._read_records, daemon=True)]
        if self.sink_r >= 0:
            self._readers.append(threading.Thread(target=self._read_sink, daemon=True))

    def __enter__(self) -> "Rig":
        self.thread.start()
        for t in self._readers:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in (self.out_w, self.err_w, self.ctl_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def _read_records(self) -> None:
        buf = bytearray()
        while data := os.read(self.rec_r, 1 << 16):
            buf += data
            self.records += take_records(buf)

    def _read_sink(self) -> None:
        while data := os.read(self.sink_r, 1 << 16):
            self.sunk += data

    def finish(self, timeout: float = 20) -> None:
        os.close(self.out_w)
        os.close(self.err_w)
        os.close(self.ctl_w)
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the pump did not end when both pipes closed"
        for fd in (self.rec_w, self.sink_w):
            os.close(fd)
        for t in self._readers:
            t.join(timeout)

    def streams(self) -> dict[int, bytes]:
        """Each stream as the wrapper rebuilds it from the records: logged runs read back, inline chunks."""
        got: dict[int, bytearray] = {1: bytearray(), 2: bytearray()}
        at = 0
        for kind, stream, payload, _ in self.records:
            if kind == pump.LOGGED:
                n = int.from_bytes(payload, "little")
                got[stream] += os.pread(self.log, n, at)
                at += n
            elif kind == pump.DATA:
                got[stream] += payload
        return {k: bytes(v) for k, v in got.items()}

    def kinds(self) -> list[int]:
        return [r[0] for r in self.records]

    def wait_sunk(self, n: int, timeout: float = 10) -> None:
        """Until ``n`` bytes reached the sink, or the pump ended (nothing more will come)."""
        wait_until(lambda: len(self.sunk) >= n, timeout, alive=self.thread.is_alive, step=0.01)


def mixed_chunks() -> list[tuple[int, bytes]]:
    """Lines, a partial line, CR progress, NUL, invalid UTF-8, ANSI, and a chunk larger than any pipe."""
    big = b"".join(b"line %06d of a long burst\n" % i for i in range(120_000))  # about 3 MB
    return [
        (1, b"INFO 12-01 starting\n"),
        (2, b"WARNING partial "),
        (1, b"\x1b[32mok\x1b[0m\r50%\r100%\n"),
        (2, b"line\n\x00\xff\xfe not utf-8\n"),
        (1, big),
        (2, b"Traceback (most recent call last):\n  File \"x.py\", line 1\n"),
        (1, b"no newline at the end"),
    ]


@pytest.mark.parametrize("kernel", [True, False], ids=["tee-splice", "read-write"])
def test_every_path_passes_each_stream_byte_for_byte(tmp_path, kernel: bool) -> None:
    with Rig(tmp_path, kernel=kernel) as rig:
        for stream, data in mixed_chunks():
            pump.write_all(rig.out_w if stream == 1 else rig.err_w, data)
        rig.finish()
    out = b"".join(d for s, d in mixed_chunks() if s == 1)
    err = b"".join(d for s, d in mixed_chunks() if s == 2)
    assert bytes(rig.sunk) == out  # stderr had no sink: not forwarded
    log = open(tmp_path / "child.log", "rb").read()
    assert len(log) == len(out) + len(err)  # how the two streams interleave in it depends on timing
    assert rig.streams() == {1: out, 2: err}  # the wrapper gets each stream whole, in order, from log or record
    kinds = rig.kinds()
    assert kinds[-2:] == [pump.EOF, pump.FINAL]
    assert pump.DATA not in kinds  # with a working log nothing travels twice
    assert rig.records[-1][2] == b"d\n"  # last bytes of stdout and stderr: "…at the end", "…line 1\n"


@pytest.mark.parametrize("path", ["tee-splice", "log-only", "read-write"])
def test_a_move_says_how_many_bytes_it_passed_on_and_0_at_the_end(tmp_path, path: str) -> None:
    """The loop sleeps to gather a chatty child's lines only after a small move (a large one means the pipe
    gathers them already): so every path reports what it moved."""
    rig = Rig(tmp_path, kernel=path != "read-write", sink_fd=-1 if path == "log-only" else None)
    block = b"x" * 40_000 + b"\n"  # within the sink pipe: nobody reads it until the end
    pump.write_all(rig.out_w, block)
    assert rig.pump.move(rig.out_r, 1, 0.0) == len(block)
    pump.write_all(rig.out_w, b"one line\n")
    assert rig.pump.move(rig.out_r, 1, 0.0) == len(b"one line\n")
    os.close(rig.out_w)
    assert rig.pump.move(rig.out_r, 1, 0.0) == 0
    if rig.sink_r >= 0:
        assert os.read(rig.sink_r, 1 << 20) == block + b"one line\n"
    assert open(tmp_path / "child.log", "rb").read() == block + b"one line\n"
    for fd in (rig.out_r, rig.err_r, rig.err_w, rig.rec_r, rig.rec_w, rig.ctl_r, rig.ctl_w, rig.log,
               rig.sink_r, rig.sink_w, rig.pump.spare_r, rig.pump.spare_w):
        if fd >= 0:
            os.close(fd)


def test_a_block_goes_between_two_chunks_on_a_fresh_line(tmp_path) -> None:
    with Rig(tmp_path) as rig:
        pump.write_all(rig.out_w, b"loading 50%")
        rig.wait_sunk(11)
        pump.write_all(rig.ctl_w, record(pump.BLOCK, 1, b"qwen-triage: a note\n"))
        rig.wait_sunk(11 + 21)
        pump.write_all(rig.out_w, b" 60%\n")
        rig.wait_sunk(11 + 21 + 5)
        pump.write_all(rig.ctl_w, record(pump.BLOCK, 1, b"qwen-triage: another\n"))
        rig.finish()
    assert bytes(rig.sunk) == b"loading 50%\nqwen-triage: a note\n 60%\nqwen-triage: another\n"
    assert open(tmp_path / "child.log", "rb").read() == b"loading 50% 60%\n"  # our notes are not the child's


def test_a_pause_after_output_is_told_once_after_that_outputs_records(tmp_path) -> None:
    """The wrapper reads a burst back when the pump says the child paused, not on a timer of its own: each burst is
    followed by exactly one PAUSED record, stamped with the burst's last chunk, and silence owes none."""
    with Rig(tmp_path) as rig:
        for n, line in enumerate((b"INFO first burst\n", b"ERROR second burst\n"), start=1):
            pump.write_all(rig.out_w, line)
            assert wait_until(lambda n=n: rig.kinds().count(pump.PAUSED) == n, 10, alive=rig.thread.is_alive,
                              step=0.005)
        rig.finish()
    kinds = rig.kinds()
    assert kinds == [pump.LOGGED, pump.PAUSED, pump.LOGGED, pump.PAUSED, pump.EOF, pump.FINAL]
    for i in (0, 2):  # the pause's time is its burst's last chunk's
        assert rig.records[i + 1][3] == rig.records[i][3] > 0
    assert rig.streams()[1] == b"INFO first burst\nERROR second burst\n"


def test_a_sink_that_fails_is_given_up_and_the_log_keeps_everything(tmp_path) -> None:
    rig = Rig(tmp_path)
    os.close(rig.sink_r)  # the terminal went away: EPIPE
    rig.sink_r = -1
    rig._readers = rig._readers[:1]
    with rig:
        for stream, data in mixed_chunks():
            pump.write_all(rig.out_w if stream == 1 else rig.err_w, data)
        rig.finish()
    errors = [r for r in rig.records if r[0] == pump.SINK_ERROR]
    assert len(errors) == 1 and errors[0][1] == 1
    assert errors[0][2].startswith(b"32:")  # EPIPE
    out = b"".join(d for s, d in mixed_chunks() if s == 1)
    err = b"".join(d for s, d in mixed_chunks() if s == 2)
    assert rig.streams() == {1: out, 2: err}


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full to make the log fail")
def test_a_log_that_fails_hands_the_chunks_over_in_the_records(tmp_path) -> None:
    with Rig(tmp_path, log_path="/dev/full") as rig:
        for stream, data in mixed_chunks():
            pump.write_all(rig.out_w if stream == 1 else rig.err_w, data)
        rig.finish()
    out = b"".join(d for s, d in mixed_chunks() if s == 1)
    err = b"".join(d for s, d in mixed_chunks() if s == 2)
    assert bytes(rig.sunk) == out
    assert [r[0] for r in rig.records].count(pump.LOG_ERROR) == 1
    assert pump.LOGGED not in rig.kinds()
    assert rig.streams() == {1: out, 2: err}


def test_a_terminal_sink_gets_the_bytes_unchanged(tmp_path) -> None:
    master, slave = os.openpty()
    tty.setraw(slave)  # no CR added to LF: the bytes as the child wrote them
    got = bytearray()

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 1 << 16)
            except OSError:
                return
            if not data:
                return
            got.extend(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    with Rig(tmp_path, sink_fd=slave) as rig:
        data = b"".join(b"tty line %05d\n" % i for i in range(20_000))
        pump.write_all(rig.out_w, data)
        wait_until(lambda: len(got) >= len(data), 10, alive=lambda: rig.thread.is_alive() and reader.is_alive())
        os.close(rig.out_w)
        os.close(rig.err_w)
        os.close(rig.ctl_w)
        rig.thread.join(10)
    os.close(master)
    assert bytes(got) == data
    assert rig.streams()[1] == data


def test_the_pump_process_ignores_ctrl_c_and_ends_with_the_pipes(tmp_path) -> None:
    out_r, out_w = os.pipe()
    sink_r, sink_w = os.pipe()
    log = os.open(tmp_path / "l.log", os.O_RDWR | os.O_CREAT, 0o600)
    link = PumpLink({1: out_r, 2: -1}, {1: sink_w, 2: -1}, log)
    for fd in (out_r, sink_w, log):
        os.close(fd)
    try:
        time.sleep(0.3)  # let it start and set its signal dispositions
        os.kill(link.proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
        pump.write_all(out_w, b"shutting down cleanly\n")
        assert os.read(sink_r, 100) == b"shutting down cleanly\n"
        assert link.proc.poll() is None
        os.close(out_w)
        kinds: list[int] = []

        def eof() -> bool:
            kinds.extend(r[0] for r in link.receive(0.2) or [])
            return pump.EOF in kinds

        assert wait_until(eof, 10, alive=lambda: link.proc.poll() is None, step=0), kinds
        link.end_control()
        assert link.proc.wait(10) == 0
    finally:
        link.close()
        os.close(sink_r)


def test_a_pump_that_dies_is_started_again_and_output_keeps_flowing(tmp_path) -> None:
    from qwen_triage.live.supervisor import Supervisor

    script = "import time\nfor i in range(40):\n    print(f'step {i}', flush=True)\n    time.sleep(0.05)\n"
    out_r, out_w = os.pipe()
    from qwen_triage.live.live_report import Sink

    notes: list[str] = []
    sup = Supervisor([sys.executable, "-c", script], log=tmp_path / "r.log", stdout=Sink(out_w), on_note=notes.append)
    sup.start()
    got = bytearray()

    def drain() -> None:  # as a terminal would: all along
        while data := os.read(out_r, 1 << 16):
            got.extend(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    wait_until(lambda: b"step 3\n" in got, 10, alive=reader.is_alive, step=0.01)
    link = sup._link
    assert link is not None
    os.kill(link.proc.pid, signal.SIGKILL)
    assert sup.wait(30) == 0
    os.close(out_w)
    reader.join(10)
    assert b"step 39\n" in got  # the child was never blocked: a new pump took over its pipes
    assert b"step 39\n" in (tmp_path / "r.log").read_bytes()
    assert any("pass-through process died" in n for n in notes)


def test_a_run_without_a_log_still_hands_every_byte_to_triage(tmp_path) -> None:
    from qwen_triage.live.supervisor import Supervisor

    script = "import sys\nfor i in range(30000):\n    print('x' * (i % 50), i)\nsys.stderr.write('bye\\n')\n"
    seen: dict[int, bytearray] = {1: bytearray(), 2: bytearray()}
    sup = Supervisor([sys.executable, "-c", script], on_output=lambda s, d: seen[s].extend(d))
    sup.start()
    assert sup.wait(60) == 0
    direct = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True)
    assert bytes(seen[1]) == direct.stdout and bytes(seen[2]) == direct.stderr


CLOSED_STDIN_DRIVER = r"""
import os, sys
from qwen_triage.live.supervisor import Supervisor
sup = Supervisor([sys.executable, "-c", "print('\\n'.join(f'line {i}' for i in range(5000)))"], log=sys.argv[1],
                 on_output=lambda s, d: None)
sup.start()
print(sup.wait(30), sorted(sup._pipes.values()) if sup._pipes else "closed")
"""


def test_a_wrapper_started_without_stdin_still_passes_everything(tmp_path) -> None:
    """With fd 0 closed, the child's pipe can be fd 0 here: the pump must still read that pipe, not /dev/null."""
    log = tmp_path / "c.log"
    proc = subprocess.run(
        ["sh", "-c", 'exec "$0" -c "$1" "$2" <&-', sys.executable, CLOSED_STDIN_DRIVER, str(log)],
        capture_output=True, timeout=60, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.split()[0] == b"0"
    assert log.read_bytes() == b"".join(b"line %d\n" % i for i in range(5000))
