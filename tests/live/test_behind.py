"""Triage that falls behind the child holds no output in memory, skips none, and has read all of it by the end.

The log is triage's backlog (live.feed): the receive side records where each chunk is, the triage thread
reads the log at its own pace, and once flooded it gives way (niced) to the child and the pass-through until the
output ends (the rest is triaged at the wrapper's priority, on the supervisor's wait thread). Here triage is made slow (a hook that sleeps in the triage thread) while
the child floods its output and ends on a fatal line: the report still covers every line and names it.
"""

from __future__ import annotations

import os
import sys
import threading
import time

LINES = 200_000
CHILD = (
    "import os\n"
    f"for i in range({LINES}):\n"
    "    os.write(1, b'INFO 01-07 10:00:01 [gpu_model_runner.py:1329] step %d: throughput 31.5 tokens/s\\n' % i)\n"
    "os.write(2, b'ggml_backend_cuda_buffer_type_alloc_buffer: allocating 8192.00 MiB on device 0: cudaMalloc failed: "
    "out of memory\\n')\n"
)


def test_a_slow_triage_reads_every_line_before_the_report(tmp_path, compiled) -> None:  # type: ignore[no-untyped-def]
    from qwen_triage.live.supervisor import Supervisor

    read_after_exit: list[int] = []  # bytes triage still had to read, seen once the child had exited
    niceness: list[int] = []  # the triage thread's, batch by batch

    def slow(stream: int, data: bytes) -> None:  # the triage thread: each batch takes a while
        niceness.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        time.sleep(0.02)
        if sup.returncode is not None and sup.passthrough is not None and sup.passthrough.reader is not None:
            read_after_exit.append(sup.passthrough.reader.behind)

    sup = Supervisor([sys.executable, "-c", CHILD], log=tmp_path / "run.log", compiled=compiled, on_output=slow)
    sup.start()
    assert sup.wait(300) == 0
    report = sup.report()
    assert report.stats.lines == LINES + 1  # every line triaged, none skipped…
    assert [d.class_ for d in report.diagnoses] == ["memory.gpu_oom"]  # …the last one too, before the summary
    assert not [n for n in report.notes if "skipped" in n]
    assert read_after_exit and max(read_after_exit) > 1 << 20  # triage was megabytes behind when the child ended
    if sys.platform == "linux":  # flooded, triage gave way to the child and the pass-through while it ran…
        assert 19 in niceness
        # …and once its output ended, the rest was triaged at the wrapper's priority: nobody left to give way to
        assert niceness[-1] == os.getpriority(os.PRIO_PROCESS, 0) != 19
        assert not sup.feed.handed_off


def test_unflooded_triage_keeps_the_wrappers_priority(tmp_path, compiled) -> None:  # type: ignore[no-untyped-def]
    from qwen_triage.live.supervisor import Supervisor

    niceness: list[int] = []
    child = "import time\nfor i in range(5):\n    print('INFO step', i, flush=True)\n    time.sleep(0.05)\n"
    sup = Supervisor([sys.executable, "-c", child], log=tmp_path / "run.log", compiled=compiled,
                     on_output=lambda _s, _d: niceness.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
    sup.start()
    assert sup.wait(120) == 0
    assert niceness and set(niceness) == {os.getpriority(os.PRIO_PROCESS, 0)}  # a diagnosis is due in milliseconds
