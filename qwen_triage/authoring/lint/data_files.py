"""Checks of the data files beside the rules: the launch stages, the known-benign lines, the catalogue map."""

from __future__ import annotations

from collections.abc import Iterator

from qwen_triage.authoring.lint.catalogue import failed
from qwen_triage.authoring.lint.check import Check
from qwen_triage.authoring.lint.context import LintContext
from qwen_triage.authoring.lint.probe import probe_pattern
from qwen_triage.authoring.lint.problem import Problem


def _data_invalid(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """stages.yaml, benign.yaml and catalogue-map.yaml load with the pack: a schema error, a pattern that misses
    its own example, or a family whose class does not exist would stop every scan."""
    for data in ctx.data_files:
        if data.error is not None:
            yield failed(check, data.error)


def _benign_backtracking(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """Benign patterns run on every unexplained error line: probed for backtracking as rules' patterns are."""
    from qwen_triage.rulepack.benign import BENIGN_FILE, load_benign_templates

    for data in ctx.data_files:
        if data.name != BENIGN_FILE or data.error is not None:
            continue
        for template in load_benign_templates(data.path):
            reason = probe_pattern(template.pattern, template.examples)
            if reason:
                yield check.at(data.path, 1, 1, f"benign pattern {template.pattern!r}: {reason}")


def _family_unmatched(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """A family of catalogue-map.yaml that holds no template of the bundled message catalogue classes nothing:
    a program key the catalogue does not have, a glob that names none of its files, an exception or level its
    templates never have (a `raise KeyError(key)` has no words to catalogue: the `raised:` rules read that)."""
    from qwen_triage.rulepack.catalogue import Catalogue
    from qwen_triage.rulepack.catalogue_map import CatalogueMap, load_catalogue_map
    from qwen_triage.rulepack.paths import CATALOGUE_MAP_FILE
    from qwen_triage.rulepack.yamlload import load_yaml

    targets = {t.resolve() for t in ctx.targets}
    maps = [d for d in ctx.data_files if d.name == CATALOGUE_MAP_FILE and d.error is None
            and d.path.parent.resolve() in targets]  # the linted directories' maps: the bundled one with `rules lint`
    if not maps:
        return
    catalogue = Catalogue.load(ctx.base)
    programs = catalogue.programs()
    for data in maps:
        families = load_catalogue_map(data.path)
        loaded = load_yaml(data.path)
        cmap = CatalogueMap(families)
        held: set[str] = set()
        for program in sorted({f.program for f in families} & set(programs)):
            mine = [f for f in families if f.program == program]
            for entry in catalogue.entries(program):
                held.update(f.id for f in mine if f.id not in held and cmap.holds(f, entry))
        for i, f in enumerate(families):
            if f.id in held:
                continue
            pos = loaded.position_of(("families", i))
            why = (f"program {f.program!r} is not in the catalogue ({', '.join(programs) or 'none'})"
                   if f.program not in programs else "none of its templates is in these files with this kind")
            yield check.at(data.path, pos.line, pos.column, f"family {f.id} classes nothing: {why}")


CHECKS = (
    Check("data-invalid", "error", "stages.yaml, benign.yaml or catalogue-map.yaml fails its schema", "run",
          _data_invalid),
    Check("data-map-unmatched", "warning", "a catalogue-map.yaml family holds no template of the catalogue",
          "run", _family_unmatched),
    Check("benign-backtracking", "error", "a benign pattern backtracks catastrophically on a probe line", "run",
          _benign_backtracking),
)
