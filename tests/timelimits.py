"""Time limits for tests that wait: generous, scaled to how busy the machine is, and never the only way out.

A test asserts behaviour (the diagnosis printed while the child still ran, the check answered
from the stored state); how fast is measured by ``bench/``. Where a test must wait for
something, or bound a wait, the limit is multiplied by :func:`scale`: at least 4, and more
on a machine whose run queue is longer than its CPUs (two cores shared by six test runs took
four times the quiet figures), but at most :data:`CAP` - on a machine 30 times oversubscribed a
wait of 30 s would otherwise become a quarter of an hour. ``QWEN_TRIAGE_TEST_TIME_SCALE`` sets
the factor outright.

A limit is the last way out of a wait, not the usual one: :func:`wait_until` also ends as soon as
what it waits on has ended (the child exited, the reading thread saw the end of its pipe), so a
run that failed early fails the test at once instead of sitting out the limit.
"""

from __future__ import annotations

import os
import time
from typing import Callable, TypeVar

ENV = "QWEN_TRIAGE_TEST_TIME_SCALE"
BASE = 4.0
CAP = 8.0

T = TypeVar("T")


def scale() -> float:
    """The factor for this moment: the setting, else 4 x how oversubscribed the CPUs are, at most :data:`CAP`."""
    try:
        forced = float(os.environ.get(ENV, "0"))
    except ValueError:
        forced = 0.0
    if forced > 0:
        return forced
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    return min(CAP, BASE * max(1.0, load / max(cpus, 1)))


def scaled(seconds: float) -> float:
    """``seconds`` as a limit a loaded machine still meets."""
    return seconds * scale()


def wait_until(check: Callable[[], T], timeout: float, *, alive: Callable[[], bool] | None = None,
               step: float = 0.02) -> T:
    """Poll ``check`` until it gives a true value; its last value.

    The wait also ends when ``alive()`` turns false - what the check waits on (a process, a
    reading thread) has ended, so nothing more can come - after one last look, and at the
    latest after ``scaled(timeout)``.
    """
    deadline = time.monotonic() + scaled(timeout)
    while True:
        value = check()
        if value or time.monotonic() >= deadline:
            return value
        if alive is not None and not alive():
            return check()
        time.sleep(step)
