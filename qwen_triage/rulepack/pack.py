"""Load the rule pack: class catalogue plus rule files, validated, with positions.

Validation (YAML, pydantic) runs when a file changed; what passed is kept in the
private cache as the plain specs (``spec``), keyed by the files'
contents, so a scan of a small log neither parses YAML nor imports pydantic.
Two levels: the whole pack (one read on a warm run: a pickle that only the pack's own
classes can come out of, :func:`pack_from_pickle`), and each file on its own as JSON
(``file-*``), so an edit of one rule file re-validates that file alone (pure-Python
YAML costs ~0.1 s per 10 kB), and a load cut by a deadline (:class:`LoadDeadline`:
a node check under node-problem-detector's timeout) keeps what it validated for
the next run to continue from. A warm load reads none of the files: a memo (``keys-*``) names the pack's key by the
files' stat (inode, size, times), written only once they have settled (:data:`RACY_NS`). Before either, the
bundled files come from the artefact
validated when the wheel was built (rulepack.prebuilt), so a first run on a fresh node
parses only a site's own rule files.
"""

from __future__ import annotations

import functools
import io
import json
import os
import pickle
import time
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from qwen_triage.lazydata import lazy_dataclass
from qwen_triage.rulepack.errors import Position, RuleFileError
from qwen_triage.rulepack.paths import (
    CATALOGUE_DIR,
    CATALOGUE_MAP_FILE,
    CLASSES_FILE,
    CODES_DIR,
    bundled_rules_dir,
    code_files,
)
from qwen_triage.rulepack.spec import ClassSpec, RuleSpec
from qwen_triage.rulepack.trust import require_trusted

if TYPE_CHECKING:
    import regex

    from qwen_triage.rulepack.cache import Cache
    from qwen_triage.rulepack.codes import CodeTables

PACK_CACHE_FORMAT = 1
MAX_RULE_FILES = 2000
# A file changed this recently (nanoseconds) may change again within its file system's timestamp tick, its size
# unchanged: the files' stat is then no proof of their contents, and the memo of their key is not written (git's
# "racy" entries, the same problem).
RACY_NS = 2_000_000_000

# Data files beside the rules that are not rule files: the class catalogue, the
# launch stages of the stall watchdog, the runner's per-class fix defaults, the message catalogue's map.
DATA_FILES = (CLASSES_FILE, "stages.yaml", "fix-defaults.yaml", "benign.yaml", "checks.yaml", CATALOGUE_MAP_FILE)
BENIGN_FILE = "benign.yaml"

STAGES_FILE = "stages.yaml"


class LoadDeadline(Exception):
    """Loading ran past its deadline; the files validated so far are cached, the next load continues."""

    def __init__(self, done: int, total: int):
        super().__init__(f"rules still loading at the deadline ({done} of {total} files validated and cached; "
                         "the next run continues)")
        self.done, self.total = done, total


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    # VERSION0 keeps `re` semantics, which is what contributors expect.
    import regex  # here, not at the top: a warm scan of a healthy log may never need it

    return regex.compile(pattern, regex.VERSION0)


@lazy_dataclass
class LoadedRule:
    """A rule with the file and place it was read from (lint and reports point there)."""

    rule: RuleSpec
    path: str
    position: Position


@lazy_dataclass
class RulePack:
    """Everything the rule files give one scan: classes, rules, and the data files beside them."""

    classes: dict[str, ClassSpec]
    rules: list[LoadedRule] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    benign: list[str] = field(default_factory=list)  # patterns of known-benign error lines
    # launch stages (rules/stages.yaml) as plain data: id, label, rank, patterns, resets, quiet_ok, hint
    stages: list[dict[str, Any]] = field(default_factory=list)
    heartbeats: list[str] = field(default_factory=list)  # lines a stuck launch keeps repeating
    # the message catalogue's module families (rules/catalogue-map.yaml), validated, as plain data
    # (rulepack.catalogue_map.Family.to_dict): read only when a line no rule explains is located
    catalogue_map: list[dict[str, Any]] = field(default_factory=list)

    def rule(self, rule_id: str) -> LoadedRule | None:
        return next((r for r in self.rules if r.rule.id == rule_id), None)


