"""`rules coverage --drift`: what a release reworded, and which rules of the pack it left behind.

Two releases of one program are compared as catalogue entries (two catalogue releases, or two source
trees read the way the catalogue builder reads them): the templates only the old one has, those only
the new one has, and for each rule of the pack whether it matched the old wording and matches nothing
the new release prints. Such a rule is *lost*: on the new release it will never fire again. Where the
new release holds a template of the same file and mostly the same words, that is shown as the likely
rewording, so the rule can be widened to match both.

Matching is the scan's own: each example line (the template rendered with values of their types)
through the compiled pack's matcher alone, every rule that fires counted (not only the one a report
would put first), one line at a time so that examples cannot combine into a finding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.matcher import Matcher
from qwen_triage.engine.sources import Block
from qwen_triage.rulepack.catalogue import Catalogue, TemplateEntry

MIN_SIMILAR = 0.5  # share of words two templates have in common to count as one message reworded


@dataclass(slots=True)
class Lost:
    rule: str
    old: list[TemplateEntry]  # the old release's templates it matched, none of which the new one has
    rewording: TemplateEntry | None  # the new release's likeliest rewording of the first, if any


@dataclass
class Drift:
    program: str
    old: str
    new: str
    removed: list[TemplateEntry] = field(default_factory=list)
    added: list[TemplateEntry] = field(default_factory=list)
    kept: int = 0
    lost: list[Lost] = field(default_factory=list)
    rules_old: int = 0  # rules matching something the old release prints
    rules_new: int = 0


class RuleMatcher:
    """Every rule that fires on one example line, cached by line."""

    def __init__(self, compiled: CompiledPack):
        self.compiled = compiled
        self.seen: dict[str, frozenset[str]] = {}

    def rules(self, example: str) -> frozenset[str]:
        got = self.seen.get(example)
        if got is None:
            matcher = Matcher(self.compiled)
            data = example.encode("utf-8", "replace") + b"\n"
            findings = [*matcher.feed_block(Block(data=data, first_line=1), "<example>"), *matcher.finish()]
            got = frozenset(f.rule.rule.id for f in findings)
            self.seen[example] = got
        return got


def example_of(e: TemplateEntry) -> str:
    """The entry's printed example; for an entry built without one, its template with values by type."""
    if e.example:
        return e.example.splitlines()[0] if e.example.strip() else e.example
    values = {"int": "4", "float": "0.9", "hex": "1f", "path": "/data/models/model-a/config.json", "str": "value",
              "any": "error detail"}
    body = e.template
    for kind, value in values.items():
        body = body.replace("{" + kind + "}", value)
    body = body.replace("{{", "{").replace("}}", "}")
    return f"{e.exception}: {body}" if e.kind == "raise" and e.exception else body


def _key(e: TemplateEntry) -> tuple[str, str, str]:
    """A message is the same across releases when its words are, wherever the file moved (a release that
    splits ``config.py`` into ``config/*.py`` rewords nothing)."""
    return (e.template, e.kind, e.exception or "")


def _similarity(a: TemplateEntry, b: TemplateEntry) -> float:
    wa, wb = {w.lower() for w in a.words}, {w.lower() for w in b.words}
    return len(wa & wb) / len(wa | wb) if wa | wb else 0.0


def rewording_of(old: TemplateEntry, candidates: Iterable[TemplateEntry]) -> TemplateEntry | None:
    """The candidate most like ``old`` (same file preferred), if alike enough to be the same message."""
    best, score = None, MIN_SIMILAR
    for c in candidates:
        s = _similarity(old, c) + (0.1 if c.file == old.file else 0.0)
        if s >= score and (best is None or s > score):
            best, score = c, s
    return best


