"""A rule keyed on a whole sentence: a literal run of more than ``LONG_WORDS`` words where a shorter core exists.

"Long" is measured on the pattern: the longest run of literal text (no class, group, repeat or
alternation inside it) counted in words. A release that rewords any word of such a run, or adds one
(:mod:`.variants`' drift), breaks the rule. The check names a shorter core, a few words of the run
that no example of a rule of another class and none of the rule's own `no_match` examples contain: the
part that identifies the failure, for the author to key on instead (and to let the rest vary or drop).
Without such a core (every short piece is shared with another family) the check says nothing.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator

from qwen_triage.authoring.lint.check import Check
from qwen_triage.authoring.lint.context import LintContext
from qwen_triage.authoring.lint.problem import Problem
from qwen_triage.authoring.lint.variants import LONG_WORDS
from qwen_triage.rulepack.pack import LoadedRule

try:  # Python 3.11+
    import re._constants as _c
    import re._parser as _p
except ImportError:  # pragma: no cover - older layouts
    import sre_constants as _c
    import sre_parse as _p

CORE_MIN = 3  # words: a core shorter than this is rarely what identifies a failure
_WORD = re.compile(r"\S+")
_REPEATS = (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None))


def literal_runs(pattern: str) -> list[str]:
    """The runs of literal text in a pattern, wherever they stand (in a group, a branch, a repeat)."""
    try:
        parsed = _p.parse(pattern)
    except Exception:  # noqa: BLE001 - `regex`-only syntax: no runs known, nothing to say
        return []
    out: list[str] = []
    _runs(list(parsed), out)
    return out


def _runs(items: list, out: list[str]) -> None:
    run: list[str] = []
    for op, av in items:
        if op is _c.LITERAL:
            run.append(chr(av))
            continue
        if run:
            out.append("".join(run))
            run = []
        if op is _c.SUBPATTERN:
            _runs(list(av[-1]), out)
        elif op in _REPEATS:
            _runs(list(av[2]), out)
        elif op is _c.BRANCH:
            for branch in av[1]:
                _runs(list(branch), out)
        elif op is getattr(_c, "ATOMIC_GROUP", None):
            _runs(list(av), out)
    if run:
        out.append("".join(run))


def _words(run: str) -> list[str]:
    return _WORD.findall(run)


def long_runs(pattern: str) -> list[str]:
    return [r for r in literal_runs(pattern) if len(_words(r)) > LONG_WORDS]


# words a core neither starts nor ends with: a phrase is its content words
_STOPWORDS = frozenset("a an and are as at be by for from has have in is it of on or than that the this to was were "
                       "which with you your".split())


def _phrase(words: list[str]) -> bool:
    """Whether the words can be a core: within one sentence or clause, content words at both ends."""
    if any(w[-1] in ".:;!?," for w in words[:-1]):
        return False
    return all(w.strip("().,:;!?'\"`").lower() not in _STOPWORDS for w in (words[0], words[-1]))


def _examples_by_class(rules: list[LoadedRule]) -> dict[str, str]:
    """Every example of each class's rules, lower case, one blob a class."""
    texts: dict[str, list[str]] = defaultdict(list)
    for lr in rules:
        texts[lr.rule.class_] += [*lr.rule.examples.match, *lr.rule.examples.no_match]
    return {cls: "\n".join(t).lower() for cls, t in texts.items()}


def shorter_core(run: str, lr: LoadedRule, others: str) -> str | None:
    """The shortest window of the run's words (longest in characters among those) found in no other
    class's example and in none of the rule's own `no_match` ones; None when none is."""
    words = _words(run)
    near_misses = "\n".join(lr.rule.examples.no_match).lower()
    for k in range(CORE_MIN, LONG_WORDS + 1):
        windows = sorted({" ".join(ws) for i in range(len(words) - k + 1) if _phrase(ws := words[i : i + k])},
                         key=lambda w: (-len(w), w))
        for window in windows:
            key = window.lower()
            if key not in others and key not in near_misses:
                return window
    return None


def _long_literal(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """A pattern that spells a whole sentence breaks the day a release rewords any word of it; the
    family's short stable core (an exception name, an error code, a fixed phrase) survives."""
    everyone = [*ctx.rules, *(lr for rid, lr in ctx.bundled().items() if rid not in {r.rule.id for r in ctx.rules})]
    blobs = _examples_by_class(everyone)
    for lr in ctx.rules:
        runs = [run for p in (*lr.rule.match.any, *lr.rule.match.all) for run in long_runs(p)]
        others = "\n".join(blob for cls, blob in blobs.items() if cls != lr.rule.class_) if runs else ""
        for run in runs:
            core = shorter_core(run, lr, others)
            if core is not None:
                words = _words(run)
                yield check.on_rule(lr, f"pattern keys on a literal sentence of {len(words)} words "
                                        f"({' '.join(words[:4])!r} … {' '.join(words[-3:])!r}); key on a "
                                        f"shorter core such as {core!r} and let the rest vary")


CHECKS = (
    Check("pattern-long-literal", "warning", f"a pattern spells a sentence (a literal run of more than {LONG_WORDS} "
          "words) where a shorter core identifies the failure", "run", _long_literal),
)
