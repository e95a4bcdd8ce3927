"""A report written in the format asked for: the one switch over text, JSON and Markdown."""

from __future__ import annotations

import sys
from typing import IO

from qwen_triage.report.model import Report

FORMATS = ("text", "json", "markdown")


def emit_report(report: Report, fmt: str, stream: IO[str] | None = None) -> None:
    stream = stream or sys.stdout
    if fmt == "json":
        stream.write(report.to_json() + "\n")
    elif fmt == "markdown":
        from qwen_triage.report.markdown import to_markdown

        stream.write(to_markdown(report))
    else:
        from rich.console import Console

        from qwen_triage.report.text import print_text

        print_text(report, Console(file=stream, highlight=False, soft_wrap=False))
    stream.flush()
