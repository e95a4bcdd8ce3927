"""Exit statuses every command shares, and the one error that means "stop with status 2".

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


class Failure(Exception):
    """Bad usage or bad input: the command stops with ``qwen-triage: <message>`` and status 2."""
