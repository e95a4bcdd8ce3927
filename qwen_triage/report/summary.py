"""The words a text report always ends with: shared by the rich renderer and the plain fast path."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # a clean scan's two lines are written without the report model (Figures)
    from qwen_triage.report.model import PrintedBy, Report, Stats, Unrecognised

NO_DIAGNOSIS = "nothing in these logs matches a known failure."
NOTHING_READ = (
    "the input held no log line (empty, or the journal had no entries): this says nothing about the server's "
    "health."
)
OBSERVATIONS = "not a cause on their own: notices, and lines that only relay an error printed before them"


class Figures(NamedTuple):
    """A clean scan's figures, before (and instead of) a report: what its stats line says.

    A scan with nothing else to report (engine.scanner ``Scanner.clean_figures``) writes its two
    lines from these, so a small healthy log never imports the report model.
    """

    lines: int
    bytes: int
    seconds: float
    rules: int
    prefilter: str


def stats_line(s: Figures | Stats) -> str:
    return f"{s.lines} lines, {s.bytes} bytes in {s.seconds:.2f}s; {s.rules} rules ({s.prefilter} prefilter)"


def clean_text(s: Figures | Stats) -> str:
    """A report with nothing but its figures, as text (what rich would write to a pipe)."""
    return f"No diagnosis: {NO_DIAGNOSIS}\n{stats_line(s)}\n"


def stalled(report: Report) -> Unrecognised | None:
    """The hang a report without a diagnosis is about, which heads it: its first stall (`run --stall`'s
    watchdog, or an input that ends repeating a heartbeat); None when it has a diagnosis or no stall."""
    if report.diagnoses:
        return None
    return next((u for u in report.unrecognised if u.kind == "stall"), None)


def releases_span(releases: list[str]) -> str:
    """``0.8.0–0.11.0``: the oldest and newest pinned release that hold a template (one: itself)."""
    if not releases:
        return "?"
    return releases[0] if len(releases) == 1 else f"{releases[0]}–{releases[-1]}"


def printed_by_phrase(p: PrintedBy, code: Callable[[str], str] = lambda t: f"`{t}`") -> str:
    """``printed by vLLM `vllm/config/parallel.py` in `ParallelConfig.__post_init__` (0.8.0–0.11.0), configuration
    validation``: one wording for text and Markdown (``code``: how a name is set as code; the caller makes the rest
    safe for where it goes)."""
    where = code(p.file) + (f" in {code(p.function)}" if p.function else "")
    family = f", {p.family}" if p.family else ""
    verb = "printed by" if p.template else "raised in"  # no template: placed by its traceback's raising frame
    span = f" ({releases_span(p.releases)})" if p.releases else ""  # a code table's or a script's: no release
    return f"{verb} {p.display or p.program} {where}{span}{family}"
