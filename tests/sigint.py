"""A child that a test will Ctrl-C gets SIGINT's default disposition back before it starts.

A shell that starts a job in the background (``pytest … &``, ``nohup``) sets SIGINT to "ignored" for
it, and an ignored disposition survives ``exec``: a child started from such a run would never see
the SIGINT the test sends it, and the test would wait out its limit. Pass :func:`default_sigint` as
``preexec_fn`` to every ``Popen`` whose child the test interrupts.
"""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """In the child, between fork and exec: SIGINT acts again (Python turns it into KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
