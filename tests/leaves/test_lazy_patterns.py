"""Module-level patterns compiled on first use behave as `re.compile` would, and cost nothing at import."""

from __future__ import annotations

import re
import subprocess
import sys

from qwen_triage.lazyre import LazyPattern, lazy


def test_a_lazy_pattern_answers_as_the_compiled_one() -> None:
    text = "rank 3: CUDA error: out of memory at 0x7f; rank 11 too"
    for pattern, flags in ((r"rank (?P<n>\d+)", 0), (r"cuda ERROR", re.I), (rb"0x[0-9a-f]+", 0)):
        eager, deferred = re.compile(pattern, flags), lazy(pattern, flags)
        subject = text.encode() if isinstance(pattern, bytes) else text
        assert deferred.pattern == eager.pattern
        assert bool(deferred.search(subject)) == bool(eager.search(subject))
        assert [m.span() for m in deferred.finditer(subject)] == [m.span() for m in eager.finditer(subject)]
        assert deferred.findall(subject) == eager.findall(subject)
        assert deferred.split(subject) == eager.split(subject)
        assert deferred.flags == eager.flags and deferred.groupindex == eager.groupindex
    assert lazy(r"\d+").sub("<N>", text) == re.sub(r"\d+", "<N>", text)
    assert lazy(r"rank \d+").fullmatch("rank 3") and not lazy(r"rank").match("x rank")


def test_it_compiles_once_and_then_is_the_compiled_pattern_s_own_methods() -> None:
    p = LazyPattern(r"a+")
    assert "_compiled" not in p.__dict__  # nothing compiled by making it
    assert p.search("baaa").group() == "aaa"
    compiled = p.compiled()
    assert p.compiled() is compiled
    assert p.search.__self__ is compiled  # later calls go straight to the compiled pattern


def test_a_bad_pattern_fails_where_it_is_used() -> None:
    p = lazy(r"(unclosed")
    try:
        p.search("x")
    except re.error:
        pass
    else:
        raise AssertionError("a bad pattern must raise re.error on use")


def test_importing_the_normaliser_and_the_masks_compiles_no_pattern() -> None:
    probe = (
        "import re\n"
        "import qwen_triage.engine.normalize as n, qwen_triage.engine.unrecognised as u, qwen_triage.redact as r\n"
        "import qwen_triage.units as s\n"
        "from qwen_triage.lazyre import LazyPattern\n"
        "mods = (n, u, r, s)\n"
        "lazy = [v for m in mods for v in vars(m).values() if isinstance(v, LazyPattern)]\n"
        "eager = [v for m in mods for v in vars(m).values() if isinstance(v, re.Pattern)]\n"
        "print(len(lazy), len(eager), sum('_compiled' in v.__dict__ for v in lazy))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    n_lazy, n_eager, n_compiled = map(int, out)
    assert n_lazy >= 10 and n_eager == 0 and n_compiled == 0