def load_classes(path: Path, text: str | None = None) -> dict[str, ClassSpec]:
    from qwen_triage.rulepack.schema import ClassCatalogue
    from qwen_triage.rulepack.yamlload import load_yaml

    loaded = load_yaml(path, text)
    catalogue: ClassCatalogue = loaded.validate(ClassCatalogue)
    out: dict[str, ClassSpec] = {}
    for i, cls in enumerate(catalogue.classes):
        if cls.id in out:
            pos = loaded.position_of(("classes", i, "id"))
            raise RuleFileError(path, pos.line, pos.column, f"duplicate class id {cls.id!r}")
        out[cls.id] = ClassSpec.from_model(cls)
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
    found: list[Path] = []
    for top, subdirs, names in os.walk(directory):  # symlinked directories are not followed, as rglob does not
        subdirs[:] = [d for d in subdirs if d not in (CODES_DIR, CATALOGUE_DIR)]  # tables and the catalogue: data
        found += [Path(top, n) for n in names if n.endswith((".yaml", ".yml")) and n not in DATA_FILES]
    return sorted(found)


def bundled_code_tables(classes: dict[str, ClassSpec]) -> CodeTables:
    """The bundled code tables (``rules/codes/``), validated against ``classes``."""
    from qwen_triage.rulepack.codes import load_code_tables

    return load_code_tables(code_files(bundled_rules_dir()), classes)


def load_rule_file(path: Path, classes: dict[str, ClassSpec], text: str | None = None,
                   codes: CodeTables | Callable[[], CodeTables] | None = None) -> list[LoadedRule]:
    """``codes``: the code tables a rule's ``table: {codes: […]}`` may name (or how to load them, once, when a
    rule names one); the bundled ones when None."""
    import regex

    from qwen_triage.rulepack.schema import RuleFile
    from qwen_triage.rulepack.yamlload import load_yaml

    loaded = load_yaml(path, text)
    if loaded.data is None:
        return []
    parsed: RuleFile = loaded.validate(RuleFile)
    out = []
    for i, rule in enumerate(parsed.rules):
        here = ("rules", i)
        if rule.class_ not in classes:
            pos = loaded.position_of(here + ("class",))
            raise RuleFileError(path, pos.line, pos.column, f"rule {rule.id}: unknown class {rule.class_!r}")
        for r, row in enumerate(rule.table.rows if rule.table else ()):
            if row.class_ is not None and row.class_ not in classes:
                pos = loaded.position_of(here + ("table", "rows", r, "class"))
                raise RuleFileError(path, pos.line, pos.column, f"rule {rule.id}: unknown class {row.class_!r}")
        code_rows = None
        if rule.table is not None and rule.table.codes:
            if not isinstance(codes, dict):
                codes = codes() if codes is not None else bundled_code_tables(classes)
            tables = codes
            for j, name in enumerate(rule.table.codes):
                if name not in tables:
                    pos = loaded.position_of(here + ("table", "codes", j))
                    known = ", ".join(sorted(tables)) or "none"
                    raise RuleFileError(path, pos.line, pos.column,
                                        f"rule {rule.id}: unknown code table {name!r}; known: {known}")
            rule.table.source = rule.table.source or tables[rule.table.codes[0]].source

            def code_rows(names: tuple[str, ...], own: tuple[Any, ...], tables: CodeTables = tables) -> tuple[Any, ...]:
                from qwen_triage.rulepack.codes import resolve_rows

                return resolve_rows(names, own, tables)
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
        out.append(LoadedRule(rule=RuleSpec.from_model(rule, code_rows), path=str(path),
                              position=loaded.position_of(here)))
    return out


def _key_prefix() -> list[bytes]:
    """What every cache key starts with: the tool's version, the cache format and the validating code."""
    from qwen_triage import __version__

    # The code that validates rules is part of the key too: a changed safety class or
    # schema default must not be served from a pack validated by an older version of it.
    # Every module of this package, by name and content: no hand list to fall behind.
    return [f"{__version__}\0{PACK_CACHE_FORMAT}".encode(), *(f"{p.name}\0".encode() + p.read_bytes()
                                                            for p in validating_code())]


