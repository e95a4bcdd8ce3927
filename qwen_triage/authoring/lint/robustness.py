"""Families, not sentences: each rule's `match` examples re-rendered (:mod:`.variants`) must still fire it.

A rule keyed on a whole sentence, or on the way one log happened to wrap it, breaks the day a release
rewords the sentence or a user reads the same failure through journald. Each `match` example that
fires its rule is rendered under every wrapper the normaliser strips, under its engine's own head, and
under the drift real releases show, and run through the real matcher like the example itself; a
variant that no longer fires the rule is reported, once per rule and variant, with the first example
it broke. Wrappers are errors (the normaliser strips them: the rule sees the same message, a miss is a
bug in the pack or the pipeline); heads and drift are warnings (a rule may have a reason to key on
them, which its author can judge).
"""

from __future__ import annotations

from collections.abc import Iterator

from qwen_triage.authoring.lint.check import Check
from qwen_triage.authoring.lint.context import LintContext
from qwen_triage.authoring.lint.problem import Problem
from qwen_triage.authoring.lint.variants import misses


def _report(check: Check, ctx: LintContext, kind: str) -> Iterator[Problem]:
    for run in misses(ctx.variant_runs(), kind):
        lr = run.loaded
        yield check.at(lr.path, lr.position.line, 1, "match example " + run.describe(), lr.rule.id)


def _wrapper(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """The normaliser strips these wrappers (journald, compose, kubectl/CI timestamps, Ray, torchrun,
    each engine's logger): the rule sees the same message, so a rule that stops firing keys on the
    wrapper, or the pipeline loses the line."""
    return _report(check, ctx, "wrapper")


def _head(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """The engine's own head stays in the message (llama.cpp's level, SGLang's ranks, TGI's target):
    a pattern anchored at `^` misses the same line printed with it."""
    return _report(check, ctx, "head")


def _drift(check: Check, ctx: LintContext) -> Iterator[Problem]:
    """Releases reword: the case of a sentence's first word, the quotes around a value, an exception
    name repeated or unqualified, an errno moved, a word added inside a long phrase. A rule keyed on
    the family's short stable core survives them."""
    return _report(check, ctx, "drift")


CHECKS = (
    Check("robust-wrapper", "error", "a `match` example stops firing under a wrapper the normaliser strips",
          "run", _wrapper, examples=True),
    Check("robust-head", "warning", "a `match` example stops firing under its engine's own log head", "run",
          _head, examples=True),
    Check("robust-drift", "warning", "a `match` example stops firing when reworded the way releases do "
          "(case, quotes, exception name, errno, an added word)", "run", _drift, examples=True),
)
