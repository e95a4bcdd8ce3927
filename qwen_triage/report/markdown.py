"""Diagnoses and observations as Markdown: the scan report, and the findings section of preflight's pages.

Markdown escaping lives in :func:`md_escape`, the one helper every Markdown
writer of the package uses. Formatting only: no decisions here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from qwen_triage.report.model import Diagnosis, Hang, Observation, PrintedBy, Report
from qwen_triage.report.summary import NO_DIAGNOSIS, NOTHING_READ, OBSERVATIONS, printed_by_phrase, stalled
from qwen_triage.report.text import MAX_SHOWN, action_note, evidence_line
from qwen_triage.textsafe import clean

_INLINE_SPECIAL = re.compile(r"([\\`*_\[\]<>|~!&])")
_LINE_START = re.compile(r"^(\s*)(?:([#>+=-])|(\d{1,9})([.)]))")
_FENCE_BREAK = re.compile(r"`{3,}|~{3,}")


def md_escape(text: str, *, code: bool = False) -> str:
    """Text from outside (a log, a process, a rule pack) made inert where it goes in Markdown.

    Inline (the default): one line (CR, LF and every control character go,
    :func:`qwen_triage.textsafe.clean`), Markdown punctuation and HTML backslash-escaped
    (a backtick cannot open a code span, ``<img …>`` is no tag, ``|`` no table cell),
    and a leading ``#``, ``>``, ``-``, ``+``, ``=`` or ``1.`` escaped, so a value that
    lands at the start of a line makes no heading, quote or list item.

    ``code``: for a line inside a fenced block: one line, no control character, and no
    run of three backticks or tildes that would end the fence early.
    """
    text = clean(text)
    if code:
        return _FENCE_BREAK.sub(lambda m: "'" * len(m[0]), text)
    text = _INLINE_SPECIAL.sub(r"\\\1", text)
    return _LINE_START.sub(
        lambda m: m[1] + ("\\" + m[2] if m[2] else m[3] + "\\" + m[4]), text, count=1
    )


def md_code(text: str) -> str:
    """``text`` as an inline code span, whatever backticks it holds (CommonMark: a longer fence)."""
    text = clean(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _printed_by(p: PrintedBy) -> str:
    """The catalogue's "printed by …" phrase, every value from the catalogue escaped or set as code."""
    safe = replace(p, display=md_escape(p.display or p.program), family=p.family and md_escape(p.family),
                   releases=[md_escape(r) for r in p.releases])
    return printed_by_phrase(safe, md_code)


def _fix_note(action: dict | None) -> str:
    note = action_note(action)
    return ("  " + md_code(note[1:-1])) if note else ""


def hang_markdown(hang: Hang) -> list[str]:
    """The culprit first (the root cause of a hang), then the per-rank table (also `report`'s)."""
    from qwen_triage.report.hangview import COLUMNS, clocks_line, headline, outlier_lines, row

    out = ["## Hang: who stopped first", "", f"**{md_escape(headline(hang))}**", ""]
    if (clocks := clocks_line(hang)) is not None:
        out += [md_escape(clocks), ""]
    out += [f"- {md_escape(line)}" for line in outlier_lines(hang)] + ([""] if hang.outliers else [])
    for s in hang.suspects:
        out.append(f"- suspect rank {s.rank}: {md_escape(s.why)}")
    if hang.suspects:
        out.append("")
    out.append("| " + " | ".join(COLUMNS) + " |")
    out.append("|" + "---|" * len(COLUMNS))
    for r in hang.ranks:
        cells = [md_escape(v) for v in row(r)]  # `|` escaped too: no value splits a cell
        out.append("| " + " | ".join(cells) + " |")
    return out + [""]


