"""``rules/catalogue-map.yaml``: which module families of a program mean which failure class, reviewed by hand.

The message catalogue (:mod:`qwen_triage.rulepack.catalogue`) says where a line no rule explains was printed;
this map says what an error printed *there* means, where that part of a program has one job: vLLM's
configuration validation raising ``ValueError`` is a bad argument whatever the words, transformers' auto
configuration raising ``KeyError`` on a model type is an architecture it does not know. A family names a
program, the files it covers (globs: ``*`` within a path component, ``**`` across them), optionally the
functions that print it (globs: where one function of a file has the one job), the exception raised and the
kind and level of the message, and the class and severity it means.

Kept as data beside the rules (knowledge, not code): schema-checked here (unknown keys forbidden, a
severity of the four, globs that compile), every class checked against the class catalogue when the pack
loads (errors at ``file:line:col``), and linted by ``rules lint``. The pack carries the families as plain
dicts (:meth:`Family.to_dict`), so a scan reads them from the validated pack cache and imports nothing
here until a line needs a class (:class:`CatalogueMap`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from qwen_triage.rulepack.catalogue import TemplateEntry

# levels whose lines never become a diagnosis, whatever a family says: a warning is not a failure
QUIET_LEVELS = frozenset({"warning", "warn", "info", "notice", "debug", "trace"})


def glob_regex(glob: str) -> str:
    """A path glob as a regex over the whole path: ``**`` any run of components, ``*`` within one, ``?`` one
    character; everything else literal."""
    out = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


@dataclass(frozen=True)
class Family:
    """One family of the map, as plain data (what the pack carries and a scan reads)."""

    id: str
    program: str
    label: str
    files: tuple[str, ...]
    class_: str
    severity: str
    exceptions: tuple[str, ...] = ()  # empty: any (or none)
    kind: str | None = None  # raise | log | printf; None: any
    levels: tuple[str, ...] = ()  # empty: any level that may diagnose
    functions: tuple[str, ...] = ()  # globs over the function that prints it; empty: any

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "program": self.program, "label": self.label, "files": list(self.files),
                "class": self.class_, "severity": self.severity, "exceptions": list(self.exceptions),
                "kind": self.kind, "levels": list(self.levels), "functions": list(self.functions)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Family":
        return cls(str(d["id"]), str(d["program"]), str(d["label"]), tuple(d["files"]), str(d["class"]),
                   str(d["severity"]), tuple(d.get("exceptions") or ()), d.get("kind"), tuple(d.get("levels") or ()),
                   tuple(d.get("functions") or ()))


class CatalogueMap:
    """The families of one pack, in file order: the first that holds an entry speaks for it."""

    def __init__(self, families: Iterable[Family]):
        self.families = list(families)
        self._files: dict[str, re.Pattern[str]] = {}

    @classmethod
    def from_dicts(cls, data: Iterable[Mapping[str, Any]]) -> "CatalogueMap":
        return cls(Family.from_dict(d) for d in data)

    def _covers(self, family: Family, path: str) -> bool:
        pattern = self._files.get(family.id)
        if pattern is None:
            pattern = self._files[family.id] = re.compile("|".join(f"(?:{glob_regex(g)})" for g in family.files))
        return pattern.fullmatch(path) is not None

    def holds(self, f: Family, entry: "TemplateEntry") -> bool:
        """Whether the family's program, files, exception, kind and level hold ``entry``."""
        if f.program != entry.program or (f.kind is not None and f.kind != entry.kind):
            return False
        if f.exceptions and entry.exception not in f.exceptions and _class_name(entry.exception) not in f.exceptions:
            return False
        if f.levels and (entry.level or "") not in f.levels:
            return False
        if f.functions and not any(fnmatchcase(entry.function or "", g) for g in f.functions):
            return False
        return self._covers(f, entry.file)

    def family_of(self, entry: "TemplateEntry") -> Family | None:
        """The first family that holds ``entry``; None when none does."""
        return next((f for f in self.families if self.holds(f, entry)), None)


def _class_name(exception: str | None) -> str | None:
    """An exception as the source wrote it, without its module (``peft.utils.error.NoMatchingPeftModuleError`` →
    ``NoMatchingPeftModuleError``): a family names classes, the catalogue keeps the qualified name it read."""
    return exception.rsplit(".", 1)[-1] if exception else None


def may_diagnose(entry: "TemplateEntry") -> bool:
    """Whether a catalogue entry's line may become a diagnosis at all: never a warning, info or debug message."""
    return (entry.level or "").lower() not in QUIET_LEVELS


# --- the file's schema (validation only: pydantic and the YAML loader are imported by the loader) ----------


def _schema() -> Any:
    from pydantic import BaseModel, ConfigDict, Field, field_validator

    from qwen_triage.rulepack.severity import Severity

    class FamilyModel(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

        id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{1,80}$")
        program: str = Field(pattern=r"^[a-z][a-z0-9_]{1,40}$")
        label: str = Field(min_length=3, max_length=80, description="what that part of the program does")
        files: list[str] = Field(min_length=1, description="path globs inside a release: * ** ?")
        exceptions: list[str] = Field(default_factory=list)
        kind: Literal["raise", "log", "printf"] | None = None
        levels: list[Literal["error", "critical", "fatal"]] = Field(default_factory=list)
        functions: list[str] = Field(default_factory=list, description="globs over the printing function: * ?")
        class_: str = Field(alias="class")
        severity: Severity
        why: str = Field(min_length=10, description="why an error of this family means this class (reviewed)")

        @field_validator("files")
        @classmethod
        def _globs(cls, files: list[str]) -> list[str]:
            for g in files:
                if not g or g.startswith("/") or ".." in g.split("/"):
                    raise ValueError(f"file glob {g!r} must be a relative path inside a release")
                re.compile(glob_regex(g))
            return files

        @field_validator("exceptions")
        @classmethod
        def _names(cls, names: list[str]) -> list[str]:
            for n in names:
                if not re.fullmatch(r"[A-Za-z_]\w{0,80}", n):
                    raise ValueError(f"exception {n!r} is not a class name")
            return names

    class MapFile(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        families: list[FamilyModel] = Field(default_factory=list)

    return MapFile


def load_catalogue_map(path: Path, class_ids: Iterable[str] | None = None) -> list[Family]:
    """The families of one map file, validated; RuleFileError at ``file:line:col`` on a problem (a class that
    is not in ``class_ids``, an id given twice)."""
    from qwen_triage.rulepack.errors import RuleFileError
    from qwen_triage.rulepack.yamlload import load_yaml

    loaded = load_yaml(path)
    if loaded.data is None:
        return []
    parsed = loaded.validate(_schema())
    known = set(class_ids) if class_ids is not None else None
    out: list[Family] = []
    seen: set[str] = set()
    for i, f in enumerate(parsed.families):
        if known is not None and f.class_ not in known:
            pos = loaded.position_of(("families", i, "class"))
            raise RuleFileError(path, pos.line, pos.column, f"family {f.id}: unknown class {f.class_!r}")
        if f.id in seen:
            pos = loaded.position_of(("families", i, "id"))
            raise RuleFileError(path, pos.line, pos.column, f"duplicate family id {f.id!r}")
        seen.add(f.id)
        out.append(Family(f.id, f.program, f.label, tuple(f.files), f.class_, f.severity.value, tuple(f.exceptions),
                          f.kind, tuple(f.levels), tuple(f.functions)))
    return out
