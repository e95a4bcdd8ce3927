"""Context lines kept raw and settled later give exactly the findings of matching every line at once.

Most candidate lines of a healthy log only give context (an `all` part, an
`unless` veto); the matcher keeps them raw (engine.deferred._Deferred) and
settles them when a rule asks. Random logs over a small vocabulary, cut into
random blocks, go through a matcher that defers and one that does not.
"""

from __future__ import annotations

import random

import pytest

from qwen_triage.engine.deferred import DEFER_MAX
from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.matcher import Matcher
from qwen_triage.engine.sources import Block
from qwen_triage.rulepack.pack import load_pack
from tests.conftest import ROOT

RULES = ROOT / "tests" / "data" / "rules_context.yaml"

VOCABULARY = [
    "Dec 01 10:00:00 h prog[1]: CTXA 1", "Dec 01 10:00:00 h prog[1]: CTXA 7", "Dec 01 10:00:00 h other[2]: CTXA 2",
    "Dec 01 10:00:00 h prog[1]: CTXB 3", "Dec 01 10:00:00 h other[2]: CTXB 4",
    "CTXA x", "CTXB y", "CTXC 5", "CTXC z", "CTXV 6", "CTXV w", "CTXW 8", "CTXFIRE 9", "CTXFIRE 10 CTXV 11",
    "CTXA 12 CTXC 13", "CTXLATE 14",
    '  File "/usr/lib/python3/site-packages/libctx/a.py", line 3, in f',
    '  File "/usr/lib/python3/site-packages/other/b.py", line 4, in g', 'File "half a frame', "CTXError: boom",
    "noise", "noise", "noise", "noise", "noise", "noise",
    # a traceback's quoted code under a frame (issue 29): context words in its literals veto and join nothing,
    # kept or not
    '    log.info("CTXW 8 CTXV 6 CTXB 3")', "    CTXA 12  # CTXC 13",
]


@pytest.fixture(scope="module", params=["literal", "hyperscan"])
def compiled(request) -> CompiledPack:  # type: ignore[no-untyped-def]
    if request.param == "hyperscan":
        pytest.importorskip("hyperscan")
    return CompiledPack.build(load_pack([RULES], bundled=False), engine=request.param)


def _findings(compiled: CompiledPack, lines: list[str], cuts: list[int], defer: bool) -> list[tuple]:
    matcher = Matcher(compiled, defer=defer)
    out = []
    first = 0
    for end in [*cuts, len(lines)]:
        chunk = lines[first:end]
        if chunk:
            block = Block(data="".join(f"{line}\n" for line in chunk).encode(), first_line=first + 1)
            out += list(matcher.feed_block(block, "t.log"))
        first = end
    out += list(matcher.finish())
    return [(f.rule.rule.id, tuple((r.line, r.raised_by) for r in f.records), tuple(sorted(f.facts.items())))
            for f in out]


def test_the_pack_has_context_patterns_to_defer(compiled: CompiledPack) -> None:
    assert {compiled.patterns[p] for p in compiled.context_only} >= {r"CTXB (?P<b>\d+)\b", r"CTXW \d+"}
    assert r"CTXFIRE \d+" not in {compiled.patterns[p] for p in compiled.context_only}


