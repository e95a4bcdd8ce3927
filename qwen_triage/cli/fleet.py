"""`qwen-triage check`: one incremental node check, for node-problem-detector, Prometheus and Slurm.

The command parses, calls :func:`qwen_triage.fleet.node_check.run` and hands the result to its
channels (fleet/channels.py): the node_exporter textfile and the Slurm drain when asked for, then
the output format (``npd`` is node-problem-detector's channel; ``text`` and ``json`` are for people
and scripts).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import click

from qwen_triage.exits import EXIT_OK, EXIT_PROBLEM, EXIT_UNKNOWN
from qwen_triage.inputs.helptext import KERNEL_CHECK_SOURCES
from qwen_triage.report.formats import CHECK, pick


@click.command("check", short_help="One incremental node check (node-problem-detector, node_exporter, Slurm).")
@click.option("--kernel", is_flag=True, help=f"Read the kernel log ({KERNEL_CHECK_SOURCES}).")
@click.option("--journal", "units", metavar="UNIT", multiple=True, help="Read a systemd unit's journal (repeatable).")
@click.option("--file", "files", metavar="PATH", multiple=True, help="Read a log file (repeatable); rotation and "
              "truncation are followed.")
@click.option("--state", "state_dir", metavar="DIR", default=None,
              help="Where positions and active diagnoses are kept [default: $QWEN_TRIAGE_STATE, else "
                   "/var/lib/qwen-triage as root, else the user state directory].")
@click.option("--format", "fmt", type=click.Choice(CHECK), default="text", show_default=True,
              help="npd: node-problem-detector custom plugin (exit 0 OK, 1 problem, 2 unknown; one short line).")
@click.option("--textfile", metavar="FILE", type=click.Path(dir_okay=False),
              help="Also write node_exporter textfile-collector metrics here (a *.prom file, replaced atomically).")
@click.option("--slurm-drain", is_flag=True, help="HealthCheckProgram mode: drain this node on node-level classes.")
@click.option("--slurm-resume", is_flag=True, help="With --slurm-drain: resume this node's own drains once clear.")
@click.option("--node-name", metavar="NAME", help="Slurm node name [default: $SLURMD_NODENAME, else the hostname].")
@click.option("--hold", metavar="SECONDS", type=click.FloatRange(min=0), default=3600.0, show_default=True,
              help="A diagnosis stays active this long after its last evidence (kernel hardware classes: until "
                   "the next boot).")
@click.option("--max-bytes", metavar="BYTES", type=click.IntRange(min=4096), default=64 << 20, show_default=True,
              help="Read at most this much of each source per run; the rest is left for the next run.")
@click.option("--timeout", metavar="SECONDS", type=click.FloatRange(min=0.1), default=4.0, show_default=True,
              help="The whole run (start-up, loading the rules, reading, matching, the answer) ends this long "
                   "after the process started: what is unread is left for the next run, and a check that cannot "
                   "say answers unknown (a cut rule load is finished by a detached child).")
@click.option("--max-output", metavar="BYTES", type=click.IntRange(min=8), default=80, show_default=True,
              help="--format npd: longest stdout line (node-problem-detector's max_output_length).")
@click.option("--class", "class_patterns", metavar="GLOB", multiple=True,
              help="Report (exit status and output) only active classes matching this glob (repeatable), e.g. one "
                   "node-problem-detector condition per class.")
@click.option("--from-end", is_flag=True, help="A file never read before is read from its end, not its start.")
@click.option("--rules", "rule_dirs", metavar="DIR", multiple=True, type=click.Path(exists=True),
              help="Extra rule directory (repeatable); QWEN_TRIAGE_RULES adds more.")
@click.option("--clear", "clear_patterns", metavar="GLOB", multiple=True,
              help="After a repair without a reboot: let go of the active diagnoses whose class matches (e.g. "
                   "'hardware.*'); the lines already read stay read, new evidence raises them again.")
def check(**params: Any) -> None:
    """Read what is new in the node's logs since the last check and report the active diagnoses.

    Exit status: 0 nothing active, 1 an active diagnosis, 2 could not check (as node-problem-detector reads it).
    """
    now = time.time()
    started = time.perf_counter() - _age(now)  # --timeout counts from the process start, imports included
    code, text = _check(params, started, now)
    if text:
        click.echo(text)
    sys.exit(code)


def _channels(params: dict[str, Any]) -> list:
    """The side channels asked for, in the order they act: the metrics first, then the drain."""
    from qwen_triage.fleet.channels import build

    out = [build("textfile", path=params["textfile"])] if params["textfile"] else []
    if params["slurm_drain"]:
        out.append(build("slurm", node=params["node_name"], resume=params["slurm_resume"]))
    return out


def _check(params: dict[str, Any], started: float, now: float) -> tuple[int, str]:
    from qwen_triage.deadline import Deadline, DeadlinePassed, armed

    # armed before the channels and the check are imported (a third of a fresh run's CPU): on a busy node
    # the imports alone can use up --timeout, and the answer must still come
    try:
        with armed(Deadline.after(started, params["timeout"])):
            return _check_armed(params, started, now)
    except DeadlinePassed:
        return _unknown(params["fmt"], params["max_output"], f"the --timeout of {params['timeout']:g} s passed "
                        "while starting", now)


def _unknown(fmt: str, max_output: int, reason: str, now: float, said: bool = False) -> tuple[int, str]:
    """The answer of a check that could not say, in the format asked for (no channel but NPD's own words);
    ``said``: the reason is on stderr already."""
    from qwen_triage.fleet.npd import npd_failure

    if not said:
        click.echo(f"qwen-triage: {reason}", err=True)
    return pick(fmt, {
        "npd": lambda: npd_failure(reason, max_output),
        "json": lambda: (EXIT_UNKNOWN, json.dumps({"status": "unknown", "errors": [reason]})),
        "text": lambda: (EXIT_UNKNOWN, ""),
    })()


def _check_armed(params: dict[str, Any], started: float, now: float) -> tuple[int, str]:
    from qwen_triage.fleet.channels import build
    from qwen_triage.fleet.node_check import CheckFailed, CheckOptions, run

    npd = build("npd", max_output=params["max_output"])
    channels = _channels(params)
    fmt = params["fmt"]
    try:
        if params["textfile"] and not params["textfile"].endswith(".prom"):
            raise CheckFailed(f"--textfile {params['textfile']}: node_exporter reads *.prom files only")
        if params["slurm_resume"] and not params["slurm_drain"]:
            raise CheckFailed("--slurm-resume needs --slurm-drain")
        result = run(CheckOptions(
            started=started, now=now, kernel=params["kernel"], units=params["units"], files=params["files"],
            from_end=params["from_end"], state_dir=params["state_dir"], hold=params["hold"],
            max_bytes=params["max_bytes"], timeout=params["timeout"], rule_dirs=params["rule_dirs"],
            clear=params["clear_patterns"]))
    except CheckFailed as exc:
        reason = str(exc)
        click.echo(f"qwen-triage: {reason}", err=True)
        _say_errors([ch.failed(reason, now) for ch in channels])
        return _unknown(fmt, params["max_output"], reason, now, said=True)
    published = [ch.publish(result) for ch in channels]
    _say_errors(published)
    shown = result.select(params["class_patterns"])
    code = {"ok": EXIT_OK, "problem": EXIT_PROBLEM, "unknown": EXIT_UNKNOWN}[shown.status]
    return pick(fmt, {
        "npd": lambda: _status_and_text(npd.publish(shown)),
        "json": lambda: (code, shown.model_dump_json(by_alias=True, indent=2)),
        "text": lambda: (code, _text(shown, [p.text for p in published if p.text])),
    })()


def _status_and_text(published) -> tuple[int, str]:
    return published.status, published.text


def _say_errors(published: list) -> None:
    for p in published:
        if p.error:
            click.echo(f"qwen-triage: {p.error}", err=True)


def _age(now: float) -> float:
    """Seconds since this process started (0 when unknown)."""
    try:
        import psutil

        return min(max(now - psutil.Process().create_time(), 0.0), 60.0)
    except Exception:  # noqa: BLE001 - only a refinement of the deadline
        return 0.0


def _text(result, channel_lines: list[str]) -> str:
    """The check for a person: every line through the one sanitiser, since sources, summaries, source errors
    and notes all carry text from outside (a ``--file`` path may hold terminal escapes)."""
    from qwen_triage.textsafe import clean

    lines = [f"status: {result.status}"]
    for d in result.active:
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(d.first_seen))
        held = "until reboot" if d.until_boot else "hold"
        lines.append(f"  {d.severity:8} {d.class_} [{d.rule}] from {d.source}, since {since}, "
                     f"{d.count} time(s), {held}: {clean(d.summary)[:200]}")
    for d in result.cleared:
        lines.append(f"  cleared  {d.class_} from {d.source}")
    for s in result.sources:
        more = ", more left for the next run" if s.more else ""
        err = f", ERROR: {s.error}" if s.error else ""
        lines.append(f"  source {s.name} ({s.via}): {s.lines} new line(s), {s.bytes} bytes{more}{err}")
    for n in result.notes:
        lines.append(f"  note: {n}")
    lines += [f"  {line}" for line in channel_lines]
    return "\n".join(clean(line) for line in lines)


COMMANDS = [check]
