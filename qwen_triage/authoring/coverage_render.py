"""`rules coverage` output: JSON for tools, text for the person writing the next rules.

The text form lists what the pack does not know, by module, start-up paths
first (``coverage.STAGES``): those are the failures a user meets before a server
ever answers. Templates and examples come from the scanned code, so they are
cleaned of control characters before they reach a terminal.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from qwen_triage.authoring.coverage import Coverage, stage_of, summary
from qwen_triage.textsafe import clean, json_safe

if TYPE_CHECKING:
    from qwen_triage.authoring.drift import Drift
    from qwen_triage.rulepack.catalogue import TemplateEntry


def coverage_json(cov: Coverage) -> str:
    doc = {
        "templates": [
            {"file": r.template.file, "line": r.template.line, "kind": r.template.kind, "template": r.template.text,
             "example": r.template.example, "class": r.class_, "rule": r.rule}
            for r in cov.results
        ],
        "summary": summary(cov),
    }
    return json_safe(json.dumps(doc, indent=1, ensure_ascii=False))


def coverage_text(cov: Coverage, *, limit: int = 0) -> str:
    """The summary, each module's share, then every template no rule knows, grouped by module."""
    s: dict[str, Any] = summary(cov)
    out = [
        f"{s['templates']} message templates in {s['files']} files: {s['covered']} known to the pack "
        f"({100 * s['share']:.1f} %), {s['benign']} more known benign",
    ]
    for note in s["notes"]:
        out.append(f"note: {note}")
    if s["skipped_count"]:
        out.append(f"{s['skipped_count']} file(s) skipped (too large, binary or not parsed; JSON lists them)")
    out.append("")
    out.append("by module, start-up paths first:")
    for module, row in s["by_module"].items():
        out.append(f"  {clean(module):<44} {row['covered']:>5}/{row['templates']:<5} {100 * row['share']:5.1f} %"
                   f"  [{row['stage']}]")
    missing = [r for r in cov.results if r.rule is None and not r.benign]
    missing.sort(key=lambda r: (stage_of(r.module)[0], r.module, r.template.file, r.template.line))
    if missing:
        out.append("")
        out.append("not covered:")
    module = None
    shown = 0
    for r in missing:
        if limit and shown >= limit:
            out.append(f"... {len(missing) - shown} more (--limit 0 lists all)")
            break
        if r.module != module:
            module = r.module
            out.append(f"{clean(module)}  [{stage_of(module)[1]}]")
        t = r.template
        out.append(f"  {clean(t.file)}:{t.line}  {clean(t.kind)}  {clean(t.text)[:200]}")
        out.append(f"      e.g. {clean(t.example)[:240]}")
        shown += 1
    return "\n".join(out) + "\n"


def _entry_json(e: "TemplateEntry") -> dict[str, object]:
    return {"file": e.file, "function": e.function, "kind": e.kind, "template": e.template}


def drift_json(drift: "Drift") -> str:
    doc = {
        "program": drift.program, "old": drift.old, "new": drift.new, "kept": drift.kept,
        "removed": [_entry_json(e) for e in drift.removed], "added": [_entry_json(e) for e in drift.added],
        "rules_matching_old": drift.rules_old, "rules_matching_new": drift.rules_new,
        "lost": [{"rule": lost.rule, "old": [_entry_json(e) for e in lost.old],
                  "rewording": _entry_json(lost.rewording) if lost.rewording else None} for lost in drift.lost],
    }
    return json_safe(json.dumps(doc, indent=1, ensure_ascii=False))


def drift_text(drift: "Drift", *, limit: int = 0) -> str:
    """The counts, every rule the new release left behind (with the likely rewording), then what changed."""
    out = [f"{clean(drift.program)} {clean(drift.old)} -> {clean(drift.new)}: {len(drift.removed)} templates gone, "
           f"{len(drift.added)} new, {drift.kept} kept; rules matching the old release: {drift.rules_old}, "
           f"the new: {drift.rules_new}; {len(drift.lost)} rule(s) lost their template"]
    for lost in drift.lost:
        out.append(f"  LOST {clean(lost.rule)}: matched the old wording, matches nothing the new release prints")
        for e in lost.old[:3]:
            out.append(f"      old: {clean(e.file)}  {clean(e.template)[:200]}")
        if lost.rewording is not None:
            out.append(f"      now: {clean(lost.rewording.file)}  {clean(lost.rewording.template)[:200]}")
        else:
            out.append("      now: no like message in the new release (removed, not reworded)")
    for title, entries in (("gone", drift.removed), ("new", drift.added)):
        if not entries:
            continue
        out.append("")
        out.append(f"{title}:")
        for i, e in enumerate(entries):
            if limit and i >= limit:
                out.append(f"  ... {len(entries) - i} more (--limit 0 lists all)")
                break
            out.append(f"  {clean(e.file)}  {e.kind}  {clean(e.template)[:200]}")
    return "\n".join(out) + "\n"
