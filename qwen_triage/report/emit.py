"""A report written in the format asked for: its renderers, one per format name, for the one switch (report/formats.py).

:data:`RENDERERS` is the table; the names a command offers (``--format``) are its keys,
:data:`FORMATS`. Light to import (the command line reads the names before any report exists):
the model, rich and the Markdown writer are imported by the renderer that needs them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from functools import partial
from typing import IO, TYPE_CHECKING

from qwen_triage.report.formats import json_renderer, write_format

if TYPE_CHECKING:
    from qwen_triage.report.model import Report, Stats
    from qwen_triage.report.summary import Figures


def plain_summary(report: Report) -> str | None:
    """What ``report.text.print_text`` writes to a pipe for a clean scan, without importing rich.

    The common scheduled health check: two plain lines (never wrapped: nothing written to a
    pipe is). None when there is anything rich would style or lay out — a diagnosis, an
    observation, an unrecognised error, a note, an input with nothing in it, a multi-rank job's
    picture (a test keeps the two byte-identical).
    """
    from qwen_triage.report.summary import clean_text

    if report.diagnoses or report.observations or report.unrecognised or report.notes or report.nothing_read \
            or report.hang is not None:
        return None
    return clean_text(report.stats)


def clean_text_will_do(fmt: str, stream: IO[str] | None = None) -> bool:
    """Whether a clean scan's report in ``fmt`` on ``stream`` (stdout) is :func:`plain_summary`'s two lines, which
    its figures alone give (:func:`emit_clean`): text to a pipe or a file, not JSON, Markdown or a terminal."""
    return fmt == "text" and not _isatty(stream or sys.stdout)


def emit_clean(figures: Figures | Stats, stream: IO[str] | None = None) -> None:
    """A clean scan's text from its figures alone, the report never built (``engine.scan.run`` with
    ``figures_enough``): the bytes :func:`plain_summary` gives for its report."""
    from qwen_triage.report.summary import clean_text

    write_format("text", {"text": lambda _: clean_text(figures)}, stream)


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _text(report: Report, stream: IO[str]) -> str | None:
    terminal = _isatty(stream)
    plain = None if terminal else plain_summary(report)
    if plain is not None:  # nothing to lay out: the same bytes rich would write, without importing it
        return plain
    from qwen_triage.report.text import print_text, text_console

    # wrapped to the width only on a terminal: a pipe or a file gets whole lines, for grep
    print_text(report, text_console(stream, terminal), boxed=terminal)
    return None


def _markdown(report: Report, _stream: IO[str]) -> str:
    from qwen_triage.report.markdown import to_markdown

    return to_markdown(report)


def _json(report: Report, stream: IO[str]) -> str:
    return json_renderer(report.to_json)(stream)


RENDERERS: Mapping[str, Callable[[Report, IO[str]], str | None]] = {
    "text": _text,
    "json": _json,
    "markdown": _markdown,
}
FORMATS = tuple(RENDERERS)  # what `--format` offers for a report


def emit_report(report: Report, fmt: str, stream: IO[str] | None = None) -> None:
    write_format(fmt, {name: partial(render, report) for name, render in RENDERERS.items()}, stream)
