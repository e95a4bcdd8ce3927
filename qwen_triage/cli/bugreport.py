"""`qwen-triage report`: one short, redacted Markdown (or JSON) file to attach to an issue."""

from __future__ import annotations

import sys

import click

from qwen_triage.cli.exiting import fail
from qwen_triage.cli.options import pack_options
from qwen_triage.inputs.helptext import KERNEL_WINDOW_SOURCES


def _markdown(result) -> str:
    from qwen_triage.bugreport.render import to_markdown

    return to_markdown(result)


def _json(result) -> str:
    from qwen_triage.bugreport.render import to_json

    return to_json(result)


RENDERERS = {"markdown": _markdown, "json": _json}  # `--format` offers these names

@click.command("report", short_help="One short, redacted file for a bug tracker: versions, doctor, triage.")
@click.argument("logs", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--journal", "units", multiple=True, metavar="UNIT", help="Triage this systemd unit's journal for this boot (repeatable).")
@click.option("--kernel", is_flag=True, help=f"Triage the kernel log since boot ({KERNEL_WINDOW_SOURCES}).")
@click.option("--format", "fmt", type=click.Choice(list(RENDERERS)), default="markdown", show_default=True)
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="Write here (mode 0600) instead of stdout.")
@click.option("--gpu-snapshot", type=click.Path(exists=True, dir_okay=False),
              help="Versions and GPUs from a recorded NVML snapshot (`doctor --record`) instead of this machine.")
@pack_options
def report(logs: tuple[str, ...], units: tuple[str, ...], kernel: bool, fmt: str, out_path: str | None,
           gpu_snapshot: str | None, rule_dirs: tuple[str, ...], engine: str) -> None:
    """Versions (this tool, driver and CUDA, torch, vLLM, Ollama, OS, container), the doctor summary and the
    triage of LOG files, units' journals and the kernel log — every section capped, secrets redacted.

    \b
      qwen-triage report server.log --out report.md
      qwen-triage report --journal vllm.service --kernel --format json
    """
    from qwen_triage.bugreport.collect import ReportOptions, run

    result = run(ReportOptions(logs=logs, units=units, kernel=kernel, gpu_snapshot=gpu_snapshot, rule_dirs=rule_dirs,
                               engine=engine))
    from qwen_triage.report.formats import pick

    text = pick(fmt, RENDERERS, default="markdown")(result)
    if out_path is None:
        sys.stdout.write(text)
        return
    from qwen_triage.atomicfile import write_atomic

    try:
        write_atomic(out_path, text, mode=0o600)  # logs and environments, redacted or not: the owner's alone
    except OSError as exc:
        fail(f"{out_path}: {exc.strerror or exc}")
    click.echo(f"wrote {out_path} ({len(text.encode())} bytes)", err=True)


COMMANDS = [report]
