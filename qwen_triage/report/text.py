"""Diagnoses and observations as text: the one place that words them for a terminal or a plain log.

Three layouts of the same models, for three readers: a panel per diagnosis
(``scan``, and the live commands as each diagnosis appears; unboxed and never
wrapped when the text goes to a pipe or a file, so that ``grep`` finds whole
lines: :func:`text_console`), a compact list
(preflight's ``plan``, ``check-model`` and ``doctor``, under their own tables),
and a brief two-line form (``relaunch``'s plain transcript). Formatting only:
no decisions here; what to show is the caller's choice.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import IO

from rich.console import Console, Group
from rich.markup import escape as _markup_escape
from rich.panel import Panel
from rich.text import Text

from qwen_triage.report.model import Diagnosis, Evidence, Hang, Observation, Report, Unrecognised
from qwen_triage.report.summary import NO_DIAGNOSIS, NOTHING_READ, OBSERVATIONS, printed_by_phrase, stalled, stats_line
from qwen_triage.rulepack.severity import Severity
from qwen_triage.textsafe import clean

MAX_SHOWN = 5
SEVERITY_STYLE = {"critical": "bold white on red", "error": "bold red", "warning": "yellow", "info": "cyan"}

# Every string of a report came from outside (a log, a rule pack, another process): each one
# goes through textsafe.clean here, so no escape sequence or control character reaches a terminal.


def escape(text: str) -> str:
    """Outside text for rich markup: no markup, no control character."""
    return _markup_escape(clean(text))


def text_console(stream: IO[str], terminal: bool) -> Console:
    """The console a text report is printed on: laid out for the terminal's width on a terminal;
    elsewhere (a pipe, a file) every line whole, as long as it is, so ``grep`` finds it."""
    if terminal:
        return Console(file=stream, highlight=False, soft_wrap=False)
    return Console(file=stream, highlight=False, soft_wrap=True, force_terminal=False)


# --- words shared by every layout (and by Markdown) ----------------------------------------


def evidence_line(e: Evidence) -> str:
    cut = " [cut]" if e.truncated else ""
    text = e.text if len(e.text) <= 300 else e.text[:300] + "…"
    return clean(f"{e.path}:{e.line}: {text}{cut}")


def action_note(action: dict | None) -> str:
    """A fix step's structured action in brackets, safety class first; empty when there is none."""
    if not action:
        return ""
    kind = action.get("type", "?")
    # a value whose optional part `[[…]]` was dropped (its fact unset) is empty: left out, as an unset one is
    details = ", ".join(f"{k}={v}" for k, v in action.items() if k not in ("type", "safety") and v not in (None, ""))
    return clean(f"[{action.get('safety', '?')}: {kind}{' ' + details if details else ''}]")


def symptom_line(severity: Severity, title: str, class_: str, root: Diagnosis | None) -> str:
    """A symptom announced on its own (live): what it is, and the diagnosis it is a consequence of."""
    cause = f" — a consequence of: {root.title} ({root.class_})" if root else ""
    return clean(f"also [{severity.value}] {title} ({class_}){cause}")


# --- panels: scan and live -----------------------------------------------------------------


