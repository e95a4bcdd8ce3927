"""The words a text report always ends with: shared by the rich renderer and the plain fast path."""

from __future__ import annotations

from qwen_triage.report.model import Stats

NO_DIAGNOSIS = "nothing in these logs matches a known failure."


def stats_line(s: Stats) -> str:
    return f"{s.lines} lines, {s.bytes} bytes in {s.seconds:.2f}s; {s.rules} rules ({s.prefilter} prefilter)"
