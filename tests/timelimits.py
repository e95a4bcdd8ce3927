"""Time limits for tests that wait: generous, and scaled to how busy the machine is.

A test asserts behaviour (the diagnosis printed while the child still ran, the check answered
from the stored state); how fast is measured by ``bench/``. Where a test must wait for
something, or bound a wait, the limit is multiplied by :func:`scale`: at least 4, and more
on a machine whose run queue is longer than its CPUs (two cores shared by six test runs took
four times the quiet figures). ``QWEN_TRIAGE_TEST_TIME_SCALE`` sets the factor outright.
"""

from __future__ import annotations

import os

ENV = "QWEN_TRIAGE_TEST_TIME_SCALE"


def scale() -> float:
    """The factor for this moment: the setting, else 4 x how oversubscribed the CPUs are (at least 1)."""
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
    return 4.0 * max(1.0, load / max(cpus, 1))


def scaled(seconds: float) -> float:
    """``seconds`` as a limit a loaded machine still meets."""
    return seconds * scale()