def validating_code() -> list[Path]:
    """The modules whose edit expires every cached pack and the prebuilt artefact: all of rulepack/."""
    return sorted(Path(__file__).resolve().parent.glob("*.py"))


def bundled_files(base: Path) -> list[Path]:
    """What the bundled part of a pack is loaded from: the catalogue, the stages, the rule files, benign."""
    extra = [base / name for name in (BENIGN_FILE, CATALOGUE_MAP_FILE) if (base / name).is_file()]
    return [base / CLASSES_FILE, base / STAGES_FILE, *(p.resolve() for p in rule_files(base)), *extra,
            *code_files(base)]


def read_all(files: list[Path]) -> dict[Path, bytes] | None:
    """Every file's bytes (bounded, regular files only: /dev/zero behind a symlink is never read); None when one
    cannot be read (the loader will say why)."""
    from qwen_triage.rulepack.errors import read_bounded

    out: dict[Path, bytes] = {}
    for f in files:
        try:
            out[f] = read_bounded(str(f))
        except RuleFileError:
            return None
    return out


def _cache_key(files: list[Path], contents: dict[Path, bytes] | None = None) -> str | None:
    """A digest of the tool's version and every file's path and contents; None when one cannot be read."""
    from qwen_triage.rulepack.cache import digest

    contents = contents if contents is not None else read_all(files)
    if contents is None:
        return None
    parts = _key_prefix()
    for f in files:
        parts += [str(f).encode(), contents[f]]
    return digest(*parts)[:40]


def _stat_key(files: list[Path]) -> str | None:
    """The files as they stand (device, inode, size, modification and change times), with the validating code and
    the tool's version: the name of the memo of their contents' key, so a warm load reads and hashes none of them.
    None when one cannot be stat'ed or changed too recently (:data:`RACY_NS`) for its stat to prove its contents."""
    from qwen_triage import __version__
    from qwen_triage.rulepack.cache import digest

    now = time.time_ns()
    parts = [f"{__version__}\0{PACK_CACHE_FORMAT}".encode()]
    for f in [*validating_code(), *files]:
        try:
            st = os.stat(f)
        except OSError:
            return None
        if now - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_NS:
            return None
        parts.append(f"{f}\0{st.st_dev}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}".encode())
    return digest(*parts)[:40]


def _remembered_key(cache: "Cache", settled: str | None) -> str | None:
    """The contents' key the memo ``settled`` holds (:func:`_stat_key`), when it holds a well-formed one."""
    raw = cache.read(f"keys-{settled}") if settled is not None else None
    key = raw.decode("ascii", "replace") if raw is not None else ""
    return key if len(key) == 40 and all(c in "0123456789abcdef" for c in key) else None


def _cached_pack(cache: "Cache", key: str | None) -> RulePack | None:
    blob = cache.read(f"pack-{key}.pickle") if key is not None else None
    return pack_from_pickle(blob) if blob is not None else None


