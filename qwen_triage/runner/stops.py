"""How a relaunch run ends: the exception that carries its exit status (qwen_triage/exits.py) out of the loop.

A module of its own so the loop, the attempt runner and the fix waiter can all
end the run the same way without importing one another.
"""

from __future__ import annotations

from qwen_triage.exits import EXIT_INTERRUPTED


class _Stop(Exception):
    """End of the run, with its exit status and outcome."""

    def __init__(self, status: int, outcome: str, message: str = ""):
        super().__init__(message)
        self.status, self.outcome, self.message = status, outcome, message


def interrupted(message: str) -> _Stop:
    """The run ends because Ctrl-C came; ``message`` says where it was."""
    return _Stop(EXIT_INTERRUPTED, "interrupted", message)
