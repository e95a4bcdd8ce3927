"""How every command ends: the one-line refusal (status 2), and the console script's exit with a command's status.

Click-free, so that the plain ``scan`` (:mod:`qwen_triage.cli.scan_command`), which never imports click,
ends exactly as every other command does.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Callable, NoReturn

from qwen_triage.exits import EXIT_CLEAN, EXIT_ERROR, EXIT_FOUND, EXIT_INTERRUPTED
from qwen_triage.interrupts import take_pending


def fail(message: str, *, command: str | None = None) -> NoReturn:
    """Stop with the one-line reason on stderr and exit status 2: the CLI's one way to refuse.

    The library raises :class:`qwen_triage.exits.Failure`; a command catches what
    it can explain and ends here. ``command`` names the subcommand in the line
    (``qwen-triage plan: …``) where the reason alone would not say which.
    """
    where = f" {command}" if command else ""
    note(f"qwen-triage{where}: {message}")
    sys.exit(EXIT_ERROR)


def note(line: str) -> None:
    """One line on stderr (a remark beside the report, never part of it)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def conclude(command: Callable[[], object]) -> NoReturn:
    """Run ``command`` (which ends by ``sys.exit``), then :func:`leave` with its status.

    A Ctrl-C no command handled itself is 128+SIGINT, never "a diagnosis": click reports it as
    "Aborted!" with status 1, a command run without click raises it here.
    """
    os.environ.setdefault("PYTHONIOENCODING", "utf-8")
    try:
        command()
        status: object = EXIT_CLEAN
    except SystemExit as exc:
        status = exc.code
        if status == EXIT_FOUND and take_pending() == signal.SIGINT:
            status = EXIT_INTERRUPTED
    except KeyboardInterrupt:
        note("Aborted!")
        status = EXIT_INTERRUPTED
    except BrokenPipeError:
        # `qwen-triage scan … | head` closing the pipe is not an error
        sys.stderr.close()
        status = EXIT_CLEAN
    leave(status)  # type: ignore[arg-type]


def leave(status: int | str | None) -> NoReturn:
    """Exit with ``status`` without the interpreter's teardown, once nothing else runs.

    Freeing every rule, pattern and module one by one at exit was a sixth of a warm 10-line
    scan (~25 ms) and does nothing for the user. Output is flushed and the ``atexit`` callbacks
    (temporary directories, multiprocessing pools) run as at a normal exit; with another thread
    still alive the normal exit is taken, so nothing is cut short.
    """
    import threading

    if threading.active_count() > 1:
        sys.exit(status)
    if status is None:
        code = EXIT_CLEAN
    elif isinstance(status, int):
        code = status
    else:  # sys.exit("message"): the message on stderr, status 1, as Python does
        print(status, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and not stream.closed:
                stream.flush()
        except (OSError, ValueError):  # a reader that went away: nothing left to tell it
            pass
    import atexit

    atexit._run_exitfuncs()
    os._exit(code)