def diagnosis_renderable(d: Diagnosis | Observation, number: int | None = None, boxed: bool = True) -> Panel | Group:
    """A diagnosis as a panel; ``boxed=False``: the same lines without the box, the body indented, none wrapped."""
    parts: list[Text | str] = []
    head = Text()
    if number is not None:
        head.append(f"{number}. ", style="bold")
    head.append(f"[{d.severity.value}] ", style=SEVERITY_STYLE.get(d.severity.value, ""))
    head.append(clean(d.title), style="bold")
    head.append(clean(f"  ({d.class_}, rule {d.rule}, seen {d.count}x)"), style="dim")
    parts.append(head)
    if isinstance(d, Diagnosis) and d.printed_by is not None:
        why = "no rule explains this line; the message catalogue places it: "
        parts.append(Text(clean(why + printed_by_phrase(d.printed_by)), style="dim", overflow="fold"))
    parts.append(Text(clean(d.summary, newlines=True)))
    if d.facts:
        parts.append(Text(clean("facts: " + ", ".join(f"{k}={v}" for k, v in d.facts.items())), style="dim"))
    parts.append(Text("evidence:", style="bold"))
    for e in d.evidence[:MAX_SHOWN]:
        parts.append(Text("  " + evidence_line(e), overflow="fold"))
    if d.more_evidence:
        parts.append(Text(f"  +{d.more_evidence} more", style="dim"))
    if isinstance(d, Diagnosis):
        if d.symptoms:
            parts.append(Text("symptoms (consequences of this cause):", style="bold"))
            for s in d.symptoms:
                where = f" — {evidence_line(s.evidence[0])}" if s.evidence else ""
                parts.append(Text(clean(f"  • {s.class_}: {s.title} ({s.count}x){where}"), overflow="fold"))
        if d.relayed:
            parts.append(Text("relayed by (lines that only pass this failure on):", style="bold"))
            for r in d.relayed:
                where = f" — {evidence_line(r.evidence[0])}" if r.evidence else ""
                parts.append(Text(clean(f"  • {r.title} ({r.count}x){where}"), overflow="fold"))
        if d.fix:
            parts.append(Text("fix:", style="bold green"))
            for i, f in enumerate(d.fix, 1):
                note = action_note(f.action)
                parts.append(Text(clean(f"  {i}. {f.step}{'  ' + note if note else ''}"), overflow="fold"))
    if d.references:
        parts.append(Text(clean("references: " + " ".join(d.references)), style="dim"))
    if not boxed:
        return Group(parts[0], *(Text.assemble("   ", p) for p in parts[1:]))
    return Panel(Group(*parts), border_style=SEVERITY_STYLE.get(d.severity.value, ""), expand=True)


MAX_UNRECOGNISED_SHOWN = 5  # beside diagnoses; alone, every listed template is shown


def unrecognised_line(u: Unrecognised) -> str:
    """`[exception in vllm] RuntimeError: … (3x) — path:line: text` — what, who, how often, where first."""
    who = f" in {u.raised_by}" if u.raised_by else (f" from {u.program}" if u.program else "")
    return clean(f"[{u.kind}{who}] {u.template} ({u.count}x) — {evidence_line(u.evidence)}")


def print_text(report: Report, console: Console, shown: Container[str] = (), boxed: bool = True) -> None:
    """The report as panels. ``shown``: classes whose panel the reader has just seen (live): one line each.

    ``boxed=False`` (a pipe or a file): diagnoses without their box, for a console that does not wrap.
    """
    if report.hang is not None:
        print_hang(report.hang, console)
    if report.diagnoses:
        console.print(f"[bold]{len(report.diagnoses)} diagnosis(es), root cause first[/bold]")
        for i, d in enumerate(report.diagnoses, 1):
            if d.class_ in shown:
                line = clean(f"{i}. [{d.severity.value}] {d.title} ({d.class_}, seen {d.count}x) — panel shown above")
                console.print(Text(line, overflow="fold"))
            else:
                console.print(diagnosis_renderable(d, i, boxed))
    elif (stall := stalled(report)) is not None:
        console.print(Text.assemble(("Stalled: ", "bold red"), clean(stall.template)
                                    + ". No known failure matched; what the logs show:", overflow="fold"))
    elif report.unrecognised:
        console.print("[bold yellow]No known failure matched[/bold yellow], but these logs report errors no rule explains:")
    elif report.nothing_read:
        console.print(f"[bold yellow]Nothing to read:[/bold yellow] {NOTHING_READ}")
    else:
        console.print(f"[green]No diagnosis:[/green] {NO_DIAGNOSIS}")
    if report.unrecognised:
        if report.diagnoses:
            console.print(f"[bold]other errors no rule explains[/bold] ({len(report.unrecognised)}):")
        for u in report.unrecognised[: MAX_UNRECOGNISED_SHOWN if report.diagnoses else None]:
            console.print(Text(f"  • {unrecognised_line(u)}", overflow="fold"))
            if u.printed_by is not None:
                console.print(Text(clean(f"      {printed_by_phrase(u.printed_by)}"), overflow="fold", style="dim"))
            if u.hint:
                console.print(Text(clean(f"      hint: {u.hint}"), overflow="fold", style="dim"))
        if not report.diagnoses:
            console.print("  [dim]`qwen-triage rules suggest LOG` drafts a rule for each of them.[/dim]")
    if report.observations:
        console.print(f"[bold]observations[/bold] ({OBSERVATIONS}):")
        for o in report.observations:
            first = f" — {evidence_line(o.evidence[0])}" if o.evidence else ""
            console.print(Text(clean(f"  • {o.title}: {o.summary} ({o.count}x){first}"), overflow="fold"))
    for note in report.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    console.print(f"[dim]{escape(stats_line(report.stats))}[/dim]")


