"""What one lint run loads once and every check reads: the catalogue, the data files, the rules, the examples.

Loading is not a check: a file that fails to load is recorded here, and the checks turn the failures
into problems (``file-invalid``, ``class-unknown``...). The examples run through the real matcher at
most once, and only when a selected check needs them and the pack loaded cleanly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from qwen_triage.authoring.lint.examples import ExampleRun, compiled_for_paths, example_runs
from qwen_triage.authoring.lint.variants import VariantRun, variant_runs
from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.rulepack.codes import CodeTables, load_code_tables
from qwen_triage.rulepack.errors import RuleFileError
from qwen_triage.rulepack.fix_defaults import FIX_DEFAULTS_FILE
from qwen_triage.rulepack.pack import LoadedRule, RulePack, load_classes, load_rule_file, rule_files
from qwen_triage.rulepack.paths import bundled_rules_dir, code_files
from qwen_triage.rulepack.spec import ClassSpec


@dataclass
class DataFile:
    """A data file beside the rules (stages, known-benign lines, the catalogue map) and its load error, if any."""

    path: Path
    name: str
    error: RuleFileError | None = None


@dataclass
class LintContext:
    paths: list[Path]
    base: Path
    classes: dict[str, ClassSpec] | None = None
    classes_error: RuleFileError | None = None
    cycles: list[list[str]] = field(default_factory=list)
    fix_defaults_error: RuleFileError | None = None
    data_files: list[DataFile] = field(default_factory=list)
    rules: list[LoadedRule] = field(default_factory=list)  # the linted rules, in load order
    file_errors: list[tuple[Path, RuleFileError]] = field(default_factory=list)
    _compiled: tuple[RulePack, CompiledPack] | None | bool = False  # False: not built yet
    _examples: list[ExampleRun] | None = None
    _variants: list[VariantRun] | None = None
    _bundled: dict[str, LoadedRule] | None = None

    @property
    def targets(self) -> list[Path]:
        return self.paths or [self.base]

    @property
    def loaded_cleanly(self) -> bool:
        """Whether the examples may run: nothing that keeps the pack from loading went wrong."""
        return not (self.classes_error or self.cycles or self.fix_defaults_error or self.file_errors
                    or any(d.error for d in self.data_files))

    def bundled(self) -> dict[str, LoadedRule]:
        """The bundled rules by id when contributors' rules are linted (they load beside them), else none:
        loaded the first time a check compares against them."""
        if self._bundled is None:
            self._bundled = {lr.rule.id: lr for lr in _bundled_rules()} if self.paths else {}
        return self._bundled

    def compiled(self) -> tuple[RulePack, CompiledPack] | None:
        """The linted rules loaded and compiled, once; None when they must not run (a file failed to load)."""
        if self._compiled is False:
            self._compiled = compiled_for_paths(self.paths) if self.loaded_cleanly else None
        return self._compiled  # type: ignore[return-value]

    def example_runs(self) -> list[ExampleRun]:
        if self._examples is None:
            built = self.compiled()
            self._examples = example_runs(*built) if built is not None else []
        return self._examples

    def variant_runs(self) -> list[VariantRun]:
        """Every `match` example re-rendered (wrappers, heads, drift) and run (:mod:`.variants`, :mod:`.robustness`)."""
        if self._variants is None:
            built = self.compiled()
            self._variants = variant_runs(*built) if built is not None else []
        return self._variants


def load_context(paths: list[Path], base: Path | None = None) -> LintContext:
    """``base``: the directory of the catalogue and fix defaults the rules are checked against (the bundled one)."""
    ctx = LintContext(paths=paths, base=base or bundled_rules_dir())
    try:
        ctx.classes = classes = load_classes(ctx.base / "classes.yaml")
    except RuleFileError as exc:
        ctx.classes_error = exc
        return ctx
    ctx.cycles = class_cycles(classes)
    ctx.fix_defaults_error = fix_defaults_error(ctx.base / FIX_DEFAULTS_FILE, classes)
    ctx.data_files = list(_data_files([ctx.base, *(t for t in ctx.targets if t != ctx.base)], classes))
    tables: list[CodeTables] = []

    def code_tables() -> CodeTables:  # parsed once a run, when a rule names one
        if not tables:
            tables.append(load_code_tables(code_files(ctx.base), classes))
        return tables[0]

    for target in ctx.targets:
        try:
            files = rule_files(target)
        except RuleFileError as exc:
            ctx.file_errors.append((target, exc))
            continue
        for f in files:
            try:
                ctx.rules.extend(load_rule_file(f, classes, codes=code_tables))
            except RuleFileError as exc:
                ctx.file_errors.append((f, exc))
    return ctx


def class_cycles(classes: dict[str, ClassSpec]) -> list[list[str]]:
    """Every `explains` cycle of the catalogue (a root cause must not explain itself)."""
    cycles = []
    state: dict[str, int] = {}

    def visit(cid: str, stack: list[str]) -> None:
        state[cid] = 1
        for nxt in classes[cid].explains:
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt] if nxt in stack else [cid, nxt])
            elif nxt in classes and state.get(nxt) is None:
                visit(nxt, stack + [nxt])
        state[cid] = 2

    for cid in classes:
        if cid not in state:
            visit(cid, [cid])
    return cycles


def _bundled_rules() -> list[LoadedRule]:
    """The bundled pack's rules, through the pack cache (each file parses once, not once a lint run)."""
    from qwen_triage.engine.scanner import cache_dir
    from qwen_triage.rulepack.pack import load_pack

    try:
        return load_pack([], cache_dir=cache_dir()).rules
    except RuleFileError:
        return []  # linted on its own (`rules lint` without paths) it says why


def fix_defaults_error(path: Path, classes: dict[str, ClassSpec]) -> RuleFileError | None:
    from qwen_triage.rulepack.fix_defaults import load_fix_defaults

    try:
        load_fix_defaults(path, set(classes))
    except RuleFileError as exc:
        return exc
    return None


def _data_files(directories: list[Path], classes: dict[str, ClassSpec]) -> Iterator[DataFile]:
    from functools import partial

    from qwen_triage.rulepack.benign import BENIGN_FILE, load_benign
    from qwen_triage.rulepack.catalogue_map import load_catalogue_map
    from qwen_triage.rulepack.paths import CATALOGUE_MAP_FILE
    from qwen_triage.rulepack.stages import STAGES_FILE, load_stage_file

    loaders = ((STAGES_FILE, load_stage_file), (BENIGN_FILE, load_benign),
               (CATALOGUE_MAP_FILE, partial(load_catalogue_map, class_ids=classes)))
    for directory in directories:
        for name, load in loaders:
            path = directory / name if directory.is_dir() else None
            if path is None or not path.is_file():
                continue
            try:
                load(path)
            except RuleFileError as exc:
                yield DataFile(path, name, exc)
                continue
            yield DataFile(path, name)
