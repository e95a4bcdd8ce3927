"""A Ctrl-C that comes while the command line is still importing is never lost.

Python's own SIGINT handler raises ``KeyboardInterrupt`` wherever the main thread happens to
be. During start-up that is often inside an import, and when it is a weakref callback of the
import machinery (``_get_module_lock.<locals>.cb``) the interpreter prints "Exception ignored"
and goes on: the user pressed Ctrl-C, and `relaunch` went on to start a server and serve.

The console script installs :func:`note_and_raise` before it imports the command line. It
behaves as Python's handler does (the exception still stops a scan or shows click's
"Aborted!"), and it also notes the signal. A command that installs handlers of its own (`run`,
`relaunch`) calls :func:`deliver_pending` right after: a signal noted there came before its handler
and it is still running, so the exception was swallowed, and the command treats it as a signal
that just arrived.

The note is one value per process, like the signal disposition it stands beside.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

_pending: list[int] = []


def note_and_raise(signum: int, frame: object) -> None:
    """SIGINT before a command has its own handler: remember it, then do what Python would."""
    _pending.append(signum)
    signal.default_int_handler(signum, frame)  # type: ignore[arg-type]


def install() -> None:
    """Called first by the console script (main thread only; elsewhere there is nothing to do)."""
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, note_and_raise)
    except ValueError:  # not the main thread
        pass


def take_pending() -> int | None:
    """The signal noted before the caller's handler was installed, once; None when there was none."""
    if not _pending:
        return None
    signum = _pending[0]
    _pending.clear()
    return signum


def deliver_pending(handler: Callable[[int, object], None]) -> None:
    """Hand a signal noted before ``handler`` was installed to it, as if it had just arrived."""
    signum = take_pending()
    if signum is not None:
        handler(signum, None)
