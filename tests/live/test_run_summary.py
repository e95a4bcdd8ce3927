"""Issue 10 item 16: a child that fails at once gets its diagnosis panel once, not live and again in the summary."""

from __future__ import annotations

import sys

from tests.live.helpers import Live, qt_argv

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB"


def run_printing(tmp_path, line: str) -> tuple[int, str]:
    """`qwen-triage run` over a child that prints ``line`` and exits 1: its status and our stderr (a pipe)."""
    script = f"print({line!r}, flush=True); raise SystemExit(1)"
    live = Live(qt_argv("run", "--stall", "0", "--log", str(tmp_path / "r.log"), "--", sys.executable, "-c", script))
    try:
        rc = live.wait(60)
    finally:
        live.kill()
    return rc, live.err.text


def test_panel_printed_once_when_the_child_exits_at_once(tmp_path) -> None:
    rc, err = run_printing(tmp_path, OOM)
    assert rc == 1
    assert "memory.gpu_oom" in err
    assert err.count("evidence:") == 1, err  # one panel
    assert "summary" in err
    if "qwen-triage ▸ diagnosis" in err:  # shown live: the summary refers to it
        assert "panel shown above" in err


def test_live_report_off_a_terminal_keeps_every_line_whole(tmp_path) -> None:
    """On a pipe the live blocks are neither boxed nor wrapped: a long evidence line comes out on one line."""
    long_oom = OOM + " of which 1.19 GiB is free. Process 4242 has 77.95 GiB memory in use. " + "x" * 160
    rc, err = run_printing(tmp_path, long_oom)
    assert rc == 1 and "memory.gpu_oom" in err
    assert any(long_oom in line for line in err.splitlines()), err
    assert "╭" not in err and "│" not in err, err  # no panel borders in a pipe
