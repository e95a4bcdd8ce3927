"""The one output-format switch: a format name picks one of a command's renderers; its output is written.

Every command that offers ``--format`` (``scan``, ``plan``/``check-model``/
``doctor``, ``rules list``, ``eval`` …) hands :func:`write_format` one renderer
per format it has. A renderer gets the stream and either returns the text to
write or writes itself (rich consoles, ``click.echo``) and returns None. An
unknown name falls back to ``default`` (the human format), as ``--format``'s
choices already keep the name to known ones. Renderers import what they need
when called, so a JSON run never imports rich.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import IO, TypeVar

Renderer = Callable[[IO[str]], "str | None"]

JSONL = "jsonl"  # `scan`'s stream of reports (engine/batch.py): one JSON report per input, one per line
PLAIN = ("text", "json")  # the formats of a command whose output is a listing, not a report (rules lint, classes …)
CHECK = ("npd", *PLAIN)  # `check`: node-problem-detector's plugin answer, or a listing


R = TypeVar("R")


def pick(fmt: str, renderers: Mapping[str, R], *, default: str = "text") -> R:
    """The renderer for ``fmt`` (else ``default``'s): for a command whose output is not written at once
    (``check`` returns its exit status with its text, ``report`` may write to a file)."""
    return renderers.get(fmt) or renderers[default]


def write_format(fmt: str, renderers: Mapping[str, Renderer], stream: IO[str] | None = None,
                 *, default: str = "text") -> None:
    """Render in ``fmt`` (else ``default``) to ``stream`` (stdout when None), then flush it."""
    stream = stream or sys.stdout
    render = pick(fmt, renderers, default=default)
    text = render(stream)
    if text is not None:
        stream.write(text)
    stream.flush()


def json_renderer(dump: Callable[[], str]) -> Callable[[IO[str]], str]:
    """``dump()``'s JSON, one newline after it: the same data, with no C1 or bidi control for a terminal."""

    def render(stream: IO[str]) -> str:
        from qwen_triage.textsafe import json_safe

        return json_safe(dump()) + "\n"

    return render
