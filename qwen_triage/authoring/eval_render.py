"""The eval result as text (rich) and Markdown."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from qwen_triage.authoring.evaluate import EvalResult
from qwen_triage.report.markdown import md_code, md_escape
from qwen_triage.report.text import escape


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.0f}%"


def print_eval(r: EvalResult, console: Console) -> None:
    table = Table(title="per class (top-1)")
    for col in ("class", "support", "precision", "recall"):
        table.add_column(col)
    for cid, s in r.per_class.items():
        table.add_row(escape(cid), str(s.support), _pct(s.precision), _pct(s.recall))
    console.print(table)
    if r.misses:
        console.print("[bold]misses[/bold]")
        for m in r.misses:
            tag = " (evidence inferred)" if m.inferred else ""
            got = m.got or ("unrecognised errors only" if m.unrecognised else "nothing (silent)")
            console.print(f"  {escape(m.id)}: expected {escape(str(m.expect[:1] or 'no diagnosis'))}, "
                          f"got {escape(str(got))}{tag}")
    console.print(
        f"healthy logs with a diagnosis: {r.healthy_with_diagnoses} of {r.healthy_cases}; "
        f"evidence-inferred cases right: {r.inferred_correct} of {r.inferred_cases}; "
        f"failing logs with an empty report: {r.silent}"
    )
    console.print(f"top-1 accuracy: {r.correct}/{r.cases} = {r.accuracy * 100:.1f}%")


def eval_markdown(r: EvalResult) -> str:
    lines = ["| class | support | precision | recall |", "|---|---|---|---|"]
    for cid, s in r.per_class.items():
        cell = md_code(cid).replace("|", "\\|")  # a table cell: GFM splits on | even in a code span
        lines.append(f"| {cell} | {s.support} | {_pct(s.precision)} | {_pct(s.recall)} |")
    lines.append("")
    if r.misses:
        lines.append("Misses:")
        lines.append("")
        for m in r.misses:
            lines.append(f"- {md_code(m.id)}: expected {md_escape(str(m.expect[:1] or 'no diagnosis'))}, "
                         f"got {md_escape(str(m.got or 'nothing'))}")
        lines.append("")
    lines.append(f"Healthy logs with a diagnosis: {r.healthy_with_diagnoses} of {r.healthy_cases}.")
    lines.append(f"Failing logs with an empty report: {r.silent}.")
    lines.append(f"Top-1 accuracy: {r.correct}/{r.cases} = {r.accuracy * 100:.1f}%")
    return "\n".join(lines) + "\n"