def to_markdown(report: Report) -> str:
    """The scan report as Markdown. Every value from a log (or a rule pack) goes through
    :func:`md_escape`, :func:`md_code` or a fence: none can add a heading, a list item or HTML."""
    esc = md_escape
    out: list[str] = ["# qwen-triage report", ""]
    names = ", ".join(md_code(i.name) for i in report.inputs) or "(none)"
    out.append(f"Inputs: {names} — {report.stats.lines} lines, {esc(report.tool)}")
    out.append("")
    if report.hang is not None:
        out += hang_markdown(report.hang)
    if (stall := stalled(report)) is not None:
        out += [f"**Stalled**: {esc(stall.template)}. No known failure matched; what the logs show is below.", ""]
    elif not report.diagnoses and report.unrecognised:
        out += ["**No known failure matched**, but these logs report errors no rule explains.", ""]
    elif not report.diagnoses and report.nothing_read:
        out += [f"**Nothing to read**: {NOTHING_READ}", ""]
    elif not report.diagnoses:
        out += [f"**No diagnosis**: {NO_DIAGNOSIS}", ""]
    for i, d in enumerate(report.diagnoses, 1):
        out.append(f"## {i}. {esc(d.title)} ({d.severity.value})")
        out.append("")
        out.append(f"- class: {md_code(d.class_)} · rule: {md_code(d.rule)} · seen {d.count}x")
        if d.printed_by is not None:
            out.append(f"- because: no rule explains the line; the message catalogue places it: "
                       f"{_printed_by(d.printed_by)}")
        if d.facts:
            out.append("- facts: " + ", ".join(md_code(f"{k}={v}") for k, v in d.facts.items()))
        out += ["", esc(d.summary), "", "**Evidence**", "", "```"]
        out += [md_escape(evidence_line(e), code=True) for e in d.evidence[:MAX_SHOWN]]
        out.append("```")
        if d.more_evidence:
            out.append(f"+{d.more_evidence} more")
        if d.symptoms:
            out += ["", "**Symptoms** (consequences of this cause)", ""]
            for s in d.symptoms:
                where = f" — {md_code(f'{s.evidence[0].path}:{s.evidence[0].line}')}" if s.evidence else ""
                out.append(f"- {md_code(s.class_)}: {esc(s.title)} ({s.count}x){where}")
        if d.relayed:
            out += ["", "**Relayed by** (lines that only pass this failure on)", ""]
            for r in d.relayed:
                where = f" — {md_code(f'{r.evidence[0].path}:{r.evidence[0].line}')}" if r.evidence else ""
                out.append(f"- {esc(r.title)} ({r.count}x){where}")
        if d.fix:
            out += ["", "**Fix**", ""]
            for n, f in enumerate(d.fix, 1):
                out.append(f"{n}. {esc(f.step)}{_fix_note(f.action)}")
        if d.references:
            out += ["", "References: " + ", ".join(esc(r) for r in d.references)]
        out.append("")
    if report.unrecognised:
        out += ["## Errors no rule explains" if not report.diagnoses else "## Other errors no rule explains", ""]
        for u in report.unrecognised:
            who = f" in {md_code(u.raised_by)}" if u.raised_by else ""
            where = md_code(f"{u.evidence.path}:{u.evidence.line}")
            out.append(f"- {esc(u.kind)}{who}, {u.count}x, first at {where}:")
            out += ["", "  ```", "  " + md_escape(u.template, code=True), "  ```"]
            if u.printed_by is not None:
                out.append(f"  {_printed_by(u.printed_by)}")
            if u.hint:
                out.append(f"  hint: {esc(u.hint)}")
        out.append("")
    if report.observations:
        out += ["## Observations", "", f"{OBSERVATIONS[0].upper()}{OBSERVATIONS[1:]}.", ""]
        for o in report.observations:
            out.append(f"- {esc(o.title)}: {esc(o.summary)} ({o.count}x)")
        out.append("")
    for note in report.notes:
        out.append(f"> note: {esc(note)}")
    return "\n".join(out).rstrip() + "\n"


def findings_markdown(
    diagnoses: Sequence[Diagnosis], observations: Sequence[Observation], notes: Sequence[str]
) -> list[str]:
    """A "Findings" section (then observations and notes), the lines to append to a page."""
    esc = md_escape
    out = [""]
    out.append(f"## Findings ({len(diagnoses)})" if diagnoses else "## Findings\n\nNo problems found.")
    for d in diagnoses:
        out.append("")
        out.append(f"### {d.severity.value.upper()}: {md_code(d.class_)} — {esc(d.title)}")
        out.append("")
        out.append(esc(d.summary))
        out.append("")
        for e in d.evidence:
            out.append(f"- evidence: {md_code(e.path)}: {esc(e.text)}")
        for s in d.symptoms:
            out.append(f"- explains: {md_code(s.class_)} ({esc(s.title)})")
        for f in d.fix:
            out.append(f"- fix: {esc(f.step)} {md_code(action_note(f.action)) if f.action else ''}".rstrip())
        out.append(f"- rule: {md_code(d.rule)}")
    if observations:
        out.append("")
        out.append("## Observations")
        out.append("")
        out += [f"- {esc(o.summary)} ({md_code(o.rule)})" for o in observations]
    if notes:
        out.append("")
        out.append("## Notes")
        out.append("")
        out += [f"- {esc(n)}" for n in notes]
    return out
