"""Facts: the named groups of a confirmed match, typed as the rule's `extract` says.

Facts come from log text a stranger may write, so conversion never fails and never
grows without bound: what does not convert stays text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from qwen_triage.rulepack.spec import RuleSpec

if TYPE_CHECKING:  # annotations only: `regex` is imported where a pattern is compiled
    import regex


def _to_bytes(text: str) -> int | str:
    """"24 GiB", "500MB", "16g" -> bytes (a bare number is bytes); the text when it is no size."""
    from qwen_triage.units import SizeError, parse_size

    try:
        return parse_size(text, bare=1)
    except SizeError:
        return text


def convert_fact(kind: str, value: str) -> object:
    """Typed fact from matched text; keeps the text when it does not convert.

    Numbers are bounded (:func:`qwen_triage.units.bounded_int`): a 400-digit
    "int" from a hostile line stays text instead of a huge or failing int().
    """
    from qwen_triage.units import bounded_int

    try:
        if kind == "int":
            number = bounded_int(value)
            return value if number is None else number
        if kind == "float":
            return float(value) if len(value) <= 64 else value
        if kind == "hex":
            number = bounded_int(value, 16, max_digits=32)
            return value if number is None else number
        if kind == "bytes":
            return _to_bytes(value)
    except ValueError:
        return value
    return value


def facts_of(rule: RuleSpec, m: regex.Match[str]) -> dict[str, object]:
    """The facts one match gives: its named groups the rule extracts, converted."""
    facts: dict[str, object] = {}
    kinds = rule.extract
    for name, value in m.groupdict().items():
        if value is None or name not in kinds:
            continue
        facts[name] = convert_fact(kinds[name], value)
    return facts


def merge_facts(parts: Iterable[dict[str, object]]) -> dict[str, object]:
    """The facts of several evidence lines as one finding's: the first line that names a fact wins."""
    merged: dict[str, object] = {}
    for facts in parts:
        for k, v in facts.items():
            merged.setdefault(k, v)
    return merged
