"""The live core: line splitting, announcing diagnoses once, veto windows; small helpers."""

from __future__ import annotations

import os
import random
from datetime import datetime
from pathlib import Path

import pytest

from qwen_triage.live import procs
from qwen_triage.live.lines import LineSplitter
from qwen_triage.live.session import LiveSession
from qwen_triage.live.run_log import LogFileError, command_slug, default_log_path, open_log

OOM = b"ggml_backend_cuda_buffer_type_alloc_buffer: allocating 8192.00 MiB on device 0: cudaMalloc failed: out of memory"
SEGV = b"SIGSEGV: segmentation violation"
FAIL = b"RuntimeError: Engine core initialization failed. See root cause above."


def test_splitting_does_not_depend_on_chunk_boundaries() -> None:
    rng = random.Random(7)
    data = b"".join(rng.choice([b"a", b"bb\n", b"\n", b"\xff\xfe", b"\r", b"ccc " * 30 + b"\n"]) for _ in range(3000))
    whole = LineSplitter(max_line=50)
    expected = whole.feed(data) + whole.close()
    for _ in range(20):
        sp = LineSplitter(max_line=50)
        got: list[tuple[bytes, bool]] = []
        pos = 0
        while pos < len(data):
            n = rng.randint(1, 200)
            got += sp.feed(data[pos : pos + n])
            pos += n
        assert got + sp.close() == expected
    assert all(len(line) <= 50 for line, _ in expected)
    assert any(cut for _, cut in expected)


@pytest.mark.parametrize("seed", range(40))
def test_lines_match_a_plain_split_whatever_the_chunks(seed: int) -> None:
    """Against the obvious reference: split the whole stream on LF, cut each line to the bound."""
    rng = random.Random(seed)
    limit = rng.choice([5, 50, 400])
    pieces = [b"a", b"bb\n", b"\n", b"\xff", b"\r", b"x" * 60, b"y" * 7 + b"\n", b"z" * 500]
    data = b"".join(rng.choice(pieces) for _ in range(rng.randrange(400)))
    *complete, last = data.split(b"\n")
    expected = [(line[:limit], len(line) > limit) for line in complete]
    if last:
        expected.append((last[:limit], len(last) > limit))
    sp = LineSplitter(max_line=limit)
    got: list[tuple[bytes, bool]] = []
    pos = 0
    while pos < len(data):
        n = rng.choice([1, 3, 64, 4096])
        lines = sp.feed_lines(data[pos : pos + n])
        assert lines.count == len(lines.split()) == lines.data.count(b"\n")
        assert lines.tail(2) == lines.split()[-2:]
        got += lines.pairs()
        pos += n
    assert got + sp.close() == expected


def test_overlong_line_keeps_its_prefix_and_holds_no_more() -> None:
    sp = LineSplitter(max_line=10)
    assert sp.feed(b"0123456789abcdef") == []
    sp.feed(b"x" * 1_000_000)
    assert len(sp.pending()) == 10  # memory bounded while the line goes on
    assert sp.feed(b"tail\nnext\n") == [(b"0123456789", True), (b"next", False)]
    assert sp.feed(b"partial") == [] and sp.close() == [(b"partial", False)] and sp.close() == []


def test_each_diagnosis_is_announced_once_symptoms_under_their_root(only_live_rules) -> None:
    events = []
    s = LiveSession(only_live_rules, on_event=events.append)
    out = s.add_input("<child>")
    s.feed(out, OOM + b"\n", stream=2)
    assert [(e.kind, e.class_, e.number) for e in events] == [("diagnosis", "memory.gpu_oom", 1)]
    assert events[0].item is not None and events[0].item.facts == {"mib": 8192.0, "device": 0}
    assert s.fatal is not None  # an error diagnosis is certain
    s.feed(out, SEGV + b"\n" + OOM + b"\n" + OOM + b"\n", stream=1)
    assert [(e.kind, e.class_) for e in events][1:] == [("symptom", "process.segfault")]
    assert events[1].root is not None and events[1].root.class_ == "memory.gpu_oom"
    report = s.finish()
    assert report.diagnoses[0].count == 3 and report.inputs[0].lines == 4


