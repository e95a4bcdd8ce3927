"""A whole-run deadline that stops a step wherever it is (`check --timeout` under node-problem-detector).

NPD kills a custom plugin at its timeout (5 s by default) and then has no answer at all, so a check must
say "unknown" itself before that. The steps that know how to stop early (a rule-pack load, a read) watch
:meth:`Deadline.left`; :func:`armed` is the backstop for every other step (one long rule file, spawning
``journalctl`` or the detached loader on a loaded machine, a slow disk): at the deadline SIGALRM raises
:class:`DeadlinePassed` in the main thread wherever it is, as Ctrl-C raises ``KeyboardInterrupt``, and the
caller answers from what it has.

Limit: Python runs a signal handler between bytecodes, so a single C call that holds the interpreter (an
inline Hyperscan compile, which a check never does: it builds in a detached child) delays the answer.

``QWEN_TRIAGE_CHECK_PAUSE=STEP:SECONDS`` makes :func:`pause` sleep that long at STEP: a slow step on demand,
for the tests and the bench (a cold load on a loaded node, a journal that does not answer).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

PAUSE_ENV = "QWEN_TRIAGE_CHECK_PAUSE"


class DeadlinePassed(BaseException):
    """The run's deadline came in the middle of a step. Not an ``Exception``: a step's ``except Exception``
    (a rule file that fails to load, a reader's error) must not take it for its own failure and go on."""


@dataclass(frozen=True)
class Deadline:
    """When the whole run must be over, as a ``time.perf_counter()`` value (counted from the process start)."""

    at: float

    @classmethod
    def after(cls, started: float, seconds: float) -> "Deadline":
        return cls(started + seconds)

    def left(self) -> float:
        """Seconds left (negative once passed)."""
        return self.at - time.perf_counter()

    def monotonic(self, reserve: float = 0.0) -> float:
        """The same instant less ``reserve`` seconds, on ``time.monotonic()``'s clock (what the readers use)."""
        return time.monotonic() + self.left() - reserve


@contextmanager
def armed(deadline: Deadline) -> Iterator[None]:
    """Raise :class:`DeadlinePassed` in this (main) thread when ``deadline`` passes inside the block.

    Where no alarm can be set (not the main thread, no SIGALRM) the block runs unguarded: the steps still
    watch the deadline themselves. Inside a block already armed, the outer alarm governs. The previous
    handler is put back and the timer stopped on the way out.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return
    if signal.getsignal(signal.SIGALRM) is _fire:  # armed already, further out (the command line's own)
        yield
        return
    previous = signal.signal(signal.SIGALRM, _fire)
    try:
        left = deadline.left()
        if left <= 0:
            raise DeadlinePassed
        signal.setitimer(signal.ITIMER_REAL, left)
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _fire(signum: int, frame: object) -> None:
    raise DeadlinePassed


def pause(step: str) -> None:
    """Sleep at ``step`` as :data:`PAUSE_ENV` asks (nothing when it is unset or names another step)."""
    name, _, seconds = os.environ.get(PAUSE_ENV, "").partition(":")
    if name == step:
        try:
            time.sleep(max(float(seconds), 0.0))
        except ValueError:
            pass
