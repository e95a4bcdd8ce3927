"""A report written in the format asked for: the one switch over text, JSON and Markdown."""

from __future__ import annotations

import sys
from typing import IO

from qwen_triage.report.model import Report
from qwen_triage.report.summary import NO_DIAGNOSIS, stats_line

FORMATS = ("text", "json", "markdown")


PLAIN_WIDTH = 80  # rich's width when it writes to a pipe: shorter lines come out as they are


def plain_summary(report: Report) -> str | None:
    """What ``report.text.print_text`` writes to a pipe for a clean scan, without importing rich.

    The common scheduled health check: two plain lines. None when there is anything
    rich would style or lay out — a diagnosis, an observation, an unrecognised error,
    a note, or a line rich would wrap (a test keeps the two byte-identical).
    """
    if report.diagnoses or report.observations or report.unrecognised or report.notes:
        return None
    lines = [f"No diagnosis: {NO_DIAGNOSIS}", stats_line(report.stats)]
    if any(len(line) > PLAIN_WIDTH for line in lines):
        return None
    return "\n".join(lines) + "\n"


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def emit_report(report: Report, fmt: str, stream: IO[str] | None = None) -> None:
    stream = stream or sys.stdout
    if fmt == "json":
        from qwen_triage.textsafe import json_safe

        stream.write(json_safe(report.to_json()) + "\n")  # same data; no C1 or bidi control on a terminal
    elif fmt == "markdown":
        from qwen_triage.report.markdown import to_markdown

        stream.write(to_markdown(report))
    else:
        plain = None if _isatty(stream) else plain_summary(report)
        if plain is not None:  # nothing to lay out: the same bytes rich would write, without importing it
            stream.write(plain)
        else:
            from rich.console import Console

            from qwen_triage.report.text import print_text

            print_text(report, Console(file=stream, highlight=False, soft_wrap=False))
    stream.flush()
