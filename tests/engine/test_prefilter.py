"""The literal prefilter (RE2, or ``bytes.find`` without it) finds what Hyperscan finds.

The literal engine is what users get where Hyperscan does not install; it must
never miss a line a rule matches. Every fixture log goes through both, and the
candidates the literal engine gives for each line must hold every pattern that
Hyperscan's candidates hold and that really matches the line's message.
"""

from __future__ import annotations

import pytest

from qwen_triage.engine import prefilter as prefilter_mod
from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.normalize import decode_line, normalize
from qwen_triage.engine.sources import iter_blocks
from qwen_triage.inputs.file import open_source
from tests.conftest import FIXTURES

hyperscan = pytest.importorskip("hyperscan")

LOGS = sorted(FIXTURES.rglob("*.log"))


@pytest.fixture(scope="module")
def reference(warm_cache) -> CompiledPack:  # type: ignore[no-untyped-def]
    """The bundled pack under Hyperscan: the session's compiled database."""
    assert warm_cache.prefilter.name == "hyperscan"
    return warm_cache


@pytest.fixture(scope="module")
def pack(reference):  # type: ignore[no-untyped-def]
    return reference.pack


def _lines(data: bytes) -> dict[int, bytes]:
    out, start = {}, 0
    for line in data.split(b"\n")[:-1]:
        out[start] = line
        start += len(line) + 1
    return out


@pytest.mark.parametrize("variant", ["re2", "re2-widened", "bytes.find"])
def test_literal_engine_misses_no_confirmed_pattern(pack, reference, variant, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``re2``: the fixtures are small, so the RE2 set narrows by the patterns' literals only;
    ``re2-widened``: it takes their widened forms at the first block, as it does past ``widen_after``."""
    if variant.startswith("re2"):
        pytest.importorskip("re2")
        if variant == "re2-widened":
            monkeypatch.setattr(prefilter_mod.LiteralPrefilter, "widen_after", -1)
    else:
        monkeypatch.setattr(prefilter_mod, "_google_re2", lambda: None)
    literal = CompiledPack.build(pack, engine="literal")
    assert (literal.prefilter._re2 is not None) == variant.startswith("re2")  # type: ignore[attr-defined]
    unwidened = literal.prefilter._re2  # type: ignore[attr-defined]
    checked = 0
    for path in LOGS:
        for block in iter_blocks(open_source(str(path))):
            ours = literal.prefilter.candidates(block.data)
            theirs = reference.prefilter.candidates(block.data)
            lines = _lines(block.data)
            for start, pids in theirs.items():
                message = normalize(decode_line(lines[start])).message
                confirmed = {p for p in pids if reference.regexes[p].search(message)}
                missing = confirmed - ours.get(start, set())
                assert not missing, (path.name, lines[start][:200], [reference.patterns[p] for p in missing])
                checked += len(confirmed)
    assert checked > 500  # the fixtures do exercise the pack
    if variant == "re2-widened":  # the set was rebuilt with the widened forms, once
        assert literal.prefilter._re2 is not unwidened and not literal.prefilter._to_widen  # type: ignore[attr-defined]


def test_a_phrase_split_by_a_nul_or_a_colour_code_is_still_found(pack, reference, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Reading removes NULs and ANSI codes before any engine looks, as decoding does before rules read."""
    from qwen_triage.engine.scanner import Scanner

    log = tmp_path / "split.log"
    log.write_bytes(b"torch.OutOfMemoryError: CUDA out of \x00memory. Tried to allocate 2.00 GiB. GPU 0\n"
                    b"\x1b[31mtorch.OutOfMemoryError: CUDA out of\x1b[0m memory. Tried to allocate 2.00 GiB.\n")
    for engine, compiled in (("literal", CompiledPack.build(pack, engine="literal")), ("hyperscan", reference)):
        scanner = Scanner(compiled)
        list(scanner.scan_source(open_source(str(log))))
        report = scanner.report()
        assert report.diagnoses and report.diagnoses[0].rule == "torch.cuda-oom", engine
        assert report.diagnoses[0].count == 2, engine


@pytest.mark.parametrize(("pattern", "message"), [
    (r"(?:^|\s)(?:ImportError|OSError): libfrob\.so", b"OSError: libfrob.so: cannot open shared object file"),
    (r"^OSError: libfrob\.so", b"OSError: libfrob.so: cannot open shared object file"),
    (r"(?:^|text_generation_launcher: )Shard (?P<rank>\d+) failed to start\s*$", b"Shard 1 failed to start"),
])
def test_a_line_start_inside_a_pattern_is_the_message_start_not_the_line_start(pattern: str, message: bytes) -> None:
    """Rules read the message; the prefilter reads the raw line, wrappers and all. A `^` anywhere in a
    pattern (not only first) must let the line through when a wrapper stands before the message:
    `[rank3]:OSError: …` was missed while `OSError: …` was found (found by `rules lint`'s robust-wrapper)."""
    db = prefilter_mod.HyperscanPrefilter([pattern, r"unrelated words"])
    for head in (b"", b"[rank3]:", b"[1,0]<stderr>:", b"Nov 29 10:00:01 host1 tgi[12]: "):
        assert 0 in db.candidates(head + message + b"\n").get(0, set()), head


def test_carets_that_are_not_anchors_stay() -> None:
    strip = prefilter_mod._without_line_starts
    assert strip(r"[^:]+ \^x [\]^]y (?:^|\s)z") == r"[^:]+ \^x [\]^]y (?:|\s)z"
    assert strip(r"[]^]x[^]^]") == r"[]^]x[^]^]"


def test_a_pattern_hyperscan_refuses_gets_its_literals_and_the_rest_one_database(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The database is compiled all at once (probing each pattern alone cost a cold first scan ~22 s); when
    Hyperscan refuses one (a branch reset, `(?|…)`, is `regex`'s, not Hyperscan's), the others are probed to find
    it, it is prefiltered by its literals, and every line either matches is still a candidate."""
    patterns = [r"GPU (?|fell off|lost from) the bus", r"unrelated words", r"CUDA error: out of memory"]
    pf = prefilter_mod.HyperscanPrefilter(patterns, cache_dir=tmp_path)
    assert pf.bad == [0] and pf.db is not None
    assert 0 in pf.candidates(b"[  5.1] GPU fell off the bus\n").get(0, set())
    assert 2 in pf.candidates(b"RuntimeError: CUDA error: out of memory\n").get(0, set())
    again = prefilter_mod.HyperscanPrefilter(patterns, cache_dir=tmp_path, cached_only=True)  # and as cached
    assert again.bad == [0] and 2 in again.candidates(b"CUDA error: out of memory\n").get(0, set())
    clean = prefilter_mod.HyperscanPrefilter(patterns[1:], cache_dir=tmp_path)
    assert clean.bad == [] and 1 in clean.candidates(b"CUDA error: out of memory\n").get(0, set())
