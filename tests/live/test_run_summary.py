"""Issue 10 item 16: a child that fails at once gets its diagnosis panel once, not live and again in the summary."""

from __future__ import annotations

import sys

from tests.live.helpers import Live, qt_argv

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB"


def test_panel_printed_once_when_the_child_exits_at_once(tmp_path) -> None:
    script = f"print({OOM!r}, flush=True); raise SystemExit(1)"
    live = Live(qt_argv("run", "--stall", "0", "--log", str(tmp_path / "r.log"), "--", sys.executable, "-c", script))
    try:
        rc = live.wait(60)
    finally:
        live.kill()
    err = live.err.text
    assert rc == 1
    assert "memory.gpu_oom" in err
    assert err.count("evidence:") == 1, err  # one panel
    assert "summary" in err
    if "qwen-triage ▸ diagnosis" in err:  # shown live: the summary refers to it
        assert "panel shown above" in err
