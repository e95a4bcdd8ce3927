"""The `hang` object (engine.hang) as words and a table, shared by the text and Markdown reports."""

from __future__ import annotations

from qwen_triage.report.model import Hang, HangRank

COLUMNS = ("rank", "host", "entered", "completed", "collective", "exit", "verdict", "last line")


def headline(hang: Hang) -> str:
    """One sentence: the culprit as the root cause, or why the logs cannot decide."""
    c = hang.culprit
    if c is not None:
        where = f" on host {c.host}" if c.host else ""
        what = f" in {c.collective}" if c.collective else " in collective" if c.seq is not None else ""
        seq = f" #{c.seq}" if c.seq is not None else ""
        who = f"rank {c.rank}{where}" if c.rank is not None else f"host {c.host}"
        return f"Hang: {who} stopped first{what}{seq} — {c.why}"
    if hang.suspects:
        ranks = ", ".join(str(s.rank) for s in hang.suspects)
        return f"Hang: {hang.summary}; suspects: rank(s) {ranks}"
    return f"Multi-rank job: {hang.summary}"


def clocks_line(hang: Hang) -> str | None:
    """The hosts' clocks as aligned (engine.clock): which host is the reference, how far each other is off."""
    if not hang.clocks:
        return None
    ref = next((c.host for c in hang.clocks if c.clock_offset_s == 0.0), hang.clocks[0].host)
    others = ", ".join(f"{c.host} {c.clock_offset_s:+.1f} s" for c in hang.clocks if c.host != ref)
    return f"Clocks aligned on host {ref} (from events every host logged): {others or 'no other host'}"


def outlier_lines(hang: Hang) -> list[str]:
    """Hosts unlike the others: another configuration printed, quiet first, or behind in the launch."""
    return [f"Outlier: host {o.host} went quiet first: {o.value}, while the other hosts {o.others}"
            if o.kind == "quiet" else
            f"Outlier: host {o.host} got only as far as '{o.value}' while every other host reached '{o.others}'"
            if o.kind == "stage" else
            f"Outlier: host {o.host} printed {o.what} {o.value} where every other host printed {o.others}"
            for o in hang.outliers]


def row(r: HangRank) -> tuple[str, ...]:
    def opt(v: object) -> str:
        return "" if v is None else str(v)

    last = f"{r.last_line.path}:{r.last_line.line}: {r.last_line.text}" if r.last_line else ""
    host = opt(r.host) + (f" (local {r.local_rank})" if r.local_rank is not None and r.local_rank != r.rank else "")
    return (str(r.rank), host, opt(r.entered), opt(r.completed), opt(r.collective), opt(r.exitcode), r.verdict,
            last[:160])
