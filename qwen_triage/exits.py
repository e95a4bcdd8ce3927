"""Every exit status of every command, and the one error that means "stop with status 2".

The one place a status is defined (a test holds it): the triage commands' three, the names
`relaunch` and `check` give the same numbers in their own words, and the shell's conventions
for a command that cannot run and for a process a signal ended.

A leaf module: any layer may raise :class:`Failure`; only the command line turns
it into the one-line reason on stderr and the exit status, so library code never
calls ``sys.exit`` on behalf of a user.
"""

from __future__ import annotations

EXIT_CLEAN = 0  # nothing found
EXIT_FOUND = 1  # at least one diagnosis
EXIT_ERROR = 2  # bad usage or bad input (a broken rule file, a missing file)
EXIT_NOT_EXECUTABLE = 126  # as a shell says "permission denied"
EXIT_CANNOT_RUN = 127  # as a shell says "command not found"
SIGNAL_BASE = 128  # a process signal N ended: 128+N, as a shell reports it
EXIT_INTERRUPTED = SIGNAL_BASE + 2  # Ctrl-C (SIGINT)

# `relaunch`: the server is ready; the run gave up (no fix left, attempts used up); bad input; a step needs you
EXIT_READY = EXIT_CLEAN
EXIT_GAVE_UP = EXIT_FOUND
EXIT_USAGE = EXIT_ERROR
EXIT_MANUAL = 3

# `check` (node-problem-detector's custom plugin convention): healthy, a problem, the check could not tell
EXIT_OK = EXIT_CLEAN
EXIT_PROBLEM = EXIT_FOUND
EXIT_UNKNOWN = EXIT_ERROR


def killed_by(signum: int) -> int:
    """The status of a process signal ``signum`` ended (the shell's convention)."""
    return SIGNAL_BASE + signum


class Failure(Exception):
    """Bad usage or bad input: the command stops with ``qwen-triage: <message>`` and status 2."""
