"""Each rule's examples through the real matcher (prefilter included), as `rules test` and lint run them.

One run per example line records every rule that fired, not only the rule the example belongs to:
the cross-rule checks (:mod:`.overlap`) read the same runs instead of matching again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.matcher import Matcher
from qwen_triage.engine.sources import Block
from qwen_triage.rulepack.errors import RuleFileError
from qwen_triage.rulepack.pack import LoadedRule, RulePack, load_pack, rule_files
from qwen_triage.rulepack.severity import Status


@dataclass
class ExampleResult:
    rule: str
    path: str
    line: int
    kind: str  # "match" or "no_match"
    example: str
    ok: bool


@dataclass
class ExampleRun:
    """One example of one rule and the ids of every rule of the pack that fired on it."""

    loaded: LoadedRule
    kind: str  # "match" or "no_match"
    example: str
    fired: frozenset[str]

    @property
    def ok(self) -> bool:
        return (self.loaded.rule.id in self.fired) == (self.kind == "match")

    def result(self) -> ExampleResult:
        lr = self.loaded
        return ExampleResult(lr.rule.id, lr.path, lr.position.line, self.kind, self.example, self.ok)


def _fired(compiled: CompiledPack, example: str) -> frozenset[str]:
    matcher = Matcher(compiled)
    data = "\n".join(example.splitlines() or [""]).encode("utf-8") + b"\n"
    block = Block(data=data, first_line=1)
    found = list(matcher.feed_block(block, "<example>")) + list(matcher.finish())
    return frozenset(f.rule.rule.id for f in found)


def example_runs(pack: RulePack, compiled: CompiledPack) -> list[ExampleRun]:
    runs = []
    for lr in pack.rules:
        if lr.rule.status is Status.deprecated:
            continue  # retired: it reads nothing, so its examples can no longer fire
        for kind, examples in (("match", lr.rule.examples.match), ("no_match", lr.rule.examples.no_match)):
            runs += [ExampleRun(lr, kind, ex, _fired(compiled, ex)) for ex in examples]
    return runs


def test_examples(pack: RulePack, compiled: CompiledPack) -> list[ExampleResult]:
    """Every `match` example fires its rule, every `no_match` one does not (through the real prefilter)."""
    return [run.result() for run in example_runs(pack, compiled)]


def pack_for_paths(paths: list[Path], cache_dir: Path | None = None) -> RulePack:
    """The bundled pack plus ``paths``; only the rules from ``paths`` when any are given.

    ``cache_dir``: where a validated pack is kept (:func:`load_pack`): the bundled files parse once.
    """
    pack = load_pack(paths, cache_dir=cache_dir)
    if paths:
        wanted = {str(f.resolve()) for p in paths for f in rule_files(p)}
        pack.rules = [r for r in pack.rules if str(Path(r.path).resolve()) in wanted]
    return pack


def fires(compiled: CompiledPack, rule_id: str, text: str) -> bool:
    """Whether the rule fires on ``text`` (one or more lines) through the real matcher."""
    return rule_id in _fired(compiled, text)


def compiled_for_paths(paths: list[Path]) -> tuple[RulePack, CompiledPack] | None:
    """The rules of ``paths`` (the bundled pack when empty), compiled; None when the pack fails to load."""
    from qwen_triage.engine.scanner import cache_dir

    try:
        pack = pack_for_paths(paths, cache_dir())
    except RuleFileError:
        return None  # the file checks say why
    return pack, CompiledPack.build(pack, engine="auto", cache_dir=cache_dir())