def test_a_finding_with_a_veto_window_waits_for_it(only_live_rules) -> None:
    events = []
    s = LiveSession(only_live_rules, on_event=events.append)
    inp = s.add_input("x")
    s.feed(inp, FAIL + b"\n")
    assert events == []  # `unless` within 5 lines could still veto it
    s.feed(inp, b"l\n" * 6)
    assert [e.class_ for e in events] == ["server.startup_timeout"]

    vetoed = LiveSession(only_live_rules, on_event=events.append)
    inp = vetoed.add_input("y")
    vetoed.feed(inp, FAIL + b"\nretrying engine start\n")
    assert vetoed.finish().diagnoses == []

    quiet = LiveSession(only_live_rules, on_event=events.append)
    inp = quiet.add_input("q")
    quiet.feed(inp, FAIL + b"\n")
    events.clear()
    quiet.settle()  # the stall watchdog fired: no veto is coming soon
    assert [e.class_ for e in events] == ["server.startup_timeout"]
    quiet.feed(inp, b"retrying engine start\n")  # the session goes on after settling
    assert quiet.finish().diagnoses[0].count == 1

    late = LiveSession(only_live_rules)
    inp = late.add_input("z")
    late.feed(inp, FAIL)  # no newline, no more lines: the end settles it
    assert [d.class_ for d in late.finish().diagnoses] == ["server.startup_timeout"]


def test_two_streams_never_mix_inside_a_line(only_live_rules) -> None:
    s = LiveSession(only_live_rules)
    inp = s.add_input("<child>")
    half = len(OOM) // 2
    s.feed(inp, OOM[:half], stream=1)
    s.feed(inp, b"stderr chatter\n", stream=2)
    s.feed(inp, OOM[half:] + b"\n", stream=1)
    assert [d.class_ for d in s.finish().diagnoses] == ["memory.gpu_oom"]


def test_log_names_and_files(tmp_path: Path) -> None:
    assert command_slug(["vllm", "serve", "./qwen32b", "--tensor-parallel-size", "6"]) == "vllm-serve"
    assert command_slug(["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "x"]) == \
        "vllm.entrypoints.openai.api_server"
    assert command_slug(["ollama", "serve"]) == "ollama-serve"
    assert command_slug(["python", "train.py", "--x"]) == "train.py"
    assert command_slug(["/opt/weird name/run me!"]) == "run_me"
    when = datetime(2025, 1, 7, 10, 15, 0)
    assert default_log_path(["vllm", "serve"], when, tmp_path) == tmp_path / "20250107-101500-vllm-serve.log"
    first = default_log_path(["ollama", "serve"], when, tmp_path)
    fd1, p1 = open_log(first, exclusive=True)
    fd2, p2 = open_log(first, exclusive=True)
    os.close(fd1)
    os.close(fd2)
    assert p1 == first and p2.name == "20250107-101500-ollama-serve-2.log"
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(LogFileError):
        open_log(tmp_path / "a-file" / "below-a-file.log")


def test_exit_statuses() -> None:
    assert procs.exit_status(-9) == 137 and procs.exit_status(3) == 3
    assert procs.describe_returncode(-11) == "was killed by signal 11 (SIGSEGV)"
    assert procs.describe_wait_status(2 << 8) == (2, "exited with status 2")
    assert procs.describe_wait_status(9) == (137, "was killed by signal 9 (SIGKILL)")
    assert procs.describe_wait_status(11 | 0x80) == (139, "was killed by signal 11 (SIGSEGV) (core dumped)")
    me = procs.proc_stat(os.getpid())
    assert me is not None and me.pid == os.getpid() and not me.zombie
    assert procs.proc_stat(999_999_999) is None
