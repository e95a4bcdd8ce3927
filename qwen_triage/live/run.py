"""`qwen-triage run -- COMMAND`: the Supervisor, wired to the terminal and to signals."""

from __future__ import annotations

import shlex
import signal
import sys
from pathlib import Path

from qwen_triage.interrupts import deliver_pending

FORWARD_AND_STOP = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
FORWARD_ONLY = (signal.SIGUSR1, signal.SIGUSR2)


def run_main(
    command: list[str],
    *,
    log_path: str | None,
    stall: float | None,
    kill_on_fatal: bool,
    grace: float,
    report_path: str | None,
    quiet: bool,
    unbuffered: bool,
    rule_dirs: tuple[str, ...],
    engine: str,
) -> int:
    from qwen_triage.engine.scanner import load_compiled
    from qwen_triage.exits import EXIT_ERROR
    from qwen_triage.exits import EXIT_CANNOT_RUN, EXIT_NOT_EXECUTABLE
    from qwen_triage.live.live_report import LiveReporter, Sink
    from qwen_triage.live.run_log import LogFileError, default_log_path
    from qwen_triage.live.supervisor import Supervisor

    def say(msg: str) -> None:
        print(f"qwen-triage: {msg}", file=sys.stderr, flush=True)

    compiled = load_compiled(rule_dirs, engine)  # exits 2 on a bad rule pack, before anything runs
    log = Path(log_path).expanduser() if log_path else default_log_path(command)
    out, err = Sink.pair(1, 2)
    reporter = LiveReporter(err, quiet=quiet)
    sup = Supervisor(
        command,
        log=log,
        log_exclusive=not log_path,
        compiled=compiled,
        stall=stall,
        kill_on_fatal=kill_on_fatal,
        grace=grace,
        unbuffered=unbuffered,
        stdout=out,
        stderr=err,
        on_event=reporter.event,
        on_stall=reporter.stall,
        on_note=reporter.note,
        subreaper=True,
        die_with_parent=True,  # kill -9 of this wrapper must not leave the server holding its port
    )
    try:
        sup.start()
    except LogFileError as exc:
        say(str(exc))
        return EXIT_ERROR
    except FileNotFoundError as exc:
        say(f"cannot run {command[0]!r}: {exc.strerror}")
        return EXIT_CANNOT_RUN
    except PermissionError as exc:
        say(f"cannot run {command[0]!r}: {exc.strerror}")
        return EXIT_NOT_EXECUTABLE
    except OSError as exc:
        say(f"cannot start {command[0]!r}: {exc.strerror or exc}")
        return EXIT_CANNOT_RUN
    log = sup.log_path or log
    watchdog = f"; stall report after {stall:g} s of silence" if stall else ""
    from qwen_triage.redact import mask_argv

    reporter.note(f"running {shlex.join(mask_argv(command))} (pid {sup.pid}); log: {log}{watchdog}")

    def on_signal(signum: int, _frame: object) -> None:
        if signum in FORWARD_AND_STOP:
            sup.request_stop(signum, reason=f"{signal.Signals(signum).name} received")
        else:
            sup.send_signal(signum)

    previous = {}
    for sig in FORWARD_AND_STOP + FORWARD_ONLY:
        previous[sig] = signal.signal(sig, on_signal)
    deliver_pending(on_signal)  # a Ctrl-C while the child started, which Python swallowed
    try:
        status = None
        while status is None:
            status = sup.wait(0.5)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    # From here on the child is gone; our own trouble must not change its exit status.
    try:
        report = sup.report()
        if report_path:
            _write_report(report, Path(report_path).expanduser())
        reporter.summary(report)
        reporter.note(f"the child {_how(sup)}; its output is in {log}")
    except Exception as exc:  # noqa: BLE001
        say(f"could not finish the report ({exc!r}); the log is {log}")
    return status


def _how(sup) -> str:  # type: ignore[no-untyped-def]
    from qwen_triage.live.procs import describe_returncode

    return describe_returncode(sup.returncode) + (f" (stopped: {sup.stop_reason})" if sup.stop_reason else "")


def _write_report(report, path: Path) -> None:  # type: ignore[no-untyped-def]
    from qwen_triage.report.markdown import to_markdown

    text = to_markdown(report) if path.suffix.lower() in (".md", ".markdown") else report.to_json() + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