def print_hang(hang: Hang, console: Console) -> None:
    """Who stopped first, then one row per rank (engine.hang)."""
    from qwen_triage.report.hangview import COLUMNS, clocks_line, headline, outlier_lines, row

    style = "bold red" if hang.culprit is not None else "bold yellow"
    console.print(Text(clean(headline(hang)), style=style, overflow="fold"))
    if (clocks := clocks_line(hang)) is not None:
        console.print(Text(clean(f"  {clocks}"), overflow="fold"))
    for line in outlier_lines(hang):
        console.print(Text(clean(f"  {line}"), overflow="fold"))
    for s in hang.suspects:
        console.print(Text(clean(f"  suspect rank {s.rank}: {s.why}"), overflow="fold"))
    rows = [COLUMNS] + [row(r) for r in hang.ranks]
    widths = [max(len(clean(r[i])) for r in rows) for i in range(len(COLUMNS) - 1)]
    for r in rows:
        cells = "  ".join(clean(v).ljust(w) for v, w in zip(r, widths, strict=False))
        console.print(Text(f"  {cells}  {clean(r[-1])}", overflow="ellipsis", no_wrap=True))


# --- compact list: preflight ---------------------------------------------------------------


def print_findings(
    c: Console, diagnoses: Sequence[Diagnosis], observations: Sequence[Observation], notes: Sequence[str]
) -> None:
    """Findings, observations and notes as a list, one severity-labelled entry per diagnosis."""
    if diagnoses:
        c.print()
        c.print(f"[bold]Findings ({len(diagnoses)})[/bold]")
    for d in diagnoses:
        sev = d.severity.value
        c.print(
            f"[{SEVERITY_STYLE[sev]}]{sev.upper():8}[/] [bold]{escape(d.class_)}[/bold]  {escape(d.title)}  "
            f"[dim]({escape(d.rule)})[/dim]"
        )
        c.print(f"         {escape(d.summary)}")
        for e in d.evidence:
            c.print(f"         [dim]evidence[/dim] {escape(e.path)}: {escape(e.text)}")
        if d.more_evidence:
            c.print(f"         [dim]... {d.more_evidence} more[/dim]")
        for s in d.symptoms:
            c.print(f"         [dim]explains[/dim] {escape(s.class_)} ({escape(s.title)})")
        for f in d.fix:
            action = f" [dim]{escape(action_note(f.action))}[/dim]" if f.action else ""
            c.print(f"         [green]fix[/green] {escape(f.step)}{action}")
    if observations:
        c.print()
        c.print("[bold]Observations[/bold]")
        for o in observations:
            c.print(f"[cyan]info[/cyan]     {escape(o.summary)} [dim]({escape(o.rule)})[/dim]")
    if notes:
        c.print()
        for n in notes:
            c.print(f"[dim]note[/dim]     {escape(n)}")
    if not diagnoses:
        c.print()
        c.print("[green]No problems found.[/green]")


# --- brief: the runner's plain transcript ----------------------------------------------------


def headline(d: Diagnosis | Observation) -> str:
    """Severity, rule and title on one line; no markup."""
    return clean(f"{d.severity.value}: [{d.rule}] {d.title}")


def brief_lines(d: Diagnosis | Observation, indent: int = 2, detail_indent: int = 6) -> list[str]:
    """The :func:`headline`, and the summary indented under it."""

    def pad(text: str, n: int) -> list[str]:
        return [" " * n + ln for ln in text.splitlines() or [""]]

    lines = pad(headline(d), indent)
    if d.summary:
        lines += pad(clean(d.summary, newlines=True), detail_indent)
    return lines
