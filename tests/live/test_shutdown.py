"""ProcessTree's stop, requested while the child exits by itself (the waiter joins the stopper)."""

from __future__ import annotations

import signal
import threading

from qwen_triage.live.hooks import Hooks
from qwen_triage.live.shutdown import ProcessTree


def test_the_child_exiting_while_a_stop_starts_joins_no_unstarted_thread(monkeypatch) -> None:
    """Seen in a loaded run: the waiter's after_exit joined the stopper between its creation and its
    start ("cannot join thread before it is started"). Here the waiter runs exactly there."""
    tree = ProcessTree(b"QWEN_TRIAGE_RUN=test", grace=0.1, hooks=Hooks())
    real_start = threading.Thread.start
    seen: list[BaseException | None] = []

    def start_after_the_waiter(thread: threading.Thread) -> None:
        if thread.name == "qwen-triage-stop" and not seen:
            try:
                tree.after_exit(0)  # the child exited; its waiter reaps it now
                seen.append(None)
            except BaseException as exc:  # noqa: BLE001 - what the waiter thread would die of
                seen.append(exc)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start_after_the_waiter)
    tree.request_stop(signal.SIGTERM, reason="test")
    assert seen == [None]
    assert tree.stopper is not None
    tree.stopper.join(10)
    assert not tree.stopper.is_alive() and tree.stop_reason == "test"
