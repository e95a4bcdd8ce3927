"""`qwen-triage run -- COMMAND`: the Supervisor, wired to the terminal and to signals."""

from __future__ import annotations

import shlex
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qwen_triage.exits import killed_by
from qwen_triage.interrupts import deliver_pending

FORWARD_AND_STOP = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
FORWARD_ONLY = (signal.SIGUSR1, signal.SIGUSR2)


@dataclass(frozen=True)
class RunOptions:
    """``qwen-triage run``'s options, as the command line gives them."""

    command: tuple[str, ...]
    log_path: str | None = None
    """where the child's output is saved (None: the user's state directory, runs/TIME-COMMAND.log)"""
    stall: float | None = 120.0
    """seconds of silence before a stall report (0 or None: never)"""
    kill_on_fatal: bool = False
    grace: float = 10.0
    report_path: str | None = None
    """also write the final report here: JSON, or Markdown when the name ends in .md"""
    quiet: bool = False
    unbuffered: bool = True
    rule_dirs: tuple[str, ...] = ()
    engine: str = "auto"


def run(options: RunOptions) -> int:
    """Run ``options.command`` under the Supervisor; the exit status is the child's (128+N when signal N ended it).

    The signal handlers go in first, before the pack loads: a Ctrl-C in the first second is the same request
    as one later (exit 128+N, nothing left running; the child is not even started), never a
    KeyboardInterrupt traceback or click's "Aborted!" with exit 1.
    """
    supervisor: list[Any] = []  # the Supervisor once its child runs: signals go to it from then on
    early: list[int] = []  # stop signals that came before

    def on_signal(signum: int, _frame: object) -> None:
        if not supervisor:
            if signum in FORWARD_AND_STOP:
                early.append(signum)
        elif signum in FORWARD_AND_STOP:
            supervisor[0].request_stop(signum, reason=f"{signal.Signals(signum).name} received")
        else:
            supervisor[0].send_signal(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in FORWARD_AND_STOP + FORWARD_ONLY}
    deliver_pending(on_signal)  # a Ctrl-C during the imports, which Python swallowed
    try:
        return _supervise(options, supervisor, early)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _say(msg: str) -> None:
    print(f"qwen-triage: {msg}", file=sys.stderr, flush=True)


def _supervise(o: RunOptions, supervisor: list[Any], early: list[int]) -> int:
    from qwen_triage.engine.scanner import load_compiled
    from qwen_triage.exits import EXIT_CANNOT_RUN, EXIT_ERROR, EXIT_NOT_EXECUTABLE
    from qwen_triage.live.live_report import LiveReporter, Sink
    from qwen_triage.live.run_log import LogFileError, default_log_path
    from qwen_triage.live.supervisor import Supervisor

    command, stall = list(o.command), o.stall or None
    compiled = load_compiled(o.rule_dirs, o.engine)  # exits 2 on a bad rule pack, before anything runs
    if early:
        _say(f"{signal.Signals(early[0]).name} before {command[0]!r} started: not started")
        return killed_by(early[0])
    log = Path(o.log_path).expanduser() if o.log_path else default_log_path(command)
    out, err = Sink.pair(1, 2)
    reporter = LiveReporter(err, quiet=o.quiet)
    sup = Supervisor(
        command, log=log, log_exclusive=not o.log_path, compiled=compiled, stall=stall,
        kill_on_fatal=o.kill_on_fatal, grace=o.grace, unbuffered=o.unbuffered, stdout=out, stderr=err,
        on_event=reporter.event, on_stall=reporter.stall, on_note=reporter.note, on_hang=reporter.hang,
        subreaper=True,
        die_with_parent=True,  # kill -9 of this wrapper must not leave the server holding its port
    )
    try:
        sup.start()
    except LogFileError as exc:
        _say(str(exc))
        return EXIT_ERROR
    except FileNotFoundError as exc:
        _say(f"cannot run {command[0]!r}: {exc.strerror}")
        return EXIT_CANNOT_RUN
    except PermissionError as exc:
        _say(f"cannot run {command[0]!r}: {exc.strerror}")
        return EXIT_NOT_EXECUTABLE
    except OSError as exc:
        _say(f"cannot start {command[0]!r}: {exc.strerror or exc}")
        return EXIT_CANNOT_RUN
    supervisor.append(sup)
    for signum in early:  # came while the child started: the same request, now that it has a receiver
        sup.request_stop(signum, reason=f"{signal.Signals(signum).name} received")
    log = sup.log_path or log
    watchdog = f"; stall report after {stall:g} s of silence" if stall else ""
    from qwen_triage.redact import mask_argv

    reporter.note(f"running {shlex.join(mask_argv(command))} (pid {sup.pid}); log: {log}{watchdog}")
    status = None
    while status is None:
        status = sup.wait(0.5)

    # From here on the child is gone; our own trouble must not change its exit status.
    try:
        report = sup.report()
        if o.report_path:
            _write_report(report, Path(o.report_path).expanduser())
        reporter.summary(report)
        reporter.note(f"the child {_how(sup)}; its output is in {log}")
    except Exception as exc:  # noqa: BLE001
        _say(f"could not finish the report ({exc!r}); the log is {log}")
    return status


def _how(sup) -> str:
    from qwen_triage.live.procs import describe_returncode

    return describe_returncode(sup.returncode) + (f" (stopped: {sup.stop_reason})" if sup.stop_reason else "")


def _write_report(report, path: Path) -> None:
    from qwen_triage.report.markdown import to_markdown

    text = to_markdown(report) if path.suffix.lower() in (".md", ".markdown") else report.to_json() + "\n"
    from qwen_triage.atomicfile import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text, mode=0o600)  # a report quotes the child's log: the owner's alone
