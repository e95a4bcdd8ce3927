"""Derive the literals any match of a pattern must contain.

Used by the pure-Python prefilter (and by lint: a pattern with no required
literal would have to be tried on every line). The pattern is parsed with the
standard library's regular-expression parser, which understands the subset of
`regex` syntax rules use; what it cannot parse gets no literal.
"""

from __future__ import annotations

from dataclasses import dataclass

try:  # Python 3.11+
    import re._constants as _c
    import re._parser as _p
except ImportError:  # pragma: no cover - older layouts
    import sre_constants as _c
    import sre_parse as _p

MIN_LITERAL = 3


@dataclass(frozen=True)
class Required:
    """Any one of ``alternatives`` must occur in a matching line."""

    alternatives: tuple[str, ...]
    ignore_case: bool

    @property
    def weakest(self) -> int:
        return min((len(a) for a in self.alternatives), default=0)


def _seq_literals(items: list) -> list[frozenset[str]]:
    """Required literal sets of a parsed sequence (each set: one of these must occur)."""
    found: list[frozenset[str]] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            found.append(frozenset(["".join(run)]))
            run.clear()

    for op, av in items:
        if op is _c.LITERAL:
            run.append(chr(av))
            continue
        flush()
        if op is _c.SUBPATTERN:
            sub = av[-1]
            inner = _seq_literals(list(sub))
            found.extend(inner)
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None)):
            lo, _hi, sub = av
            if lo >= 1:
                found.extend(_seq_literals(list(sub)))
        elif op is _c.BRANCH:
            _, branches = av
            per_branch: list[frozenset[str]] = []
            for br in branches:
                lits = _seq_literals(list(br))
                if not lits:
                    per_branch = []
                    break
                per_branch.append(max(lits, key=lambda s: min(len(x) for x in s)))
            if per_branch:
                union = frozenset().union(*per_branch)
                found.append(union)
        elif op is getattr(_c, "ATOMIC_GROUP", None):
            found.extend(_seq_literals(list(av)))
        # IN, ANY, AT, ASSERT, categories: no literal, they break the run
    flush()
    return found


def _one_line(literal: str) -> str:
    """The longest space-free piece of a literal: what must sit on one line of a multi-line record."""
    return max(literal.split(" "), key=len)


def required_literals(pattern: str, one_line: bool = False) -> Required | None:
    """The best literal set for ``pattern``, or None when none can be derived.

    ``one_line``: the pattern matches a multi-line record (its lines joined with a
    space), so a literal is only required as far as it stays within one line.
    """
    try:
        parsed = _p.parse(pattern)
    except Exception:  # noqa: BLE001 - any parser failure means "no literal known"
        return None
    ignore_case = bool(parsed.state.flags & _c.SRE_FLAG_IGNORECASE)
    sets = [s for s in _seq_literals(list(parsed)) if all(s)]
    if one_line:
        sets = [frozenset(_one_line(a) for a in s) for s in sets]
        sets = [s for s in sets if all(len(a) >= MIN_LITERAL for a in s)]
    if not sets:
        return None
    best = max(sets, key=lambda s: (min(len(x) for x in s), -len(s)))
    alts = tuple(sorted(a.lower() if ignore_case else a for a in best))
    return Required(alternatives=alts, ignore_case=ignore_case)