@pytest.mark.parametrize("seed", range(150))
def test_deferring_finds_what_matching_at_once_finds(compiled: CompiledPack, seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([10, 40, 200])
    lines = [rng.choice(VOCABULARY) for _ in range(n)]
    if seed % 5 == 0:  # long runs of one context line: the kept lines overflow and are settled early
        at = rng.randrange(n)
        lines[at:at] = [rng.choice(VOCABULARY[:5])] * (2 * DEFER_MAX + 3)
    cuts = sorted(rng.sample(range(1, len(lines)), k=min(len(lines) - 1, rng.randrange(4))))
    assert _findings(compiled, lines, cuts, defer=True) == _findings(compiled, lines, cuts, defer=False)


def test_a_pair_far_apart_does_not_fire_and_a_near_one_does(compiled: CompiledPack) -> None:
    near = ["Dec 01 10:00:00 h prog[1]: CTXA 1", "noise", "Dec 01 10:00:00 h prog[1]: CTXB 3"]
    far = [near[0], *["noise"] * 7, near[2]]
    assert _findings(compiled, near, [], defer=True) == [("c.pair", ((1, None), (3, None)), (("a", 1), ("b", 3)))]
    assert _findings(compiled, far, [], defer=True) == []


def test_a_veto_kept_raw_still_vetoes(compiled: CompiledPack) -> None:
    """The veto comes long before the finding, in its own block: it is settled only when the finding asks."""
    lines = ["CTXW 8", *["CTXV 6"] * 3, "noise", "CTXFIRE 9", *["noise"] * 10, "CTXFIRE 9"]
    found = _findings(compiled, lines, [2, 5], defer=True)
    assert found == [("c.fires", ((17, None),), ())]  # the first is vetoed by the lines before it, the second is not


def test_a_veto_before_does_not_count_for_unless_after(compiled: CompiledPack) -> None:
    before = ["CTXW 8", "noise", "CTXLATE 14"]
    after = ["CTXLATE 14", "noise", "CTXW 8"]
    same_line = ["CTXLATE 14 CTXW 8"]
    assert _findings(compiled, before, [], defer=True) == [("c.vetoed-after", ((3, None),), ())]
    assert _findings(compiled, after, [], defer=True) == []
    assert _findings(compiled, same_line, [], defer=True) == []


def test_the_newest_real_frame_names_the_library(compiled: CompiledPack) -> None:
    libctx = '  File "/usr/lib/python3/site-packages/libctx/a.py", line 3, in f'
    other = '  File "/usr/lib/python3/site-packages/other/b.py", line 4, in g'
    assert _findings(compiled, [other, libctx, 'File "half a frame', "CTXError: boom"], [1], defer=True) == [
        ("c.raised-by-libctx", ((4, "libctx"),), ())]
    assert _findings(compiled, [libctx, other, "CTXError: boom"], [], defer=True) == []
    assert _findings(compiled, [libctx] * (3 * DEFER_MAX) + ["CTXError: boom"], [5], defer=True) == [
        ("c.raised-by-libctx", ((3 * DEFER_MAX + 1, "libctx"),), ())]


@pytest.mark.parametrize("seed", range(80))
def test_context_settled_a_block_at_a_time_finds_what_matching_at_once_finds(compiled: CompiledPack,
                                                                              seed: int) -> None:
    """Logs over part of the vocabulary, cut into many blocks: in most blocks some rule's `any` lines or other
    `all` parts are missing, so the context lines of that rule are settled with their block, not one by one
    (engine.deferred, "context in bulk"), and pending findings expire between them."""
    rng = random.Random(1000 + seed)
    words = rng.sample(VOCABULARY, k=rng.randrange(3, 12))
    lines = [rng.choice(words) for _ in range(rng.choice([60, 300]))]
    cuts = sorted(rng.sample(range(1, len(lines)), k=rng.randrange(2, 12)))
    assert _findings(compiled, lines, cuts, defer=True) == _findings(compiled, lines, cuts, defer=False)


def test_a_block_of_vetoes_with_nothing_to_veto_is_settled_at_once(compiled: CompiledPack, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from qwen_triage.engine.deferred import DeferredContext

    settled: list[int] = []
    real = DeferredContext.settle_block
    monkeypatch.setattr(DeferredContext, "settle_block",
                        lambda self, lines, *rest: (settled.append(len(lines)), real(self, lines, *rest))[1])
    quiet = ["CTXV 6", "noise", "CTXW 8"] * 20
    assert _findings(compiled, quiet, [30], defer=True) == []
    assert settled == [20, 20]  # each block's veto lines, in one go
    settled.clear()
    firing = ["CTXFIRE 9", *quiet]  # a finding waits on its veto: the veto lines of its rule are matched now
    assert _findings(compiled, firing, [], defer=True) == _findings(compiled, firing, [], defer=False) == []
    assert settled == []


def test_findings_whose_veto_window_ends_among_settled_lines_come_out_there(compiled: CompiledPack) -> None:
    """Two findings wait out their veto windows (c.pair-vetoed until line 15, then c.fires until line 14);
    line 15 is a context line of a rule that cannot fire in its block: c.fires must still come out there,
    before c.pair-vetoed, as matching line 15 at once gives them."""
    lines = ["noise"] * 9 + ["CTXA 1 CTXC 2 CTXFIRE 3"] + ["noise"] * 4 + ["CTXB 4"] + ["noise"] * 5 + ["CTXB 5"]
    order = [rule for rule, *_ in _findings(compiled, lines, [10], defer=True)]
    assert order == ["c.fires", "c.pair-vetoed"]
    assert _findings(compiled, lines, [10], defer=True) == _findings(compiled, lines, [10], defer=False)
