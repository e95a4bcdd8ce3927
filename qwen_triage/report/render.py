"""Reports to text (rich) and Markdown. Formatting only: no decisions here."""

from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from qwen_triage.report.model import Diagnosis, Evidence, Observation, Report

MAX_SHOWN = 5
_SEVERITY_STYLE = {"critical": "bold white on red", "error": "bold red", "warning": "yellow", "info": "cyan"}


def _evidence_line(e: Evidence) -> str:
    cut = " [cut]" if e.truncated else ""
    text = e.text if len(e.text) <= 300 else e.text[:300] + "…"
    return f"{e.path}:{e.line}: {text}{cut}"


def _action_note(action: dict | None) -> str:
    if not action:
        return ""
    kind = action.get("type", "?")
    details = ", ".join(f"{k}={v}" for k, v in action.items() if k not in ("type", "safety") and v is not None)
    return f"  [{action.get('safety', '?')}: {kind}{' ' + details if details else ''}]"


def diagnosis_renderable(d: Diagnosis | Observation, number: int | None = None) -> Panel:
    parts: list[Text | str] = []
    head = Text()
    if number is not None:
        head.append(f"{number}. ", style="bold")
    head.append(f"[{d.severity.value}] ", style=_SEVERITY_STYLE.get(d.severity.value, ""))
    head.append(d.title, style="bold")
    head.append(f"  ({d.class_}, rule {d.rule}, seen {d.count}x)", style="dim")
    parts.append(head)
    parts.append(Text(d.summary))
    if d.facts:
        parts.append(Text("facts: " + ", ".join(f"{k}={v}" for k, v in d.facts.items()), style="dim"))
    parts.append(Text("evidence:", style="bold"))
    for e in d.evidence[:MAX_SHOWN]:
        parts.append(Text("  " + _evidence_line(e), overflow="fold"))
    if d.more_evidence:
        parts.append(Text(f"  +{d.more_evidence} more", style="dim"))
    if isinstance(d, Diagnosis):
        if d.symptoms:
            parts.append(Text("symptoms (consequences of this cause):", style="bold"))
            for s in d.symptoms:
                where = f" — {_evidence_line(s.evidence[0])}" if s.evidence else ""
                parts.append(Text(f"  • {s.class_}: {s.title} ({s.count}x){where}", overflow="fold"))
        if d.fix:
            parts.append(Text("fix:", style="bold green"))
            for i, f in enumerate(d.fix, 1):
                parts.append(Text(f"  {i}. {f.step}{_action_note(f.action)}", overflow="fold"))
    if d.references:
        parts.append(Text("references: " + " ".join(d.references), style="dim"))
    return Panel(Group(*parts), border_style=_SEVERITY_STYLE.get(d.severity.value, ""), expand=True)


def print_text(report: Report, console: Console) -> None:
    if report.diagnoses:
        console.print(f"[bold]{len(report.diagnoses)} diagnosis(es), root cause first[/bold]")
        for i, d in enumerate(report.diagnoses, 1):
            console.print(diagnosis_renderable(d, i))
    else:
        console.print("[green]No diagnosis:[/green] nothing in these logs matches a known failure.")
    if report.observations:
        console.print("[bold]observations[/bold] (benign, worth knowing):")
        for o in report.observations:
            first = f" — {_evidence_line(o.evidence[0])}" if o.evidence else ""
            console.print(Text(f"  • {o.title}: {o.summary} ({o.count}x){first}", overflow="fold"))
    for note in report.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    s = report.stats
    console.print(
        f"[dim]{s.lines} lines, {s.bytes} bytes in {s.seconds:.2f}s; {s.rules} rules "
        f"({s.prefilter} prefilter)[/dim]"
    )


def _md_escape_code(text: str) -> str:
    return text.replace("```", "'''")


def to_markdown(report: Report) -> str:
    out: list[str] = ["# qwen-triage report", ""]
    names = ", ".join(f"`{i.name}`" for i in report.inputs) or "(none)"
    out.append(f"Inputs: {names} — {report.stats.lines} lines, {report.tool}")
    out.append("")
    if not report.diagnoses:
        out += ["**No diagnosis**: nothing in these logs matches a known failure.", ""]
    for i, d in enumerate(report.diagnoses, 1):
        out.append(f"## {i}. {d.title} ({d.severity.value})")
        out.append("")
        out.append(f"- class: `{d.class_}` · rule: `{d.rule}` · seen {d.count}x")
        if d.facts:
            out.append("- facts: " + ", ".join(f"`{k}={v}`" for k, v in d.facts.items()))
        out += ["", d.summary, "", "**Evidence**", "", "```"]
        out += [_md_escape_code(_evidence_line(e)) for e in d.evidence[:MAX_SHOWN]]
        out.append("```")
        if d.more_evidence:
            out.append(f"+{d.more_evidence} more")
        if d.symptoms:
            out += ["", "**Symptoms** (consequences of this cause)", ""]
            for s in d.symptoms:
                where = f" — `{s.evidence[0].path}:{s.evidence[0].line}`" if s.evidence else ""
                out.append(f"- `{s.class_}`: {s.title} ({s.count}x){where}")
        if d.fix:
            out += ["", "**Fix**", ""]
            for n, f in enumerate(d.fix, 1):
                out.append(f"{n}. {f.step}{_action_note(f.action).replace('[', '`').replace(']', '`')}")
        if d.references:
            out += ["", "References: " + ", ".join(d.references)]
        out.append("")
    if report.observations:
        out += ["## Observations", ""]
        for o in report.observations:
            out.append(f"- {o.title}: {o.summary} ({o.count}x)")
        out.append("")
    for note in report.notes:
        out.append(f"> note: {note}")
    return "\n".join(out).rstrip() + "\n"
