"""Load the rule pack: class catalogue plus rule files, validated, with positions."""

from __future__ import annotations

import hashlib
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path

import regex

from qwen_triage.rulepack.schema import ClassCatalogue, FailureClass, Rule, RuleFile
from qwen_triage.rulepack.yamlload import Position, RuleFileError, load_yaml

RULES_ENV = "QWEN_TRIAGE_RULES"
CLASSES_FILE = "classes.yaml"
# Data files beside the rules that are not rule files: the class catalogue, the
# launch stages of the stall watchdog, the runner's per-class fix defaults.
DATA_FILES = (CLASSES_FILE, "stages.yaml", "fix-defaults.yaml")


def bundled_rules_dir() -> Path:
    """`rules/` inside the installed package, or beside it in a source checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "rules", package.parent / "rules"):
        if (candidate / CLASSES_FILE).is_file():
            return candidate
    raise FileNotFoundError("the bundled rules/ directory is missing from this installation")


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    # VERSION0 keeps `re` semantics, which is what contributors expect.
    return regex.compile(pattern, regex.VERSION0)


@dataclass
class LoadedRule:
    rule: Rule
    path: str
    position: Position


@dataclass
class RulePack:
    classes: dict[str, FailureClass]
    rules: list[LoadedRule] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def rule(self, rule_id: str) -> LoadedRule | None:
        return next((r for r in self.rules if r.rule.id == rule_id), None)


def load_classes(path: Path) -> dict[str, FailureClass]:
    loaded = load_yaml(path)
    catalogue: ClassCatalogue = loaded.validate(ClassCatalogue)
    out: dict[str, FailureClass] = {}
    for i, cls in enumerate(catalogue.classes):
        if cls.id in out:
            pos = loaded.position_of(("classes", i, "id"))
            raise RuleFileError(path, pos.line, pos.column, f"duplicate class id {cls.id!r}")
        out[cls.id] = cls
    for i, cls in enumerate(catalogue.classes):
        for j, target in enumerate(cls.explains):
            if target not in out:
                pos = loaded.position_of(("classes", i, "explains", j))
                raise RuleFileError(path, pos.line, pos.column, f"explains unknown class {target!r}")
    return out


def rule_files(directory: Path) -> list[Path]:
    """The rule files of a directory: every *.yaml / *.yml except the class catalogue."""
    if directory.is_file():
        return [directory]
    if not directory.is_dir():
        raise RuleFileError(directory, 1, 1, "rules directory does not exist")
    return sorted(p for p in directory.rglob("*") if p.suffix in (".yaml", ".yml") and p.name not in DATA_FILES)


def extra_rule_dirs(cli_dirs: tuple[str, ...] | list[str] = ()) -> list[Path]:
    dirs = [Path(d) for d in os.environ.get(RULES_ENV, "").split(os.pathsep) if d.strip()]
    dirs += [Path(d) for d in cli_dirs]
    return dirs


def load_rule_file(path: Path, classes: dict[str, FailureClass]) -> list[LoadedRule]:
    loaded = load_yaml(path)
    if loaded.data is None:
        return []
    parsed: RuleFile = loaded.validate(RuleFile)
    out = []
    for i, rule in enumerate(parsed.rules):
        here = ("rules", i)
        if rule.class_ not in classes:
            pos = loaded.position_of(here + ("class",))
            raise RuleFileError(path, pos.line, pos.column, f"rule {rule.id}: unknown class {rule.class_!r}")
        for section in ("any", "all", "unless"):
            for j, pattern in enumerate(getattr(rule.match, section)):
                try:
                    compile_pattern(pattern)
                except regex.error as exc:
                    pos = loaded.position_of(here + ("match", section, j))
                    raise RuleFileError(path, pos.line, pos.column, f"rule {rule.id}: bad pattern: {exc}") from None
        for key, pattern in rule.match.where.items():
            try:
                compile_pattern(pattern)
            except regex.error as exc:
                pos = loaded.position_of(here + ("match", "where", key))
                raise RuleFileError(path, pos.line, pos.column, f"rule {rule.id}: bad `where` pattern: {exc}") from None
        out.append(LoadedRule(rule=rule, path=str(path), position=loaded.position_of(here)))
    return out


def _cache_key(files: list[Path]) -> str:
    from qwen_triage import __version__

    h = hashlib.sha256(__version__.encode())
    for f in files:
        st = f.stat()
        h.update(f"{f}\0{st.st_mtime_ns}\0{st.st_size}\0".encode())
    return h.hexdigest()[:32]


def load_pack(
    extra_dirs: list[Path] | None = None, *, bundled: bool = True, cache_dir: Path | None = None
) -> RulePack:
    """Bundled rules plus ``extra_dirs``. Raises RuleFileError on the first problem.

    With ``cache_dir``, a validated pack is kept there keyed by every file's
    path, size and mtime: parsing YAML in pure Python costs more than a whole
    scan of a typical log, and the files rarely change.
    """
    base = bundled_rules_dir()
    dirs = ([base] if bundled else []) + list(extra_dirs or [])
    files: dict[Path, None] = {}  # a file named twice (bundled dir passed again) loads once
    for directory in dirs:
        for path in rule_files(directory):
            files.setdefault(path.resolve(), None)
    cached = None
    if cache_dir is not None:
        cached = cache_dir / f"pack-{_cache_key([base / CLASSES_FILE, *files])}.pickle"
        try:
            with open(cached, "rb") as fh:
                pack = pickle.load(fh)
            if isinstance(pack, RulePack):
                return pack
        except (OSError, pickle.PickleError, EOFError, AttributeError, ImportError, TypeError, ValueError):
            pass
    pack = _load_pack_files(base, list(files))
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(".tmp")
            tmp.write_bytes(pickle.dumps(pack, protocol=pickle.HIGHEST_PROTOCOL))
            tmp.replace(cached)
        except OSError:
            pass  # a read-only cache only costs the parse next time
    return pack


def _load_pack_files(base: Path, files: list[Path]) -> RulePack:
    classes = load_classes(base / CLASSES_FILE)
    pack = RulePack(classes=classes)
    seen: dict[str, LoadedRule] = {}
    for path in files:
        pack.files.append(str(path))
        for loaded in load_rule_file(path, classes):
            rid = loaded.rule.id
            if rid in seen:
                first = seen[rid]
                raise RuleFileError(
                    loaded.path,
                    loaded.position.line,
                    loaded.position.column,
                    f"duplicate rule id {rid!r} (first at {first.path}:{first.position.line})",
                )
            seen[rid] = loaded
            pack.rules.append(loaded)
    return pack
