"""`scan --follow`: real files appended, rotated and truncated; stdin that never ends; flat memory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import tracemalloc

from qwen_triage.inputs.file import BREAK, FileFollower
from tests.live.helpers import BANNER, RULES, Live, qt_argv
from tests.timelimits import scaled

OOM = b"ggml_backend_cuda_buffer_type_alloc_buffer: allocating 8192.00 MiB on device 0: cudaMalloc failed: out of memory\n"
XID = b"Jan 07 10:00:09 gpu-node kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=2290, name=ollama, GPU has fallen off the bus.\n"
TP = b"ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (6).\n"
NOISE = b'time=2025-01-07T10:00:00.123Z level=INFO source=routes.go:1259 msg="Listening on 127.0.0.1:11434"\n'


def append(path, data: bytes) -> float:
    with open(path, "ab") as f:
        f.write(data)
        f.flush()
        return time.time()


def test_follow_a_file_through_appends_rotation_and_truncation(tmp_path) -> None:
    log = tmp_path / "ollama.log"  # does not exist yet: tail -F waits for it
    live = Live(qt_argv("scan", "--follow", "--rules", str(RULES), "--format", "json", str(log)))
    try:
        live.err.wait_for("waiting for it")
        log.write_bytes(NOISE * 3)
        live.err.wait_for("appeared")

        written = append(log, OOM)
        seen = live.err.wait_for(BANNER)
        assert seen - written < scaled(1.0)
        for _ in range(3):  # known diagnosis, more evidence: counted, not printed again
            append(log, NOISE + OOM)

        # logrotate without copytruncate: rename, the writer finishes a line in the old file, new file
        os.rename(log, tmp_path / "ollama.log.1")
        append(tmp_path / "ollama.log.1", NOISE)
        log.write_bytes(NOISE + XID)
        live.err.wait_for("rotated")
        live.err.wait_for("diagnosis 2")

        # copytruncate: the same file cut to zero, then written again
        os.truncate(log, 0)
        live.err.wait_for("truncated")
        append(log, TP)
        live.err.wait_for("diagnosis 3")
        time.sleep(0.3)
        assert live.err.text.count(BANNER) == 3
        live.proc.send_signal(signal.SIGTERM)
        rc = live.wait()
    finally:
        live.kill()
    assert rc == 1
    report = json.loads(live.out.data)
    classes = {d["class"]: d for d in report["diagnoses"]}
    assert classes.keys() >= {"config.tp_indivisible", "hardware.xid_fatal"}
    oom = next(d for d in report["diagnoses"] + [s for d in report["diagnoses"] for s in d["symptoms"]]
               if d["class"] == "memory.gpu_oom")
    assert oom["count"] >= 4  # every repeat counted
    assert report["stats"]["lines"] == 3 + 1 + 3 * 2 + 1 + 2 + 1  # nothing read twice, nothing lost


def test_follow_stdin_that_never_ends(tmp_path) -> None:
    live = Live(qt_argv("scan", "--follow", "--rules", str(RULES)), stdin=subprocess.PIPE)
    try:
        assert live.proc.stdin is not None
        live.proc.stdin.write(NOISE + OOM)
        live.proc.stdin.flush()
        live.err.wait_for(BANNER)  # while stdin is still open
        live.proc.stdin.write(NOISE * 5)
        live.proc.stdin.flush()
        time.sleep(0.3)
        live.ctrl_c()
        rc = live.wait()
    finally:
        live.kill()
    assert rc == 1
    assert "1 diagnosis(es)" in live.out.text or "diagnosis(es)" in live.out.text
    assert "7 lines read" in live.err.text


def test_follow_stdin_ends_at_eof() -> None:
    proc = subprocess.run(qt_argv("scan", "--follow", "--format", "json", "-"), input=NOISE + TP,
                          capture_output=True, timeout=60)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["diagnoses"][0]["evidence"][0]["path"] == "<stdin>"
    assert BANNER.encode() in proc.stderr


def test_file_follower_rotation_truncation_and_missing(tmp_path) -> None:
    notes: list[str] = []
    path = tmp_path / "a.log"
    f = FileFollower(path, note=notes.append)
    assert f.poll() == [] and "waiting" in notes[-1]
    path.write_bytes(b"one\ntwo\n")
    assert f.poll() == [b"one\ntwo\n"]
    assert f.poll() == []
    append(path, b"three\n")
    assert f.poll() == [b"three\n"]
    os.rename(path, tmp_path / "a.log.1")
    assert f.poll() == [] and "gone" in notes[-1]  # still reading the old file
    append(tmp_path / "a.log.1", b"late line in the old file\n")
    path.write_bytes(b"new file\n")
    assert f.poll() == [b"late line in the old file\n", BREAK, b"new file\n"]
    assert f.rotations == 1
    os.truncate(path, 0)
    assert f.poll() == [BREAK]
    append(path, b"after truncation\n")
    assert f.poll() == [b"after truncation\n"] and f.truncations == 1
    g = FileFollower(path, from_end=True)
    assert g.poll() == []
    append(path, b"only new\n")
    assert g.poll() == [b"only new\n"]
    f.close()
    g.close()


def test_memory_stays_flat_over_a_long_follow(only_live_rules) -> None:
    from qwen_triage.live.session import LiveSession

    events = []
    session = LiveSession(only_live_rules, on_event=events.append)
    inp = session.add_input("days.log")
    chunk = (NOISE * 40 + OOM + b"partial line wit") + b"h its end\n"

    def feed(n: int) -> None:
        for _ in range(n):
            session.feed(inp, chunk)

    feed(500)  # warm up: every cache and table at its working size
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    feed(5000)  # ~210,000 lines
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert grown < 64 * 1024, f"grew by {grown} bytes"
    assert len(events) == 1  # one diagnosis, announced once
    group = session.scanner.correlator.groups["memory.gpu_oom"]
    assert group.count == 5500 and len(group.evidence) <= 5
