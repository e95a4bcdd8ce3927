"""`qwen-triage run`, `attach` and `journal`. Only click is imported up front."""

from __future__ import annotations

import sys
from typing import Any

import click

from qwen_triage.cli.options import format_option, pack_options
from qwen_triage.inputs.helptext import SINCE_FORMS


def _seconds_option(flag: str, default: float, help_text: str):
    return click.option(
        flag, metavar="SECONDS", type=click.FloatRange(min=0), default=default, show_default=True, help=help_text
    )


@click.command(
    "run",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    short_help="Run a launch under live triage (tee, stall watchdog, clean stop).",
)
@click.option(
    "--log",
    "log_path",
    type=click.Path(dir_okay=False),
    help="Save the child's output here (default: the user's state directory, runs/TIME-COMMAND.log).",
)
@_seconds_option("--stall", 120.0, "Report when the child prints nothing for this many seconds (0: never).")
@click.option(
    "--kill-on-fatal", is_flag=True, help="Stop the child as soon as a critical or error diagnosis is certain."
)
@_seconds_option("--grace", 10.0, "Seconds between the stop signal and SIGKILL.")
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False),
    help="Also write the final report here: JSON, or Markdown when the name ends in .md.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing of ours while the child runs, and no summary.")
@click.option(
    "--unbuffered/--no-unbuffered",
    default=True,
    show_default=True,
    help="Set PYTHONUNBUFFERED=1 for the child, so Python programs' print() output arrives as it is written.",
)
@pack_options
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(command: tuple[str, ...], stall: float, **options: Any) -> None:
    """Run COMMAND, show its output unchanged, save it, and triage it live.

    \b
      qwen-triage run -- vllm serve ./qwen32b --tensor-parallel-size 6
      qwen-triage run --stall 60 --kill-on-fatal -- ollama serve

    Diagnoses print on stderr as soon as their evidence arrives, a stall report
    when the child goes quiet. Ctrl-C or SIGTERM stops the child and every process
    it started (SIGKILL after --grace). The exit status is the child's (128+N when
    signal N killed it).
    """
    from qwen_triage.live.run import RunOptions
    from qwen_triage.live.run import run as run_command

    # The options reach RunOptions by name: its fields are the one list of them.
    sys.exit(run_command(RunOptions(command=command, stall=stall, **options)))


@click.command("attach", short_help="Triage a running server: follow its output, report its exit.")
@click.argument("pid", type=click.IntRange(min=1))
@click.option("--new-only", is_flag=True, help="Skip what the process wrote before now.")
@format_option
@pack_options
def attach(pid: int, new_only: bool, fmt: str, rule_dirs: tuple[str, ...], engine: str) -> None:
    """Follow what process PID writes (a log file, or its journal stream) and triage it live.

    \b
      qwen-triage attach $(pgrep -f 'vllm serve')
    """
    from qwen_triage.live.attach import AttachOptions
    from qwen_triage.live.attach import run as attach_command

    sys.exit(attach_command(AttachOptions(pid=pid, new_only=new_only, fmt=fmt, rule_dirs=rule_dirs, engine=engine)))


@click.command("journal", short_help="Triage a systemd unit's journal (default: ollama).")
@click.argument("unit", default="ollama")
@click.option("--since", help=f"Start of the window, {SINCE_FORMS} (default: when the unit last started).")
@click.option("--kernel", is_flag=True, help="Add the kernel log for the same window, merged into one timeline.")
@click.option("--follow", "-f", is_flag=True, help="Keep reading; diagnoses print as they form, the summary on Ctrl-C.")
@click.option("--user", is_flag=True, help="A user unit (systemctl --user).")
@format_option
@pack_options
def journal(
    unit: str,
    since: str | None,
    kernel: bool,
    follow: bool,
    user: bool,
    fmt: str,
    rule_dirs: tuple[str, ...],
    engine: str,
) -> None:
    """Read UNIT's systemd journal (as JSON, with each line's fields) and triage it.

    \b
      qwen-triage journal                      # ollama, since it last started
      qwen-triage journal vllm --kernel --since -2h
      qwen-triage journal ollama --follow
    """
    from qwen_triage.live.systemd_journal import JournalOptions
    from qwen_triage.live.systemd_journal import run as journal_command

    sys.exit(journal_command(JournalOptions(unit=unit, since=since, kernel=kernel, follow=follow, user=user, fmt=fmt,
                                            rule_dirs=rule_dirs, engine=engine)))


COMMANDS = [run, attach, journal]