def _text(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RuleFileError(str(path), 1, 1, f"not UTF-8 (byte {exc.start})") from None


class _FileCache:
    """The per-file level of the pack cache: each file's validated specs, keyed by its contents.

    A rule file's entry is keyed by the class catalogue's contents too: which classes
    exist is part of what validating it checked.
    """

    def __init__(self, cache: "Cache | None", prefix: list[bytes]):
        self.cache, self.prefix = cache, prefix
        self.used: list[str] = []

    def name(self, *parts: bytes) -> str:
        from qwen_triage.rulepack.cache import digest

        return f"file-{digest(*self.prefix, *parts)[:40]}.json"

    def get(self, name: str) -> Any:
        self.used.append(name)
        blob = self.cache.read(name) if self.cache is not None else None
        if blob is None:
            return None
        try:
            return json.loads(blob)
        except ValueError:
            return None

    def put(self, name: str, data: Any) -> None:
        if self.cache is not None:
            self.cache.write(name, json.dumps(data, separators=(",", ":")).encode())

    def prune(self) -> None:
        if self.cache is not None and self.used:
            self.cache.prune("file-", keep=self.used[-1], keep_newest=4 * len(self.used))


def _loaded_to_dict(lr: LoadedRule) -> dict[str, Any]:
    return {"path": lr.path, "line": lr.position.line, "column": lr.position.column, "rule": lr.rule.to_dict()}


def _loaded_from_dict(r: dict[str, Any]) -> LoadedRule:
    return LoadedRule(rule=RuleSpec.from_dict(r["rule"]), path=str(r["path"]),
                      position=Position(int(r["line"]), int(r["column"])))


def _class_to_dict(c: ClassSpec) -> dict[str, Any]:
    return vars(c) | {"explains": list(c.explains)}


def pack_to_data(pack: RulePack) -> dict[str, Any]:
    """The pack as plain JSON-able data (the prebuilt artefact's body; :func:`pack_from_data` reads it back)."""
    return {
        "format": PACK_CACHE_FORMAT,
        "classes": [_class_to_dict(c) for c in pack.classes.values()],
        "rules": [_loaded_to_dict(lr) for lr in pack.rules],
        "files": pack.files,
        "benign": pack.benign,
        "stages": pack.stages,
        "heartbeats": pack.heartbeats,
        "catalogue_map": pack.catalogue_map,
    }


def pack_to_pickle(pack: RulePack) -> bytes:
    """The whole-pack cache entry: :func:`pack_from_pickle` reads it back in a third of the time JSON and the
    specs' constructors take (~10 ms of a warm 10-line scan)."""
    return pickle.dumps(pack, protocol=pickle.HIGHEST_PROTOCOL)


def pack_from_pickle(blob: bytes) -> RulePack | None:
    """The pack a cache entry holds, or None when it is not one: damaged, or naming anything but the pack's own
    classes (:class:`_PackUnpickler`)."""
    try:
        pack = _PackUnpickler(io.BytesIO(blob)).load()
    except Exception:  # noqa: BLE001 - any damage is a miss: the pack is loaded again
        return None
    return pack if isinstance(pack, RulePack) else None


class _PackUnpickler(pickle.Unpickler):
    """Pickle's loader resolving no name but the pack's plain data classes, so an entry can make nothing else
    and call nothing but their constructors (the cache is private already; this keeps its contents data)."""

    def find_class(self, module: str, name: str) -> type:
        try:
            return _pack_classes()[module, name]
        except KeyError:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a rule pack") from None


@functools.cache
def _pack_classes() -> dict[tuple[str, str], type]:
    from qwen_triage.rulepack.severity import Severity, Status
    from qwen_triage.rulepack.spec import ExamplesSpec, FixSpec, MatchSpec, RowSpec, TableSpec

    kinds = (RulePack, LoadedRule, Position, RuleSpec, ClassSpec, MatchSpec, FixSpec, ExamplesSpec, RowSpec, TableSpec,
             Severity, Status)
    return {(k.__module__, k.__qualname__): k for k in kinds}


def pack_from_data(data: Any) -> RulePack | None:
    """The pack :func:`pack_to_data` wrote, or None when it is not one this version wrote."""
    try:
        if not isinstance(data, dict) or data.get("format") != PACK_CACHE_FORMAT:
            return None
        classes = {c["id"]: ClassSpec.from_dict(c) for c in data["classes"]}
        rules = [_loaded_from_dict(r) for r in data["rules"]]
        return RulePack(
            classes=classes,
            rules=rules,
            files=[str(f) for f in data["files"]],
            benign=[str(p) for p in data["benign"]],
            stages=[dict(s) for s in data["stages"]],
            heartbeats=[str(h) for h in data["heartbeats"]],
            catalogue_map=[dict(f) for f in data["catalogue_map"]],
        )
    except (ValueError, KeyError, TypeError):
        return None


def load_pack(
    extra_dirs: list[Path] | None = None, *, bundled: bool = True, cache_dir: Path | None = None,
    deadline: float | None = None, prebuilt: bool = True,
) -> RulePack:
    """Bundled rules plus ``extra_dirs``. Raises RuleFileError on the first problem.

    With ``cache_dir``, a validated pack is kept there (JSON, private, keyed by
    every file's contents): parsing YAML in pure Python costs more than a whole
    scan of a typical log, and the files rarely change.

    ``deadline`` (a ``time.perf_counter()`` value): a file not yet validated by then is not
    started; :class:`LoadDeadline` is raised, and what was validated stays cached.

    ``prebuilt``: the bundled files come from the artefact validated at build time (rulepack.prebuilt)
    when it is there and its key is theirs; only the other files are parsed.
    """
    base = bundled_rules_dir()
    dirs = ([base] if bundled else []) + list(extra_dirs or [])
    files: dict[Path, None] = {}  # a file named twice (bundled dir passed again) loads once
    benign_files = [d / BENIGN_FILE for d in dirs if d.is_dir() and (d / BENIGN_FILE).is_file()]
    map_files = [d / CATALOGUE_MAP_FILE for d in dirs if d.is_dir() and (d / CATALOGUE_MAP_FILE).is_file()]
    for directory in dirs:
        found = rule_files(directory)
        if directory != base:
            require_trusted(directory, found)
        for path in found:
            files.setdefault(path.resolve(), None)
            if len(files) > MAX_RULE_FILES:
                raise RuleFileError(directory, 1, 1, f"more than {MAX_RULE_FILES} rule files")
    cache: Cache | None = None
    key = None
    contents: dict[Path, bytes] | None = None
    if cache_dir is not None:
        from qwen_triage.rulepack.cache import Cache

        cache = Cache.open(cache_dir)
        keyed = [base / CLASSES_FILE, base / STAGES_FILE, *files, *benign_files, *map_files, *code_files(base)]
        if cache is not None:
            settled = _stat_key(keyed)  # before any read: a file changed while it is read gets a new stat
            pack = _cached_pack(cache, _remembered_key(cache, settled))
            if pack is not None:
                return pack
            contents = read_all(keyed)
            key = _cache_key(keyed, contents) if contents is not None else None
            if key is not None and settled is not None and cache.write(f"keys-{settled}", key.encode()):
                cache.prune("keys-", keep=f"keys-{settled}")
            pack = _cached_pack(cache, key)
            if pack is not None:
                return pack
    seed = _prebuilt(base, contents) if bundled and prebuilt else None
    site_data = [b for b in (*benign_files, *map_files) if b.parent.resolve() != base.resolve()]
    if seed is not None and len(seed.files) == len(files) and not site_data:
        pack = seed  # nothing but the bundled files: nothing to parse (cached below all the same: read faster)
    else:
        per_file = _FileCache(cache if contents is not None else None, _key_prefix() if contents is not None else [])
        pack = _load_pack_files(base, list(files), per_file, contents or {}, deadline, seed)
        _add_data_files(pack, base, benign_files, seed, map_files)
    if cache is not None and key is not None:
        if cache.write(f"pack-{key}.pickle", pack_to_pickle(pack)):
            cache.prune("pack-", keep=f"pack-{key}.pickle")
    return pack


def _prebuilt(base: Path, contents: dict[Path, bytes] | None) -> RulePack | None:
    """The bundled part from the build-time artefact, when it is that of the bundled files as they are now."""
    from qwen_triage.rulepack.prebuilt import artefact_path, prebuilt_data

    if artefact_path() is None:
        return None
    wanted = bundled_files(base)
    own = {p: contents[p] for p in wanted if p in contents} if contents is not None else read_all(wanted)
    if own is None or len(own) != len(wanted):
        return None
    data = prebuilt_data(base, own, _key_prefix())
    return pack_from_data(data) if data is not None else None


def _add_data_files(pack: RulePack, base: Path, benign_files: list[Path], seed: RulePack | None,
                    map_files: list[Path] | None = None) -> None:
    """Known-benign patterns, the catalogue map's families and launch stages: the bundled ones from ``seed`` when
    there is one."""
    from qwen_triage.rulepack.benign import load_benign

    if seed is not None:
        pack.benign.extend(seed.benign)
        pack.catalogue_map.extend(seed.catalogue_map)
    for path in benign_files:
        if seed is None or path != base / BENIGN_FILE:
            pack.benign.extend(load_benign(path))
    for path in map_files or ():
        if seed is None or path != base / CATALOGUE_MAP_FILE:
            from qwen_triage.rulepack.catalogue_map import load_catalogue_map

            pack.catalogue_map.extend(f.to_dict() for f in load_catalogue_map(path, pack.classes))
    if seed is not None:
        pack.stages, pack.heartbeats = seed.stages, seed.heartbeats
    elif (base / STAGES_FILE).is_file():
        from qwen_triage.rulepack.stages import load_stage_file

        stage_file = load_stage_file(base / STAGES_FILE)
        pack.stages = [s.model_dump(mode="json") for s in stage_file.stages]
        pack.heartbeats = list(stage_file.heartbeats)


def _catalogue(classes_path: Path, classes_raw: bytes | None, per_file: _FileCache) -> dict[str, ClassSpec]:
    """The class catalogue, from the per-file cache when these contents were validated before."""
    if classes_raw is None:
        return load_classes(classes_path)
    name = per_file.name(b"classes", str(classes_path).encode(), classes_raw)
    entry = per_file.get(name)
    try:
        classes = {c["id"]: ClassSpec.from_dict(c) for c in entry} if isinstance(entry, list) else None
    except (KeyError, TypeError, ValueError):
        classes = None
    if classes is None:
        classes = load_classes(classes_path, _text(classes_path, classes_raw))
        per_file.put(name, [_class_to_dict(c) for c in classes.values()])
    return classes


def _cached_rules(per_file: _FileCache, name: str) -> list[LoadedRule] | None:
    entry = per_file.get(name)
    if not isinstance(entry, list):
        return None
    try:
        return [_loaded_from_dict(r) for r in entry]
    except (KeyError, TypeError, ValueError):
        return None


def _by_file(seed: RulePack | None) -> dict[str, list[LoadedRule]]:
    """The rules of a prebuilt part, by the file they come from (a file without rules too)."""
    known: dict[str, list[LoadedRule]] = {f: [] for f in seed.files} if seed is not None else {}
    for loaded in seed.rules if seed is not None else ():
        known[loaded.path].append(loaded)
    return known


def _load_pack_files(base: Path, files: list[Path], per_file: _FileCache | None = None,
                     contents: dict[Path, bytes] | None = None, deadline: float | None = None,
                     seed: RulePack | None = None) -> RulePack:
    """``seed``: the bundled part validated at build time (its files are neither parsed nor cached again)."""
    per_file = per_file or _FileCache(None, [])
    contents = contents or {}
    classes_path = base / CLASSES_FILE
    classes_raw = contents.get(classes_path)
    known = _by_file(seed)
    pack = RulePack(classes=seed.classes if seed is not None else _catalogue(classes_path, classes_raw, per_file))
    classes = pack.classes
    # the code tables: their bytes key each rule file's cache entry (a rule's rows come from them); parsed
    # once, and only when a rule file that is validated names one
    tables_files = code_files(base)
    codes_raw = b"".join(str(f).encode() + b"\0" + (contents.get(f) or b"") for f in tables_files)
    tables: list[CodeTables] = []

    def code_tables() -> CodeTables:
        if not tables:
            from qwen_triage.rulepack.codes import load_code_tables

            texts = {f: _text(f, contents[f]) for f in tables_files if f in contents}
            tables.append(load_code_tables(tables_files, classes, texts))
        return tables[0]

    seen: dict[str, LoadedRule] = {}
    parsed = 0
    for done, path in enumerate(files):
        pack.files.append(str(path))
        raw = contents.get(path)
        rules = known.get(str(path))
        name = ""
        if rules is None and raw is not None:
            name = per_file.name(b"rules", classes_raw or b"", codes_raw, str(path).encode(), raw)
            rules = _cached_rules(per_file, name)
        if rules is None:
            # one file per run at least: a run that starts past its deadline still leaves progress cached
            if deadline is not None and parsed and time.perf_counter() > deadline:
                per_file.prune()
                raise LoadDeadline(done, len(files))
            rules = load_rule_file(path, classes, _text(path, raw) if raw is not None else None, code_tables)
            parsed += 1
            if raw is not None:
                per_file.put(name, [_loaded_to_dict(lr) for lr in rules])
        for loaded in rules:
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
    per_file.prune()
    return pack
