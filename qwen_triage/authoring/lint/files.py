"""Checks of the rule files as files: they load, their classes exist, their rule ids are unique."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from qwen_triage.authoring.lint.check import Check
from qwen_triage.authoring.lint.context import LintContext
from qwen_triage.authoring.lint.problem import Problem
from qwen_triage.rulepack.pack import LoadedRule
from qwen_triage.rulepack.spec import ClassSpec


def _file_invalid(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """Every YAML and schema error of a file at once, each at its own line (yamlload.validate collects them):
    one round of fixes, not one per error."""
    for path, exc in ctx.file_errors:
        if ctx.classes and _unknown_classes(check, path, ctx.classes):
            continue  # schema-valid: its error is an unknown class (class-unknown)
        for e in getattr(exc, "all_errors", None) or [exc]:
            yield check.at(e.path, e.line, e.column, e.reason)


def _class_unknown(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """The loader stops at the first unknown class; a file of drafts has one per rule, each named here."""
    for path, _exc in ctx.file_errors:
        yield from _unknown_classes(check, path, ctx.classes or {})


def _unknown_classes(check: Check, path: Path, classes: dict[str, ClassSpec]) -> list[Problem]:
    """Every rule (and table row) of a schema-valid file whose class is not in the catalogue, each with
    its position; empty when the file fails for another reason (the loader's error then says why)."""
    from qwen_triage.authoring.suggest import CLASS_PLACEHOLDER
    from qwen_triage.rulepack.errors import RuleFileError
    from qwen_triage.rulepack.schema import RuleFile
    from qwen_triage.rulepack.yamlload import load_yaml

    if not path.is_file():
        return []
    try:
        loaded = load_yaml(path)
        parsed = loaded.validate(RuleFile) if loaded.data is not None else None
    except RuleFileError:
        return []
    out = []
    for i, rule in enumerate(parsed.rules if parsed else ()):
        wanted: list[tuple[tuple[str | int, ...], Any]] = [(("rules", i, "class"), rule.class_)]
        wanted += [(("rules", i, "table", "rows", r, "class"), row.class_)
                   for r, row in enumerate(rule.table.rows if rule.table else ()) if row.class_ is not None]
        for where, cid in wanted:
            if cid in classes:
                continue
            pos = loaded.position_of(where)
            hint = " (a draft: set it to a class id, `qwen-triage rules classes` lists them)" \
                if cid == CLASS_PLACEHOLDER else " (`qwen-triage rules classes` lists the ids)"
            out.append(check.at(path, pos.line, pos.column, f"unknown class {cid!r}{hint}", rule.id))
    return out


def _place(lr: LoadedRule) -> tuple[str, int, int]:
    return (str(Path(lr.path).resolve()), lr.position.line, lr.position.column)


def _rule_id_duplicate(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """Rules are found, shown and tested by id: two with one id (a contributor's beside a bundled one
    included) make `rules show` and the report name the wrong one."""
    seen = dict(ctx.bundled())
    for lr in ctx.rules:
        first = seen.get(lr.rule.id)
        if first is not None and _place(first) != _place(lr):
            yield check.on_rule(lr, f"duplicate rule id (first at {first.path}:{first.position.line})")
        seen.setdefault(lr.rule.id, lr)


CHECKS = (
    Check("file-invalid", "error", "a rule file is not valid YAML or fails the rule schema", "run", _file_invalid),
    Check("class-unknown", "error", "a rule (or table row) names a class the catalogue lacks", "run",
          _class_unknown),
    Check("rule-id-duplicate", "error", "two rules share one id", "run", _rule_id_duplicate),
)
