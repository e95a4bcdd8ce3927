"""Catalogue entries from a source tree: the templates `rules coverage` reads, as data the product ships.

``scripts/catalogue/build.py`` fetches each pinned release and calls :func:`tree_entries` on it, then
:func:`merge_releases` folds the releases of one program into one entry per distinct template (with
the releases that hold it). `rules coverage --drift` calls the same on two trees, so a drift between
two checkouts and one between two catalogue releases are the same comparison.

Only what is worth locating is kept: what a program raises, and what it logs at warning level or above
(info and debug lines are no failure, and would crowd the lookup).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from qwen_triage.authoring.coverage import MAX_EXAMPLE, Classifier, Coverage, extract
from qwen_triage.authoring.msg_template import Template, literal_words, render, typed_regex, typed_text
from qwen_triage.rulepack.catalogue import TemplateEntry

KEPT_LEVELS = frozenset({"error", "warning", "fatal"})
_LEVEL_OF_NAME = (
    (re.compile(r"FATAL|ABORT|CRIT|PANIC|critical|fatal|Fatal|Panic", re.I), "fatal"),
    (re.compile(r"ERR|error|Error", re.I), "error"),
    (re.compile(r"WARN|WRN|warn", re.I), "warning"),
    (re.compile(r"INFO|info", re.I), "info"),
    (re.compile(r"DEBUG|DBG|TRACE|debug", re.I), "debug"),
)


def kind_of(t: Template) -> tuple[str, str | None, str | None]:
    """(kind, level, exception) of a template site, in the catalogue's terms."""
    if t.kind == "raise":
        return "raise", None, t.prefix.rstrip(": ") or None
    if t.kind == "throw":
        return "raise", None, None
    if t.kind == "panic":
        return "raise", None, "panic"
    if t.kind in ("fmt.Errorf", "errors.New"):
        return "raise", None, "error"
    if t.kind.startswith("log."):
        level = t.kind.split(".", 1)[1]
        return "log", "fatal" if level == "critical" else level, None
    if t.kind == "warnings.warn":
        return "log", "warning", t.prefix.rsplit(": ", 2)[-2] if t.prefix.count(": ") >= 2 else None
    if t.kind.startswith(("slog.", "log.")):
        return "log", _level_of(t.kind) or "error", None
    if t.kind == "fprintf":
        return "printf", _level_of(t.text) or "error", None
    if t.kind == "GGML_ABORT":
        return "printf", "fatal", None
    return "printf", _level_of(t.kind), None


def _level_of(name: str) -> str | None:
    for pattern, level in _LEVEL_OF_NAME:
        if pattern.search(name):
            return level
    return None


def worth_locating(kind: str, level: str | None) -> bool:
    """A raise, or a message at warning level or above (a stderr printf of no known level counts)."""
    return kind == "raise" or level in KEPT_LEVELS


def _key(e: TemplateEntry) -> tuple[str, str, str, str | None, str | None]:
    return (e.file, e.template, e.kind, e.level, e.exception)


def tree_entries(roots: Iterable[Path], program: str, release: str, classifier: Classifier | None = None,
                 prefix: str = "", cov: Coverage | None = None) -> list[TemplateEntry]:
    """One entry per distinct template worth locating under ``roots`` (a file's path taken from the tree's
    parent, ``prefix`` before it). With a classifier, each carries the pack class of its example."""
    cov = cov if cov is not None else Coverage()
    out: dict[tuple[str, str, str, str | None, str | None], TemplateEntry] = {}
    for t in extract(list(roots), cov):
        kind, level, exception = kind_of(t)
        if not worth_locating(kind, level):
            continue
        regex = typed_regex(t.parts)
        words = literal_words(t.parts)
        if not words or not regex:
            continue
        example = render(t)[:MAX_EXAMPLE]
        class_ = classifier.classify(example)[0] if classifier is not None else None
        entry = TemplateEntry(
            program=program, releases=[release], file=prefix + t.file, function=t.function or None,
            kind=kind, level=level, exception=exception, template=typed_text(t.parts), regex=regex, words=words,
            example=example,
            class_=class_, class_from="rule" if class_ else None)
        out.setdefault(_key(entry), entry)
    return list(out.values())


def merge_releases(program: str, by_release: list[tuple[str, list[TemplateEntry]]]) -> list[TemplateEntry]:
    """One entry per distinct template over a program's releases (given oldest first), with the releases
    that hold it; where releases classify it differently, the newest release's class stands."""
    merged: dict[tuple[str, str, str, str | None, str | None], TemplateEntry] = {}
    for release, entries in by_release:
        for e in entries:
            key = _key(e)
            prev = merged.get(key)
            if prev is None:
                merged[key] = e.model_copy(update={"program": program, "releases": [release]})
            else:
                merged[key] = prev.model_copy(update={"releases": [*prev.releases, release], "class_": e.class_,
                                                      "class_from": e.class_from, "function": e.function})
    return list(merged.values())
