"""The words a text report always ends with: shared by the rich renderer and the plain fast path."""

from __future__ import annotations

from qwen_triage.report.model import Report, Stats, Unrecognised

NO_DIAGNOSIS = "nothing in these logs matches a known failure."
NOTHING_READ = (
    "the input held no log line (empty, or the journal had no entries): this says nothing about the server's "
    "health."
)
OBSERVATIONS = "not a cause on their own: notices, and lines that only relay an error printed before them"


def stats_line(s: Stats) -> str:
    return f"{s.lines} lines, {s.bytes} bytes in {s.seconds:.2f}s; {s.rules} rules ({s.prefilter} prefilter)"


def stalled(report: Report) -> Unrecognised | None:
    """The hang a report without a diagnosis is about, which heads it: its first stall (`run --stall`'s
    watchdog, or an input that ends repeating a heartbeat); None when it has a diagnosis or no stall."""
    if report.diagnoses:
        return None
    return next((u for u in report.unrecognised if u.kind == "stall"), None)
