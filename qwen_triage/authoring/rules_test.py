"""``qwen-triage rules test``: every rule's examples through the real engine (a `match` example fires its rule, a
`no_match` one does not), and the `match` examples again under the wrappers the normaliser strips (a miss fails
the test), under engine heads and under release drift (counted: `rules lint --select robust` lists them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from qwen_triage.authoring.lint.examples import ExampleResult, pack_for_paths, test_examples
from qwen_triage.authoring.lint.variants import VariantRun, misses, variant_runs


@dataclass(frozen=True)
class RulesTestOptions:
    """``qwen-triage rules test``'s options, as the command line gives them."""

    paths: tuple[str, ...] = ()
    """rule files or directories; only their rules are tested (none: the bundled pack's)"""
    engine: str = "auto"


@dataclass(frozen=True)
class RulesTestResult:
    examples: list[ExampleResult]
    variants: list[VariantRun]

    @property
    def failed(self) -> list[ExampleResult]:
        return [r for r in self.examples if not r.ok]

    @property
    def wrapper_misses(self) -> list[VariantRun]:
        """Variants under a wrapper the normaliser strips that no longer fire their rule: they fail the test."""
        return list(misses(self.variants, "wrapper"))

    @property
    def drift_misses(self) -> int:
        """Variants under an engine head or a release's rewording that miss (warnings, not failures)."""
        return sum(1 for kind in ("head", "drift") for _ in misses(self.variants, kind))

    @property
    def ok(self) -> bool:
        return not self.failed and not self.wrapper_misses


def run(options: RulesTestOptions) -> RulesTestResult:
    """Test the rules of ``options.paths``; a rule file that does not load raises :class:`~qwen_triage.exits.Failure`."""
    from qwen_triage.engine.compiled import CompiledPack
    from qwen_triage.engine.scanner import cache_dir
    from qwen_triage.exits import Failure
    from qwen_triage.rulepack.errors import RuleFileError

    try:
        pack = pack_for_paths([Path(p) for p in options.paths])
    except RuleFileError as exc:
        raise Failure(str(exc)) from None
    compiled = CompiledPack.build(pack, engine=options.engine, cache_dir=cache_dir())
    return RulesTestResult(examples=test_examples(pack, compiled), variants=variant_runs(pack, compiled))
