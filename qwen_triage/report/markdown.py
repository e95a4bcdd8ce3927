"""Diagnoses and observations as Markdown: the scan report, and the findings section of preflight's pages.

Markdown escaping lives in :func:`md_escape`, the one helper every Markdown
writer of the package uses. Formatting only: no decisions here.
"""

from __future__ import annotations

from collections.abc import Sequence

from qwen_triage.report.model import Diagnosis, Observation, Report
from qwen_triage.report.text import MAX_SHOWN, action_note, evidence_line


def md_escape(text: str, *, code: bool = False) -> str:
    """Text made safe for where it goes: inside a fenced code block (``code``), or a table cell / inline."""
    if code:
        # A fence inside the block would end it early.
        return text.replace("```", "'''")
    return text.replace("|", "\\|").replace("\n", " ")


def _fix_note(action: dict | None) -> str:
    note = action_note(action)
    return ("  " + note).replace("[", "`").replace("]", "`") if note else ""


def to_markdown(report: Report) -> str:
    out: list[str] = ["# qwen-triage report", ""]
    names = ", ".join(f"`{i.name}`" for i in report.inputs) or "(none)"
    out.append(f"Inputs: {names} — {report.stats.lines} lines, {report.tool}")
    out.append("")
    if not report.diagnoses and report.unrecognised:
        out += ["**No known failure matched**, but these logs report errors no rule explains.", ""]
    elif not report.diagnoses:
        out += ["**No diagnosis**: nothing in these logs matches a known failure.", ""]
    for i, d in enumerate(report.diagnoses, 1):
        out.append(f"## {i}. {d.title} ({d.severity.value})")
        out.append("")
        out.append(f"- class: `{d.class_}` · rule: `{d.rule}` · seen {d.count}x")
        if d.facts:
            out.append("- facts: " + ", ".join(f"`{k}={v}`" for k, v in d.facts.items()))
        out += ["", d.summary, "", "**Evidence**", "", "```"]
        out += [md_escape(evidence_line(e), code=True) for e in d.evidence[:MAX_SHOWN]]
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
                out.append(f"{n}. {f.step}{_fix_note(f.action)}")
        if d.references:
            out += ["", "References: " + ", ".join(d.references)]
        out.append("")
    if report.unrecognised:
        out += ["## Errors no rule explains" if not report.diagnoses else "## Other errors no rule explains", ""]
        for u in report.unrecognised:
            who = f" in `{md_escape(u.raised_by)}`" if u.raised_by else ""
            out.append(f"- {u.kind}{who}, {u.count}x, first at `{md_escape(u.evidence.path)}:{u.evidence.line}`:")
            out += ["", "  ```", "  " + md_escape(u.template, code=True), "  ```"]
            if u.hint:
                out.append(f"  hint: {md_escape(u.hint)}")
        out.append("")
    if report.observations:
        out += ["## Observations", ""]
        for o in report.observations:
            out.append(f"- {o.title}: {o.summary} ({o.count}x)")
        out.append("")
    for note in report.notes:
        out.append(f"> note: {note}")
    return "\n".join(out).rstrip() + "\n"


def findings_markdown(
    diagnoses: Sequence[Diagnosis], observations: Sequence[Observation], notes: Sequence[str]
) -> list[str]:
    """A "Findings" section (then observations and notes), the lines to append to a page."""
    out = [""]
    out.append(f"## Findings ({len(diagnoses)})" if diagnoses else "## Findings\n\nNo problems found.")
    for d in diagnoses:
        out.append("")
        out.append(f"### {d.severity.value.upper()}: `{d.class_}` — {d.title}")
        out.append("")
        out.append(d.summary)
        out.append("")
        for e in d.evidence:
            out.append(f"- evidence: `{e.path}`: {e.text}")
        for s in d.symptoms:
            out.append(f"- explains: `{s.class_}` ({s.title})")
        for f in d.fix:
            out.append(f"- fix: {f.step} {('`' + action_note(f.action) + '`') if f.action else ''}".rstrip())
        out.append(f"- rule: `{d.rule}`")
    if observations:
        out.append("")
        out.append("## Observations")
        out.append("")
        out += [f"- {o.summary} (`{o.rule}`)" for o in observations]
    if notes:
        out.append("")
        out.append("## Notes")
        out.append("")
        out += [f"- {n}" for n in notes]
    return out
