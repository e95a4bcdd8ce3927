"""Find the candidate lines of a block: the lines some pattern might match.

Two interchangeable engines. Hyperscan compiles every pattern into one
automaton (in prefilter mode, so constructs it cannot do exactly are widened,
never narrowed) and scans a whole block at once. The pure-Python engine looks
for each pattern's required literals with ``bytes.find``. Either may report
lines the pattern does not really match; the confirm step with ``regex``
settles that. Neither may miss a line that matches.

Hyperscan's compile time grows with bounded repeats: a 20-character pattern
such as ``x[a-z]{0,50000}y`` takes it minutes. Patterns whose expanded size
(:func:`expanded_size`) is too large are screened out before compiling and get
the literal prefilter instead; the scan report names their rules.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Protocol

from qwen_triage.engine.literals import required_literals

Candidates = dict[int, set[int]]  # line start offset in block -> pattern ids

MAX_EXPANDED = 5000  # one pattern: about five seconds of Hyperscan compile at most
MAX_EXPANDED_TOTAL = 20_000  # all patterns above HEAVY together
HEAVY = 1000
_BOUND = re.compile(r"\{(\d+)(?:,(\d*))?\}")


def expanded_size(pattern: str) -> int:
    """How large the pattern is with its bounded repeats written out (nested repeats multiply).

    A measure of Hyperscan's compile cost. Syntax Python's parser does not take
    (the ``regex`` module's own) is measured by its largest repeat bound.
    """
    import re._constants as sc  # noqa: PLC0415
    import re._parser as sp  # noqa: PLC0415

    repeats = {sc.MAX_REPEAT, sc.MIN_REPEAT, getattr(sc, "POSSESSIVE_REPEAT", sc.MAX_REPEAT)}

    def size(items, depth: int = 0) -> int:  # type: ignore[no-untyped-def]
        total = 0
        for op, av in items:
            if depth > 50:
                return 10**9
            if op in repeats:
                lo, hi, sub = av
                total += max(hi if hi != sc.MAXREPEAT else lo, 1) * size(sub, depth + 1)
            elif op is sc.SUBPATTERN:
                total += size(av[-1], depth + 1)
            elif op is sc.BRANCH:
                total += max((size(b, depth + 1) for b in av[1]), default=0)
            elif op in (sc.ASSERT, sc.ASSERT_NOT):
                total += size(av[1], depth + 1)
            else:
                total += 1
            if total > 10**9:
                return 10**9
        return total

    try:
        return size(sp.parse(pattern))
    except Exception:  # noqa: BLE001 - syntax of the regex module, or too deep
        bounds = [int(n[:12]) for m in _BOUND.finditer(pattern) for n in m.groups() if n]
        return max(bounds, default=0) + len(pattern)


def screen_heavy(patterns: list[str], skip: frozenset[int] = frozenset()) -> list[int]:
    """Ids of patterns too costly for Hyperscan to compile: the largest, until the rest fit the budget."""
    sizes = {pid: expanded_size(p) for pid, p in enumerate(patterns) if pid not in skip}
    out = [pid for pid, n in sizes.items() if n > MAX_EXPANDED]
    heavy = sorted(((n, pid) for pid, n in sizes.items() if HEAVY < n <= MAX_EXPANDED), reverse=True)
    total = sum(n for n, _ in heavy)
    for n, pid in heavy:
        if total <= MAX_EXPANDED_TOTAL:
            break
        out.append(pid)
        total -= n
    return sorted(out)


class Prefilter(Protocol):
    name: str

    def candidates(self, data: bytes) -> Candidates: ...


def _line_start(data: bytes, end: int) -> int:
    return data.rfind(b"\n", 0, max(end - 1, 0)) + 1 if end > 0 else 0


class LiteralPrefilter:
    """Pure Python: ``bytes.find`` for each required literal."""

    name = "literal"

    def __init__(self, patterns: list[str], multiline: frozenset[int] = frozenset()):
        self.always: list[int] = []  # patterns without a literal: tried on every line
        by_literal: dict[tuple[bytes, bool], list[int]] = defaultdict(list)
        for pid, pattern in enumerate(patterns):
            req = required_literals(pattern, one_line=pid in multiline)
            if req is None:
                self.always.append(pid)
                continue
            for alt in req.alternatives:
                by_literal[(alt.encode("utf-8"), req.ignore_case)].append(pid)
        # Longest first: a rare long literal is the cheapest to look for.
        self.literals = sorted(by_literal.items(), key=lambda kv: -len(kv[0][0]))
        self.any_ignore_case = any(ci for (_, ci), _ in self.literals)

    def candidates(self, data: bytes) -> Candidates:
        out: Candidates = {}
        lowered = data.lower() if self.any_ignore_case else data
        for (lit, ci), pids in self.literals:
            hay = lowered if ci else data
            pos = hay.find(lit)
            while pos >= 0:
                start = data.rfind(b"\n", 0, pos) + 1
                out.setdefault(start, set()).update(pids)
                nl = data.find(b"\n", pos)
                if nl < 0:
                    break
                pos = hay.find(lit, nl + 1)
        if self.always:
            start = 0
            while start < len(data):
                out.setdefault(start, set()).update(self.always)
                nl = data.find(b"\n", start)
                if nl < 0:
                    break
                start = nl + 1
        return out


def _hs_one_line(pattern: str) -> bytes:
    req = required_literals(pattern, one_line=True)
    if req is None:
        return b"(?s:.)"  # no literal: every line is a candidate (lint warns about such patterns)
    alts = "|".join(re.escape(a) for a in req.alternatives)
    return (f"(?i:{alts})" if req.ignore_case else f"(?:{alts})").encode("utf-8")


def _hs_expression(pattern: str) -> bytes:
    # Rules match the message, but the prefilter sees the whole line with its
    # wrappers, so anchors are dropped here (a wider net, never a narrower one).
    if pattern.startswith("^"):
        pattern = pattern[1:]
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1]
    return pattern.encode("utf-8")


class HyperscanPrefilter:
    """All patterns in one Hyperscan database, block mode, prefilter semantics."""

    name = "hyperscan"

    def __init__(self, patterns: list[str], cache_dir: Path | None = None, multiline: frozenset[int] = frozenset()):
        import hyperscan  # noqa: PLC0415 - optional dependency

        self._hs = hyperscan
        # A pattern of a multi-line record (an NVRM sentence, an OOM report) spans raw lines with
        # their prefixes in between: its prefilter is the literal that must sit on one line; the
        # matcher finds where the record starts and confirms the pattern on the joined record.
        exprs = [_hs_one_line(p) if i in multiline else _hs_expression(p) for i, p in enumerate(patterns)]
        flags = hyperscan.HS_FLAG_PREFILTER | hyperscan.HS_FLAG_ALLOWEMPTY | hyperscan.HS_FLAG_MULTILINE
        key = hashlib.sha256(b"\0".join(exprs) + str(flags).encode() + hyperscan.__version__.encode()).hexdigest()[:32]
        self.fallback: LiteralPrefilter | None = None
        self.screened: list[int] = []
        self.db = self._load_cached(cache_dir, key)
        if self.db is None:
            # multi-line patterns compile as their literals only: cheap whatever their repeats.
            # Screening parses every pattern: done when compiling, its answer kept in the cache.
            self.screened = screen_heavy(patterns, skip=multiline)
            ids, good = [], []
            bad: list[int] = list(self.screened)
            for pid, expr in enumerate(exprs):
                if pid in bad:
                    continue
                try:
                    probe = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
                    probe.compile(expressions=[expr], ids=[pid], elements=1, flags=[flags])
                except Exception:  # noqa: BLE001 - hyperscan.error: pattern not supported
                    bad.append(pid)
                    continue
                ids.append(pid)
                good.append(expr)
            self.db = None
            if good:
                self.db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
                self.db.compile(expressions=good, ids=ids, elements=len(good), flags=[flags] * len(good))
            self.bad = bad
            self._store_cached(cache_dir, key, bad, self.screened)
        if self.bad:
            # Patterns Hyperscan refuses still get a prefilter: their literals.
            sub = [patterns[i] for i in self.bad]
            self.fallback = LiteralPrefilter(sub, frozenset(n for n, i in enumerate(self.bad) if i in multiline))
            self._fallback_ids = self.bad

    def _load_cached(self, cache_dir: Path | None, key: str):  # type: ignore[no-untyped-def]
        """The database stored for ``key``, when the private cache holds it and its digest checks out."""
        from qwen_triage.rulepack.cache import Cache, digest

        self.bad = []
        cache = Cache.open(cache_dir) if cache_dir is not None else None
        entry = cache.read(f"hs-{key}") if cache is not None else None
        if entry is None:
            return None
        try:
            header, blob = entry.split(b"\n", 1)
            meta = json.loads(header)
            if meta.get("sha256") != digest(blob):
                return None  # damaged or replaced: compile again
            bad = [int(x) for x in meta["bad"]]
            screened = [int(x) for x in meta.get("screened", [])]
            db = self._hs.loadb(blob, mode=self._hs.HS_MODE_BLOCK)
            db.scratch = self._hs.Scratch(db)  # a deserialised database has none
        except Exception:  # noqa: BLE001 - any cache problem means: compile again
            return None
        self.bad, self.screened = bad, screened
        return db

    def _store_cached(self, cache_dir: Path | None, key: str, bad: list[int], screened: list[int]) -> None:
        from qwen_triage.rulepack.cache import Cache, digest

        if cache_dir is None or self.db is None:
            return  # nothing compiled: nothing worth caching
        cache = Cache.open(cache_dir)
        if cache is None:
            return
        blob = self._hs.dumpb(self.db)
        header = json.dumps({"bad": bad, "screened": screened, "sha256": digest(blob)}).encode()
        if cache.write(f"hs-{key}", header + b"\n" + blob):
            cache.prune("hs-", keep=f"hs-{key}")

    def candidates(self, data: bytes) -> Candidates:
        ends: list[tuple[int, int]] = []

        def on_match(pid: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            ends.append((to, pid))

        if self.db is not None:
            self.db.scan(data, match_event_handler=on_match)
        out: Candidates = {}
        last_line = (-1, -1)
        for to, pid in ends:
            start = _line_start(data, to)
            if (start, pid) == last_line:
                continue
            last_line = (start, pid)
            out.setdefault(start, set()).add(pid)
        if self.fallback is not None:
            for start, sub_ids in self.fallback.candidates(data).items():
                out.setdefault(start, set()).update(self._fallback_ids[i] for i in sub_ids)
        return out


def hyperscan_available() -> bool:
    try:
        import hyperscan  # noqa: F401, PLC0415
    except Exception:  # noqa: BLE001
        return False
    return True


def build_prefilter(
    patterns: list[str], engine: str = "auto", cache_dir: Path | None = None, multiline: frozenset[int] = frozenset()
) -> Prefilter:
    """``engine``: "auto" (Hyperscan where it loads), "hyperscan" or "literal".

    ``multiline``: ids of patterns that match multi-line records (their lines joined).
    """
    if engine not in ("auto", "hyperscan", "literal"):
        raise ValueError(f"unknown prefilter engine {engine!r}")
    if engine != "literal" and (engine == "hyperscan" or hyperscan_available()):
        return HyperscanPrefilter(patterns, cache_dir=cache_dir, multiline=multiline)
    return LiteralPrefilter(patterns, multiline)

