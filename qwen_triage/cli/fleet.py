"""`qwen-triage check`: one incremental node check, for node-problem-detector, Prometheus and Slurm."""

from __future__ import annotations

import json
import os
import sys
import time

import click

from qwen_triage.exits import EXIT_OK, EXIT_PROBLEM, EXIT_UNKNOWN
from qwen_triage.inputs.helptext import KERNEL_CHECK_SOURCES
from qwen_triage.report.formats import pick



STATE_ENV = "QWEN_TRIAGE_STATE"  # the state directory, as the Slurm wrapper's setting of the same name


def default_state_dir() -> str:
    if os.environ.get(STATE_ENV):
        return os.environ[STATE_ENV]
    if os.geteuid() == 0:
        return "/var/lib/qwen-triage"
    from platformdirs import user_state_dir

    return user_state_dir("qwen-triage")


@click.command("check", short_help="One incremental node check (node-problem-detector, node_exporter, Slurm).")
@click.option("--kernel", is_flag=True, help=f"Read the kernel log ({KERNEL_CHECK_SOURCES}).")
@click.option("--journal", "units", metavar="UNIT", multiple=True, help="Read a systemd unit's journal (repeatable).")
@click.option("--file", "files", metavar="PATH", multiple=True, help="Read a log file (repeatable); rotation and "
              "truncation are followed.")
@click.option("--state", "state_dir", metavar="DIR", default=None,
              help="Where positions and active diagnoses are kept [default: $QWEN_TRIAGE_STATE, else "
                   "/var/lib/qwen-triage as root, else the user state directory].")
@click.option("--format", "fmt", type=click.Choice(["npd", "text", "json"]), default="text", show_default=True,
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
              help="Stop reading this long after the process started; the rest is left for the next run.")
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
def check(kernel: bool, units: tuple[str, ...], files: tuple[str, ...], state_dir: str | None, fmt: str,
          textfile: str | None, slurm_drain: bool, slurm_resume: bool, node_name: str | None, hold: float,
          max_bytes: int, timeout: float, max_output: int, class_patterns: tuple[str, ...], from_end: bool,
          rule_dirs: tuple[str, ...], clear_patterns: tuple[str, ...]) -> None:
    """Read what is new in the node's logs since the last check and report the active diagnoses.

    Exit status: 0 nothing active, 1 an active diagnosis, 2 could not check (as node-problem-detector reads it).
    """
    now = time.time()
    started = time.perf_counter() - _age(now)  # --timeout counts from the process start, imports included
    code, text = _check(kernel, units, files, state_dir, fmt, textfile, slurm_drain, slurm_resume, node_name, hold,
                        max_bytes, timeout, max_output, class_patterns, from_end, rule_dirs, started, now,
                        clear_patterns)
    if text:
        click.echo(text)
    sys.exit(code)