def compare(program: str, old_label: str, old: list[TemplateEntry], new_label: str, new: list[TemplateEntry],
            matcher: RuleMatcher) -> Drift:
    """The templates that changed between two releases' entries, and the rules the change left behind."""
    old_keys = {_key(e): e for e in old}
    new_keys = {_key(e): e for e in new}
    drift = Drift(program, old_label, new_label)
    drift.removed = sorted((e for k, e in old_keys.items() if k not in new_keys), key=_key)
    drift.added = sorted((e for k, e in new_keys.items() if k not in old_keys), key=_key)
    drift.kept = len(old_keys.keys() & new_keys.keys())
    matched_old: dict[str, list[TemplateEntry]] = {}
    for e in old:  # every entry: one template printed from two functions gives two examples
        for rule in matcher.rules(example_of(e)):
            matched_old.setdefault(rule, []).append(e)
    matched_new: set[str] = set()
    for e in new:
        matched_new |= matcher.rules(example_of(e))
    drift.rules_old, drift.rules_new = len(matched_old), len(matched_new)
    for rule in sorted(matched_old.keys() - matched_new):
        gone = sorted(matched_old[rule], key=_key)
        drift.lost.append(Lost(rule, gone, rewording_of(gone[0], drift.added)))
    return drift


def catalogue_pair(catalogue: Catalogue, program: str, old: str | None = None, new: str | None = None) -> tuple[
        str, list[TemplateEntry], str, list[TemplateEntry]]:
    """Two releases of a catalogue program (default: its oldest and newest pinned) as entry lists."""
    programs = catalogue.programs()
    if program not in programs:
        raise KeyError(f"no program {program!r} in the catalogue (it has {', '.join(programs)})")
    info = programs[program]
    versions = [r.version for r in info.releases]
    old = old or versions[0]
    new = new or versions[-1]
    for v in (old, new):
        if v not in versions:
            raise KeyError(f"{program} has no release {v!r} in the catalogue (it has {', '.join(versions)})")
    entries = list(catalogue.entries(program))
    return old, [e for e in entries if old in e.releases], new, [e for e in entries if new in e.releases]


def tree_pair(old: Path, new: Path) -> tuple[str, list[TemplateEntry], str, list[TemplateEntry]]:
    """Two source trees read as the catalogue builder reads a release (the same file paths for both)."""
    from qwen_triage.authoring.catalogue_build import tree_entries

    def read(root: Path, label: str) -> list[TemplateEntry]:
        entries = tree_entries([root], "tree", label)
        # both trees' files named from inside them, so that a file kept across releases is one file
        return [e.model_copy(update={"file": e.file.split("/", 1)[-1]}) for e in entries]

    return str(old), read(old, str(old)), str(new), read(new, str(new))


@dataclass(frozen=True)
class DriftOptions:
    """``qwen-triage rules coverage --drift OLD NEW``'s options, as the command line gives them."""

    old: str
    """a source tree, or PROGRAM@VERSION of the catalogue (PROGRAM@ for its oldest pinned release)"""
    new: str
    """a source tree, or PROGRAM@VERSION (PROGRAM@ for its newest pinned release)"""
    rule_dirs: tuple[str, ...] = ()
    engine: str = "auto"
    pack_dir: str | None = None


def run(options: DriftOptions) -> Drift:
    """``rules coverage --drift``: two trees, or two catalogue releases of one program, compared through the
    pack (or ``pack_dir``'s). Input that names neither raises :class:`~qwen_triage.exits.Failure`."""
    from qwen_triage.authoring.coverage import compiled_for
    from qwen_triage.exits import Failure
    from qwen_triage.rulepack.paths import bundled_rules_dir

    old, new = options.old, options.new
    if Path(old).is_dir() and Path(new).is_dir():
        program = Path(new).name
        got = tree_pair(Path(old), Path(new))
    else:
        (prog_a, _, ver_a), (prog_b, _, ver_b) = old.partition("@"), new.partition("@")
        if prog_a != prog_b or not prog_a:
            raise Failure(f"rules coverage --drift: {old!r} and {new!r} are neither two directories nor two "
                          f"releases PROGRAM@VERSION of one program")
        program = prog_a
        try:
            got = catalogue_pair(Catalogue.load(bundled_rules_dir()), program, ver_a or None, ver_b or None)
        except KeyError as exc:
            raise Failure(f"rules coverage --drift: {exc.args[0]}") from None
    matcher = RuleMatcher(compiled_for(options.rule_dirs, options.engine, options.pack_dir))
    return compare(program, got[0], got[1], got[2], got[3], matcher)
