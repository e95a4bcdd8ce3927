"""`rules suggest LOG…`: a draft rule for every unrecognised error template.

The loop this closes: scan → suggest → fill in the class → `rules test` →
`eval`. Each draft keys on the template's literal words, turns every masked
part into a bounded named group (so the numbers of one report never become
part of the rule), keeps the log line as its `match` example and a generated
near miss as `no_match`. The class is left as ``FILL-IN``: the pack refuses
the file until a person names the failure, which is the point
(``qwen-triage rules classes`` lists the ids).

Only errors get drafts: a stall is a place, not a message, and the scan has
already left out a traceback's structure (headers, frames, source lines),
lines a rule explains (relay lines among them) and exceptions that wrap a
diagnosed error; :func:`draft_rules` skips the structure again, whatever list
it is given. The explain text is a template (``{name}`` is filled from the
facts), so a message's own ``{braces}`` are written as ``<name>`` there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from qwen_triage.engine.unrecognised import is_structure
from qwen_triage.report.model import Unrecognised

CLASS_PLACEHOLDER = "FILL-IN"

# Placeholder -> (group name stem, bounded pattern for what it masked)
_GROUPS = {
    "<UUID>": ("uuid", r"[0-9a-fA-F-]{36}"),
    "<IP>": ("addr", r"[0-9.]{7,15}(?::\d{1,5})?"),
    "<PCI>": ("pci", r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"),
    "<TIME>": ("time", r"[0-9][0-9:.,TZ+ -]{4,38}"),
    "<HEX>": ("hex", r"(?:0x)?[0-9a-fA-F]{1,64}"),
    "<PATH>": ("path", r"\S{1,300}"),
    "<S>": ("value", r"[^\s'\"`]{1,200}"),
    "<N>": ("n", r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"),
}
_PLACEHOLDER = re.compile("|".join(re.escape(p) for p in _GROUPS))
_WORD = re.compile(r"[A-Za-z][A-Za-z_]{2,}")
_BRACED = re.compile(r"\{([^{}\n]{0,80})\}")  # a message's own braces: `{name}` would be read as a placeholder
DRAFTED_KINDS = ("exception", "error")  # a stall or an exit status is no message to key a rule on


@dataclass
class Draft:
    rule_id: str
    yaml: str
    template: str


def _pattern(template: str) -> tuple[str, list[str]]:
    """The template as a pattern: literal text escaped, each placeholder a bounded named group."""
    parts: list[str] = []
    names: list[str] = []
    counts: dict[str, int] = {}
    pos = 0
    for m in _PLACEHOLDER.finditer(template):
        parts.append(_escape(template[pos : m.start()]))
        stem, body = _GROUPS[m.group(0)]
        counts[stem] = counts.get(stem, 0) + 1
        name = f"{stem}{counts[stem]}"
        names.append(name)
        parts.append(f"(?P<{name}>{body})")
        pos = m.end()
    parts.append(_escape(template[pos:]))
    return "".join(parts).strip(), names


def _escape(text: str) -> str:
    out = re.escape(text)
    return out.replace("\\ ", " +")  # runs of spaces vary between versions


def _slug(item: Unrecognised) -> str:
    base = item.exception or " ".join(_WORD.findall(item.template)[:4]) or "error"
    slug = re.sub(r"[^a-z0-9]+", "-", re.sub(r"(?<=[a-z])(?=[A-Z])", "-", base).lower()).strip("-")
    return slug[:48] or "error"


def _near_miss(line: str, template: str) -> str:
    """The line with its longest literal word changed: shares everything else, must not match."""
    words = sorted(set(_WORD.findall(_PLACEHOLDER.sub(" ", template))), key=len, reverse=True)
    if not words:
        return "an unrelated line"
    word = words[0]
    return line.replace(word, word[::-1] if word[::-1] != word else word + "x", 1)


def _q(text: str) -> str:
    """A single-quoted YAML scalar (no escapes but doubled quotes; control characters dropped)."""
    clean = "".join(ch for ch in text if ch == "\t" or ord(ch) >= 0x20 and ord(ch) != 0x7F)
    return "'" + clean.replace("'", "''") + "'"


def _no_placeholder(text: str) -> str:
    """Text for a field read as a template (explain, title): the message's ``{x}`` shown as ``<x>``."""
    return _BRACED.sub(r"<\1>", text).replace("{", "(").replace("}", ")")


def draft_rule(item: Unrecognised, rule_id: str) -> Draft:
    pattern, names = _pattern(item.template)
    title = _no_placeholder(f"{item.exception or 'Error'}: {item.template[:60]}".rstrip())
    lines = [
        f"  - id: {rule_id}",
        f"    class: {CLASS_PLACEHOLDER}  # a class id from rules/classes.yaml (qwen-triage rules classes)",
        f"    title: {_q(title)}",
        "    severity: error",
        "    status: experimental",
        "    sources: [any]",
        "    match:",
        "      any:",
        f"        - {_q(pattern)}",
    ]
    if names:
        lines.append("    extract: {" + ", ".join(f"{n}: str" for n in names) + "}")
    raised = f" (raised in {item.raised_by})" if item.raised_by else ""
    lines += [
        f"    explain: {_q('Seen ' + str(item.count) + ' time(s)' + raised + ': ' + _no_placeholder(item.template[:120]))}",
        "    examples:",
        f"      match: [{_q(item.evidence.text)}]",
        f"      no_match: [{_q(_near_miss(item.evidence.text, item.template))}]",
    ]
    return Draft(rule_id=rule_id, yaml="\n".join(lines) + "\n", template=item.template)


def draftable(item: Unrecognised) -> bool:
    """An error message a rule can key on: not a stall, not a traceback's structure."""
    return item.kind in DRAFTED_KINDS and not is_structure(item.template) and not is_structure(item.evidence.text)


def draft_rules(items: list[Unrecognised], prefix: str = "local") -> list[Draft]:
    seen: dict[str, int] = {}
    drafts = []
    for item in items:
        if not draftable(item):
            continue
        slug = _slug(item)
        seen[slug] = seen.get(slug, 0) + 1
        rule_id = f"{prefix}.{slug}" + (f"-{seen[slug]}" if seen[slug] > 1 else "")
        drafts.append(draft_rule(item, rule_id))
    return drafts


def render(drafts: list[Draft]) -> str:
    head = (
        "# Drafts from `qwen-triage rules suggest`: set each `class`, tighten the pattern to the part that\n"
        "# names the failure, then `qwen-triage rules lint FILE && qwen-triage rules test FILE`.\n"
        "rules:\n"
    )
    return head + "\n".join(d.yaml for d in drafts)


@dataclass(frozen=True)
class SuggestOptions:
    """``qwen-triage rules suggest``'s options, as the command line gives them (where the drafts go is its)."""

    paths: tuple[str, ...]
    rule_dirs: tuple[str, ...] = ()
    engine: str = "auto"
    prefix: str = "local"
    """the rule id namespace of the drafts"""


def run(options: SuggestOptions) -> list[Draft]:
    """``qwen-triage rules suggest``: scan the logs, a draft rule for each error line no rule explains.
    An unreadable log raises :class:`~qwen_triage.exits.Failure`."""
    from qwen_triage.engine.scanner import load_compiled, scan_paths
    from qwen_triage.exits import Failure
    from qwen_triage.inputs.source import InputError

    try:
        report = scan_paths(list(options.paths), load_compiled(options.rule_dirs, options.engine))
    except InputError as exc:
        raise Failure(str(exc)) from None
    return draft_rules(report.unrecognised, options.prefix)
