"""The built-in checks (``doctor``, ``check-model``, ``plan``, the runner's launch checks), declared as data.

A check's identity (id, class, title, severity, and its fix when that does not
depend on what was found) lives once in ``rules/checks.yaml``, beside the rule
pack, so that ``rules list``, ``docs/rules.md`` and ``rules lint`` see checks
as they see rules; the code that runs a check only says what varies (the
summary, the evidence, a fix naming the GPU or the file). A check that words
its verdict differently in one case names a *variant* (a different title,
severity or class), declared here too, so a call site never invents one.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from qwen_triage.rulepack.errors import RuleFileError
from qwen_triage.rulepack.paths import CLASSES_FILE, bundled_rules_dir
from qwen_triage.rulepack.schema import FixStep
from qwen_triage.rulepack.severity import Severity

CHECKS_FILE = "checks.yaml"
# preflight.<command>.<name> for doctor / check-model / plan; runner.<name> (or runner.preflight.<name>)
# for what the runner itself judges around a launch.
CHECK_ID = r"^(preflight\.(doctor|model|plan)|runner|runner\.preflight)\.[a-z0-9][a-z0-9-]*$"
_COMMANDS = {"preflight.doctor": "doctor", "preflight.model": "check-model", "preflight.plan": "plan"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Variant(_Strict):
    """How one case of a check differs from its declaration; unset fields keep the check's own."""

    title: str | None = None
    severity: Severity | None = None
    class_: str | None = Field(default=None, alias="class")


class CheckSpec(_Strict):
    """One built-in check. ``title`` may name facts (``{tp}``), filled from the finding's facts."""

    id: str = Field(pattern=CHECK_ID)
    class_: str = Field(alias="class")
    title: str = Field(min_length=3)
    severity: Severity
    fix: list[FixStep] = Field(default_factory=list, description="steps used when the check gives none of its own")
    variants: dict[str, Variant] = Field(default_factory=dict)

    def variant(self, name: str | None) -> tuple[str, Severity, str]:
        """(title, severity, class) of the named variant (None: the check's own)."""
        if name is None:
            return self.title, self.severity, self.class_
        if name not in self.variants:
            raise KeyError(f"check {self.id!r} declares no variant {name!r} (declared: {', '.join(self.variants)})")
        v = self.variants[name]
        return v.title or self.title, v.severity or self.severity, v.class_ or self.class_

    @property
    def severities(self) -> list[Severity]:
        """Every severity a finding of this check can have, worst first."""
        found = {self.severity, *(v.severity for v in self.variants.values() if v.severity)}
        return sorted(found, key=lambda s: s.rank)

    @property
    def command(self) -> str:
        """The command that runs this check: ``doctor``, ``check-model``, ``plan``, or the runner's ``run``."""
        head = self.id.rsplit(".", 1)[0]
        return _COMMANDS.get(head, "run")

    @property
    def classes(self) -> list[str]:
        return list(dict.fromkeys([self.class_, *(v.class_ for v in self.variants.values() if v.class_)]))


class CheckFile(_Strict):
    """The file; ids are unique (checked by :func:`_parse` before the schema, to place the second one)."""

    checks: list[CheckSpec] = Field(min_length=1)


def load_checks(path: Path, class_ids: set[str] | frozenset[str], text: str | None = None) -> dict[str, CheckSpec]:
    """The checks of ``path`` by id; :class:`RuleFileError` at the first bad declaration, named and placed."""
    checks, found = _checked(path, class_ids, text)
    if found:
        raise found[0]
    return checks


def problems(path: Path | None = None, class_ids: set[str] | frozenset[str] | None = None,
             text: str | None = None) -> list[RuleFileError]:
    """Every problem of a checks file, each at its place (for ``rules lint``; empty when the file is good).

    ``path`` defaults to the bundled file, ``class_ids`` to the bundled class catalogue's.
    """
    path = path or bundled_rules_dir() / CHECKS_FILE
    return _checked(path, frozenset(_bundled_class_ids()) if class_ids is None else class_ids, text)[1]


def _checked(
    path: Path, class_ids: set[str] | frozenset[str], text: str | None
) -> tuple[dict[str, CheckSpec], list[RuleFileError]]:
    """(the checks, every problem): the schema's, then each class a check or a variant names that is unknown."""
    try:
        checks, loaded = _parse(path, text)
    except RuleFileError as exc:
        return {}, list(getattr(exc, "all_errors", [exc]))
    out = []
    for i, c in enumerate(checks.values()):
        named: list[tuple[tuple[str, ...], str]] = [(("class",), c.class_)]
        named += [(("variants", k, "class"), v.class_) for k, v in c.variants.items() if v.class_]
        for where, class_id in named:
            if class_id not in class_ids:
                pos = loaded.position_of(("checks", i, *where))
                out.append(RuleFileError(path, pos.line, pos.column,
                                         f"check {c.id!r} names unknown class {class_id!r} (see {CLASSES_FILE})"))
    return checks, out


def _parse(path: Path, text: str | None) -> tuple[dict[str, CheckSpec], Any]:
    from qwen_triage.rulepack.yamlload import load_yaml

    loaded = load_yaml(path, text)
    data = loaded.data if isinstance(loaded.data, dict) else {}
    ids = [c.get("id") for c in data.get("checks") or [] if isinstance(c, dict)]
    for i, check_id in enumerate(ids):
        if check_id in ids[:i]:  # placed at the second one, not at the file's top as the schema's error would be
            pos = loaded.position_of(("checks", i, "id"))
            raise RuleFileError(path, pos.line, pos.column, f"duplicate check id {check_id!r}")
    parsed: CheckFile = loaded.validate(CheckFile)
    return {c.id: c for c in parsed.checks}, loaded


def _bundled_class_ids() -> set[str]:
    from qwen_triage.rulepack.pack import load_classes

    return set(load_classes(bundled_rules_dir() / CLASSES_FILE))


@cache
def bundled_checks() -> dict[str, CheckSpec]:
    """The bundled declarations, read once per process (every finding of a run looks its check up here)."""
    return load_checks(bundled_rules_dir() / CHECKS_FILE, frozenset(_bundled_class_ids()))
