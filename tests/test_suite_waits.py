"""The suite cannot hang: limits are capped, waits end with what they wait on, Ctrl-C reaches children.

These check the test helpers themselves (tests/timelimits.py, tests/sigint.py, tests/live/helpers.py),
the way a suite started on a loaded machine, or in the background with ``&``, would use them.
"""

from __future__ import annotations

import os
import signal
import sys

import pytest

from tests import timelimits
from tests.live.helpers import Live
from tests.timelimits import wait_until


def test_the_load_scale_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(timelimits.ENV, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (1000.0, 1000.0, 1000.0))  # 30x oversubscribed and more
    assert timelimits.scale() == timelimits.CAP == 8.0
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert timelimits.scale() == timelimits.BASE
    monkeypatch.setenv(timelimits.ENV, "50")  # set outright: the caller's choice
    assert timelimits.scale() == 50.0


def test_a_wait_ends_when_what_it_waits_on_has_ended() -> None:
    looks: list[int] = []

    def never() -> bool:
        looks.append(1)
        return False

    assert wait_until(never, 3600, alive=lambda: False) is False
    assert len(looks) == 2  # one look, the thing has ended, one last look: not an hour of polling


def test_a_stream_that_ended_without_the_line_fails_at_once() -> None:
    live = Live([sys.executable, "-c", "print('something else', flush=True)"])
    with pytest.raises(AssertionError, match="the stream ended"):
        live.out.wait_for("never printed", timeout=3600)
    assert live.wait() == 0


@pytest.fixture
def sigint_ignored():  # type: ignore[no-untyped-def]
    """What `pytest … &` from a non-interactive shell, or nohup, gives the suite: SIGINT ignored."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield
    signal.signal(signal.SIGINT, before)


def test_ctrl_c_reaches_a_child_of_a_suite_started_in_the_background(sigint_ignored) -> None:  # type: ignore[no-untyped-def]
    # a plain Python child: it installs no SIGINT handler of its own, so it stops only if the
    # disposition it was started with is the default one again
    live = Live([sys.executable, "-c", "import signal, time; print(signal.getsignal(signal.SIGINT), flush=True); "
                 "time.sleep(3600)"])
    try:
        live.out.wait_for("<", timeout=60)
        live.ctrl_c()
        rc = live.wait(60)
    finally:
        live.kill()
    assert "default_int_handler" in live.out.text
    assert rc != 0 and "KeyboardInterrupt" in live.err.text