def _check(kernel, units, files, state_dir, fmt, textfile, slurm_drain, slurm_resume, node_name, hold,
           max_bytes, timeout, max_output, class_patterns, from_end, rule_dirs, started, now, clear_patterns=()):
    from qwen_triage.fleet import npd
    from qwen_triage.fleet.check import CheckConfig, run_check, stored_result
    from qwen_triage.inputs.base import Reader
    from qwen_triage.inputs.registry import build
    from qwen_triage.fleet.state import StateError, StateLocked, StateStore, read_boot_id
    from qwen_triage.fleet.textfile import failure_text, render, write_textfile

    def failed(reason: str) -> tuple[int, str]:
        click.echo(f"qwen-triage: {reason}", err=True)
        if textfile:
            try:
                write_textfile(textfile, failure_text(now))
            except (OSError, ValueError) as exc:
                click.echo(f"qwen-triage: cannot write {textfile}: {exc}", err=True)
        return pick(fmt, {
            "npd": lambda: npd.npd_failure(reason, max_output),
            "json": lambda: (EXIT_UNKNOWN, json.dumps({"status": "unknown", "errors": [reason]})),
            "text": lambda: (EXIT_UNKNOWN, ""),
        })()

    if textfile and not textfile.endswith(".prom"):
        return failed(f"--textfile {textfile}: node_exporter reads *.prom files only")
    if slurm_resume and not slurm_drain:
        return failed("--slurm-resume needs --slurm-drain")
    readers: list[Reader] = []
    if kernel:
        readers.append(build("kernel"))
    readers += [build("journal", u) for u in units]
    readers += [build("file", f, from_end=from_end) for f in files]
    if not readers and not clear_patterns:
        return failed("nothing to check: give --kernel, --journal UNIT or --file PATH")
    state_path = state_dir or default_state_dir()
    store = StateStore(state_path)
    try:
        store.prepare()
    except StateError as exc:
        return failed(str(exc))
    if not os.environ.get("XDG_CACHE_HOME"):
        # The compiled rule pack (Hyperscan database) is cached beside the state: a check compiles it once
        # (seconds), not on every run, even where the home directory is read-only or absent (containers).
        os.environ["XDG_CACHE_HOME"] = os.path.join(state_path, "cache")
    try:
        # --timeout covers loading too: a fresh node's first checks answer "unknown" in time, keep what they
        # validated in the cache and continue from it, so a check under node-problem-detector warms up
        compiled = _compile(rule_dirs, deadline=started + max(timeout - 1.0, timeout / 2))
    except Exception as exc:  # a broken rule pack must still answer "unknown", not crash the plugin
        return failed(f"cannot load the rules: {exc}")
    boot_id = read_boot_id()
    try:
        with store.locked(timeout=min(1.5, timeout / 2)):
            state = store.load()
            by_hand = clear_by_hand(state, clear_patterns)
            if readers:
                result = run_check(readers, state, compiled, CheckConfig(hold=hold, max_bytes=max_bytes,
                                                                         timeout=timeout), boot_id, now=now, started=started)
            else:  # `--clear` alone: let go, and say (and write to --textfile) what is still active
                result = stored_result(state, CheckConfig(hold=hold), boot_id, "no source read: --clear only", now)
            result.notes[:0] = store.notes
            result.cleared[:0] = by_hand
            result.notes += [f"cleared by hand: {d.class_} from {d.source}" for d in by_hand]
            store.save(state)
    except StateLocked as exc:
        # another check (an NPD condition of its own, the Slurm health check) is reading right now: answer
        # from the state it last saved instead of waiting past the caller's timeout
        state = store.load()
        result = stored_result(state, CheckConfig(hold=hold), boot_id, f"{exc}; reported the stored state")
        textfile = None  # the check that holds the lock writes the metrics
    except StateError as exc:
        return failed(str(exc))
    except OSError as exc:
        return failed(f"state directory {store.dir}: {exc.strerror or exc}")
    if textfile:
        try:
            write_textfile(textfile, render(result))
        except OSError as exc:
            click.echo(f"qwen-triage: cannot write {textfile}: {exc.strerror}", err=True)
    slurm_line = ""
    if slurm_drain:
        from qwen_triage.fleet import slurm

        # resume only on a complete reading: a source that could not be read may hold the evidence
        outcome = slurm.apply(result.active, slurm.node_name(node_name),
                              resume=slurm_resume and not result.errors and result.status != "unknown")
        slurm_line = f"slurm: node {outcome.node}: {outcome.action}" + (f" ({outcome.detail})" if outcome.detail else "")
        if outcome.action == "error":
            click.echo(f"qwen-triage: {slurm_line}", err=True)
    shown = result.select(class_patterns)
    code = {"ok": EXIT_OK, "problem": EXIT_PROBLEM, "unknown": EXIT_UNKNOWN}[shown.status]
    return pick(fmt, {
        "npd": lambda: npd.npd_output(shown, max_output),
        "json": lambda: (code, shown.model_dump_json(by_alias=True, indent=2)),
        "text": lambda: (code, _text(shown, slurm_line)),
    })()


def clear_by_hand(state, patterns: tuple[str, ...]):
    """Drop the active diagnoses whose class matches one of ``patterns``; the dropped ones.

    For a node repaired without a reboot (a GPU reset, a reseated cable): hardware classes are
    otherwise held until the boot id changes. Positions are kept, so the evidence already read
    is not read again; a new Xid raises the class again.
    """
    from fnmatch import fnmatchcase

    dropped = []
    for key, d in list(state.active.items()):
        if any(fnmatchcase(d.class_, p) for p in patterns):
            dropped.append(state.active.pop(key))
    return dropped


def _age(now: float) -> float:
    """Seconds since this process started (0 when unknown)."""
    try:
        import psutil

        return min(max(now - psutil.Process().create_time(), 0.0), 60.0)
    except Exception:  # noqa: BLE001 - only a refinement of the deadline
        return 0.0


def _compile(rule_dirs: tuple[str, ...], deadline: float | None = None):
    from qwen_triage.engine.scanner import compile_pack

    return compile_pack(rule_dirs, deadline=deadline)


def _text(result, slurm_line: str) -> str:
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
    if slurm_line:
        lines.append(f"  {slurm_line}")
    return "\n".join(clean(line) for line in lines)


COMMANDS = [check]
