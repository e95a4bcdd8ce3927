"""A named lint check (yamllint and ruff are the models) and the choice of which checks run.

Ids are plain kebab names, family first (``pattern-no-literal``, ``example-match-misses``): a name
says what is wrong without a table to look it up in, never renumbers, and the family prefix selects
a group the way a ruff code prefix does (``--ignore pattern`` drops every ``pattern-*`` check).
A selector matches an id exactly or a leading run of its dash-separated words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from qwen_triage.authoring.lint.problem import LEVELS, Level, Problem

Scope = Literal["rule", "run"]  # one loaded rule at a time, or the whole lint run (files, pack, examples)


@dataclass(frozen=True)
class Check:
    id: str
    level: Level
    summary: str  # one line, for `rules lint --list-checks`
    scope: Scope
    func: Callable[["Check", Any], Iterable[Problem]]
    examples: bool = False  # reads the example runs (the real matcher on every example): skipped without them

    @property
    def why(self) -> str:
        """Why the check exists: its function's docstring."""
        return " ".join((self.func.__doc__ or self.summary).split())

    def run(self, subject: Any) -> Iterator[Problem]:
        yield from self.func(self, subject)

    def at(self, path: object, line: int, column: int, message: str, rule: str | None = None) -> Problem:
        return Problem(str(path), line, column, self.level, message, rule, self.id)

    def on_rule(self, lr: Any, message: str) -> Problem:
        """A problem at a loaded rule's position."""
        return self.at(lr.path, lr.position.line, lr.position.column, message, lr.rule.id)

    def as_json(self) -> dict[str, str]:
        return {"id": self.id, "level": self.level, "summary": self.summary, "why": self.why}


def matches(selector: str, check_id: str) -> bool:
    return check_id == selector or check_id.startswith(selector + "-")


def unknown_selectors(checks: Sequence[Check], selectors: Iterable[str]) -> list[str]:
    """Selectors that name no check: a typo would otherwise silently select or ignore nothing."""
    return [s for s in selectors if not any(matches(s, c.id) for c in checks)]


def chosen(checks: Sequence[Check], select: Sequence[str] = (), ignore: Sequence[str] = ()) -> list[Check]:
    """The checks that run: those ``select`` names (all when empty) less those ``ignore`` names."""
    return [
        c for c in checks
        if (not select or any(matches(s, c.id) for s in select)) and not any(matches(s, c.id) for s in ignore)
    ]


def parse_levels(pairs: Iterable[str]) -> list[tuple[str, Level]]:
    """``ID=LEVEL`` pairs (``overlap=error``: every overlap check fails the run); ValueError on a bad one."""
    out: list[tuple[str, Level]] = []
    for pair in pairs:
        selector, _, level = pair.partition("=")
        if level not in LEVELS or not selector:
            raise ValueError(f"{pair!r}: give ID=LEVEL, LEVEL one of {', '.join(LEVELS)}")
        out.append((selector, level))
    return out


def level_of(check: Check, levels: Sequence[tuple[str, Level]]) -> Level:
    """The check's level, or the last override whose selector names it."""
    return next((lv for sel, lv in reversed(levels) if matches(sel, check.id)), check.level)
