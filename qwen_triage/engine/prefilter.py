"""Find the candidate lines of a block: the lines some pattern might match.

Two interchangeable engines. Hyperscan compiles every pattern into one
automaton (in prefilter mode, so constructs it cannot do exactly are widened,
never narrowed) and scans a whole block at once. The literal engine, for where
Hyperscan does not install, looks for each pattern's required literals with RE2
(google-re2) and narrows the lines found to the patterns they may match, or,
without RE2, with ``bytes.find``. Either engine may report lines the pattern
does not really match; the confirm step with ``regex`` settles that. Neither
may miss a line that matches.

Hyperscan's compile time grows with bounded repeats: a 20-character pattern
such as ``x[a-z]{0,50000}y`` takes it minutes. Patterns whose expanded size
(:func:`expanded_size`) is too large are screened out before compiling and get
the literal prefilter instead; the scan report names their rules.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Container
from pathlib import Path
from typing import Protocol

from qwen_triage.engine.detached import BUILD_ENV, build_mode, start_build
from qwen_triage.lazyre import lazy

__all__ = ["BUILD_ENV", "build_prefilter", "hyperscan_available"]

Candidates = dict[int, set[int]]  # line start offset in block -> pattern ids

MAX_EXPANDED = 5000  # one pattern: about five seconds of Hyperscan compile at most
MAX_EXPANDED_TOTAL = 20_000  # all patterns above HEAVY together
HEAVY = 1000
HS_DB, HS_META = "hs-", "hsmeta-"  # cache entries: a serialised database, and what is known of it (JSON)
DB_HEAD = 64  # bytes of a serialised database recorded beside it in the cache: its header and more (_db_head)
_BOUND = lazy(r"\{(\d+)(?:,(\d*))?\}")


def expanded_size(pattern: str) -> int:
    """How large the pattern is with its bounded repeats written out (nested repeats multiply).

    A measure of Hyperscan's compile cost. Syntax Python's parser does not take
    (the ``regex`` module's own) is measured by its largest repeat bound.
    """
    import re._constants as sc  # noqa: PLC0415
    import re._parser as sp  # noqa: PLC0415

    repeats = {sc.MAX_REPEAT, sc.MIN_REPEAT, getattr(sc, "POSSESSIVE_REPEAT", sc.MAX_REPEAT)}

    def size(items, depth: int = 0) -> int:
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

    @property
    def horizon(self) -> int:
        """Bytes of blocks after which what this prefilter answers no longer depends on how many it was given
        (the literal one widens its patterns once: :attr:`LiteralPrefilter.widen_after`); 0: never did."""

    @property
    def seen(self) -> int:
        """Bytes of blocks given so far, counted up to :attr:`horizon` and a byte past it."""

    def resume(self, seen: int) -> None:
        """Answer from now on as after ``seen`` bytes of blocks (engine.split: a worker that starts inside an
        input, where a scan in one process would have given it those)."""


# -- the literal prefilter ----------------------------------------------------------------------
#
# Where Hyperscan is missing (or refuses a pattern) the prefilter works from each pattern's
# required literals (engine.literals). Looking for ~600 literals one ``bytes.find`` at a time takes
# ~600 passes over every block: an order of magnitude slower than Hyperscan. With google-re2
# (a dependency wherever it has wheels) two RE2 passes do the work instead:
#
# 1. One regex, the alternation of every literal, finds the lines holding any of them: one DFA pass
#    over the block, in C.
# 2. On each such line an RE2 set answers which patterns may match it. A set entry is the pattern
#    itself, *widened* (:func:`_widen`): every construct whose bytes are not known exactly becomes
#    "any bytes" (adjacent ones one run), anchors and look-arounds are dropped. "One to four bytes"
#    for a character would be narrower by a byte or two, but bounded counts of any byte in ~800
#    unanchored patterns multiply the set's DFA states: the set ran 3x slower for no fewer candidates. The widened form
#    matches every raw line whose message the pattern matches, yet is far narrower than the
#    pattern's best literal (``level=`` alone is on one line in six of the benchmark log; ``level=``
#    followed by ``error`` or ``fatal`` is not). Fewer candidates is what makes the scan fast: each
#    one is decoded, normalised and confirmed in Python.
#
# Without google-re2, ``bytes.find`` per literal (:class:`_LiteralFinder`) still gives a correct
# answer, slowly.

_WORD_BYTES = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_ONE_CHAR = b"(?s:.){1,4}"  # one character of the decoded message: one to four bytes of the raw line
_ANY_RUN = b"(?s:.)*"
_FOLDED = b"[\\x80-\\xff]{2,4}"  # a non-ASCII character that case-folds to an ASCII letter (K, ſ)
_EXACT_REPEAT = 8  # a repeated literal keeps its count up to this bound (``s?``, ``-{2,3}``)
_MAX_WIDENED = 50_000  # bytes: a larger widened form is not worth its DFA; the literals do
_SCOPED_IGNORECASE = lazy(r"\(\?[a-zA-Z]*i")  # (?i:...), (?si), also a leading (?i): wider is fine
_POSIX_CLASS = lazy(r"\[:\^?[A-Za-z]+:\]")  # `regex` reads [[:alpha:]] as a class, `re` does not
_RE2_MIN_MEM = 64 << 20  # RE2's memory budget: a limit, not an allocation (states are built as met)


class _Unwidenable(Exception):
    pass


def _escaped_byte(c: int) -> bytes:
    return bytes((c,)) if c in _WORD_BYTES else b"\\x%02x" % c


def _char_expr(c: int, ignore_case: bool) -> bytes:
    """RE2 (Latin-1, i.e. raw bytes) for one literal character of a pattern.

    Case-insensitive: an ASCII letter in either case, or a non-ASCII character that
    folds to it (the Kelvin sign, the long s); any other character may fold to many.
    """
    if c < 0x80:
        ch = chr(c)
        if ignore_case and ch.isalpha():
            return b"(?:[%s%s]|%s)" % (ch.lower().encode(), ch.upper().encode(), _FOLDED)
        return _escaped_byte(c)
    if ignore_case or c == 0xFFFD or 0xD800 <= c <= 0xDFFF:  # U+FFFD stands for undecodable bytes
        return _ONE_CHAR
    return b"".join(_escaped_byte(b) for b in chr(c).encode("utf-8"))


def _literal_expr(literal: str, ignore_case: bool) -> bytes:
    return b"".join(_char_expr(ord(c), ignore_case) for c in literal)


def _widen(pattern: str) -> bytes:
    """RE2 bytes matching every raw line on whose message ``pattern`` (``regex``, VERSION0) matches.

    The message is the line's text less a prefix (engine.normalize), one character of it one
    to four bytes of the line. So, read with the standard parser (as engine.literals does):
    literal characters stay (as UTF-8), a class of ASCII characters stays a byte class, any
    other character-matching construct becomes any bytes (see the notes above), a repeat of anything but a
    short literal becomes one copy and then any bytes, anchors, ``\\b`` and look-arounds go,
    and back-references become any bytes. Raises :class:`_Unwidenable` when unsure.
    """
    import re._constants as sc  # noqa: PLC0415
    import re._parser as sp  # noqa: PLC0415

    if _POSIX_CLASS.search(pattern):
        raise _Unwidenable
    repeats = {sc.MAX_REPEAT, sc.MIN_REPEAT, getattr(sc, "POSSESSIVE_REPEAT", sc.MAX_REPEAT)}
    char_like = {sc.NOT_LITERAL, sc.ANY, sc.CATEGORY}
    dropped = {sc.AT, sc.ASSERT, sc.ASSERT_NOT}
    ignorecase = sc.SRE_FLAG_IGNORECASE

    def klass(items, ci: bool) -> bytes:
        if ci:
            return _ANY_RUN
        parts = []
        for op, av in items:
            if op is sc.LITERAL and av < 0x80 and av != 0x0A:
                parts.append(_escaped_byte(av))
            elif op is sc.RANGE and av[1] < 0x80 and not av[0] <= 0x0A <= av[1]:
                parts.append(_escaped_byte(av[0]) + b"-" + _escaped_byte(av[1]))
            else:
                return _ANY_RUN  # negated, a category (\d, \w: Unicode-wide), non-ASCII, a newline
        return b"[" + b"".join(parts) + b"]"

    def seq(items, ci: bool, depth: int) -> bytes:
        if depth > 100:
            raise _Unwidenable
        out = []
        for op, av in items:
            if op is sc.LITERAL:
                if av == 0x0A:
                    raise _Unwidenable  # never in a line: leave such a pattern to its literals
                out.append(_char_expr(av, ci))
            elif op is sc.IN:
                out.append(klass(av, ci))
            elif op in char_like:
                out.append(_ANY_RUN)
            elif op in dropped:
                continue
            elif op is sc.SUBPATTERN:
                _group, add, remove, sub = av
                inner_ci = (ci or bool(add & ignorecase)) and not remove & ignorecase
                out.append(b"(?:" + seq(sub, inner_ci, depth + 1) + b")")
            elif op is sc.BRANCH:
                out.append(b"(?:" + b"|".join(seq(b, ci, depth + 1) for b in av[1]) + b")")
            elif op in repeats:
                lo, hi, sub = av
                if hi != sc.MAXREPEAT and hi <= _EXACT_REPEAT and all(o is sc.LITERAL for o, _ in sub):
                    out.append(b"(?:%s){%d,%d}" % (seq(sub, ci, depth + 1), lo, hi))
                elif lo == 0:
                    out.append(_ANY_RUN)
                else:
                    out.append(b"(?:" + seq(sub, ci, depth + 1) + b")" + _ANY_RUN)
            elif op is getattr(sc, "ATOMIC_GROUP", None):
                out.append(b"(?:" + seq(av, ci, depth + 1) + b")")
            elif op in (sc.GROUPREF, sc.GROUPREF_EXISTS):
                out.append(_ANY_RUN)
            else:
                raise _Unwidenable
        return b"".join(out)

    try:
        parsed = sp.parse(pattern)
    except Exception as exc:  # noqa: BLE001 - syntax the standard parser does not take
        raise _Unwidenable from exc
    widened = seq(list(parsed), bool(parsed.state.flags & ignorecase), 0).replace(_ONE_CHAR, _ANY_RUN)
    while _ANY_RUN + _ANY_RUN in widened:  # runs that met across a group's edge
        widened = widened.replace(_ANY_RUN + _ANY_RUN, _ANY_RUN)
    if len(widened) > _MAX_WIDENED:
        raise _Unwidenable
    return widened


def _google_re2():
    try:
        import re2  # noqa: PLC0415 - google-re2, a dependency where it has wheels
    except Exception:  # noqa: BLE001 - missing, or a build that does not load
        return None
    return re2


class _LiteralFinder:
    """``bytes.find`` for each literal over the whole block: pure Python, and ~600 passes per block."""

    def __init__(self, by_literal: dict[tuple[bytes, bool], list[int]]):
        # Longest first: a rare long literal is the cheapest to look for.
        self.literals = sorted(by_literal.items(), key=lambda kv: -len(kv[0][0]))
        self.any_ignore_case = any(ci for (_, ci), _ in self.literals)

    def add_candidates(self, data: bytes, out: Candidates, at: int = 0) -> None:
        """Add the candidates of ``data``, whose offsets in the block start at ``at``."""
        lowered = data.lower() if self.any_ignore_case else data
        for (lit, ci), pids in self.literals:
            hay = lowered if ci else data
            pos = hay.find(lit)
            while pos >= 0:
                start = data.rfind(b"\n", 0, pos) + 1
                out.setdefault(at + start, set()).update(pids)
                nl = data.find(b"\n", pos)
                if nl < 0:
                    break
                pos = hay.find(lit, nl + 1)


class _RE2Lines:
    """The two RE2 passes (see above): lines holding a literal, then the patterns each may match."""

    def __init__(self, re2, entries: dict[int, tuple[bytes | None, list[bytes]]],
                 fallback: _LiteralFinder):
        """``entries``: pattern id -> (widened pattern or None, its literals as RE2 expressions).

        ``fallback``: the same patterns' literals, for a line the set cannot answer.
        """
        literal_exprs = list(dict.fromkeys(e for _, exprs in entries.values() for e in exprs))
        lines = b"(?m)^.*?(?:" + b"|".join(literal_exprs) + b")"
        self.lines = re2.compile(lines, self._options(re2, len(lines)))
        size = sum(len(w or b"|".join(exprs)) for w, exprs in entries.values())
        self.set = re2.Set.SearchSet(self._options(re2, size))
        # Entry 0 matches everywhere: a result without it means the set's DFA ran out of memory
        # (it then reports nothing, not part), and the literals decide that line instead.
        self.set.Add(b"")
        self.ids: list[int] = [-1]
        for pid, (widened, exprs) in entries.items():
            try:
                if widened is None:
                    raise re2.error("no widened form")
                self.set.Add(widened)
            except re2.error:  # RE2 refuses it: the pattern's literals stand in
                self.set.Add(b"|".join(exprs))
            self.ids.append(pid)
        self.set.Compile()
        self.fallback = fallback

    @staticmethod
    def _options(re2, size: int):
        options = re2.Options()
        options.encoding = re2.Options.Encoding.LATIN1  # bytes are bytes: logs need not be UTF-8
        # Too small a budget sends the regex to RE2's NFA (100 times slower) and starves the set;
        # the bundled pack needs about 12 MiB for each.
        options.max_mem = max(_RE2_MIN_MEM, size << 11)
        options.log_errors = False
        return options

    def add_candidates(self, data: bytes, out: Candidates) -> None:
        ids = self.ids
        match = self.set.Match
        find = data.find
        for m in self.lines.finditer(data):
            start = m.start()
            end = find(b"\n", m.end())
            line = data[start:end] if end >= 0 else data[start:]
            hits = match(line)
            if hits is None:
                self.fallback.add_candidates(line, out, at=start)
            elif len(hits) > 1:
                pids = {ids[i] for i in hits if i}
                out.setdefault(start, set()).update(pids)


class LiteralPrefilter:
    """Each pattern's required literals (engine.literals), for where Hyperscan is not.

    With google-re2: two RE2 passes per block, the second narrowing each line to the
    patterns whose widened form (:func:`_widen`) it matches. Without: ``bytes.find`` per
    literal, the same lines at least, far slower. Patterns without a literal are tried on
    every line.
    """

    name = "literal"
    building = False  # a Hyperscan database for the same patterns is being built for the next run
    # Bytes scanned before the RE2 set takes the patterns' widened forms. Widening 700 patterns costs
    # ~0.07 s of CPU: a third of a cold 10-line scan, and worth it only where many lines pass the first
    # pass. Until then each pattern's literals stand in (fewer lines narrowed, the same findings).
    widen_after = 1 << 20

    def __init__(self, patterns: list[str], multiline: frozenset[int] = frozenset()):
        from qwen_triage.engine.literals import required_literals  # a scan on a cached Hyperscan database needs none

        self.always: list[int] = []  # patterns without a literal: tried on every line
        by_literal: dict[tuple[bytes, bool], list[int]] = defaultdict(list)
        entries: dict[int, tuple[bytes | None, list[bytes]]] = {}  # what RE2 can take
        for pid, pattern in enumerate(patterns):
            req = required_literals(pattern, one_line=pid in multiline)
            if req is None:
                self.always.append(pid)
                continue
            # engine.literals reads only a leading (?i): a literal from a scoped (?i:...) would be
            # looked for in one case. Looked for in any case, every literal stays a superset.
            ignore_case = req.ignore_case or bool(_SCOPED_IGNORECASE.search(pattern))
            alternatives = [a.lower() for a in req.alternatives] if ignore_case else list(req.alternatives)
            for alt in alternatives:
                by_literal[(alt.encode("utf-8"), ignore_case)].append(pid)
            if any("\n" in alt for alt in alternatives):
                continue  # RE2 looks within lines; such a pattern (it cannot match a line anyway) keeps bytes.find
            entries[pid] = (None, [_literal_expr(a, ignore_case) for a in alternatives])
        self._re2: _RE2Lines | None = None
        self._re2_module = _google_re2() if entries else None
        self._entries = entries
        self._by_literal = by_literal
        # the patterns to widen once enough input has been seen (a multi-line record's pattern: only
        # its one-line literal is sure, so it is never widened)
        self._to_widen = [(pid, patterns[pid]) for pid in entries if pid not in multiline]
        self._widenable = list(self._to_widen)
        self._seen = 0
        if self._re2_module is not None:
            self._re2 = self._re2_lines(entries)
        rest = by_literal if self._re2 is None else _only(by_literal, set(range(len(patterns))) - entries.keys())
        self._finder = _LiteralFinder(rest) if rest else None

    def _re2_lines(self, entries: dict[int, tuple[bytes | None, list[bytes]]]) -> _RE2Lines | None:
        try:
            return _RE2Lines(self._re2_module, entries, _LiteralFinder(_only(self._by_literal, entries.keys())))
        except Exception:  # noqa: BLE001 - a pack beyond RE2's limits, an odd google-re2: bytes.find
            return None

    def _widen_now(self) -> None:
        """Give the RE2 set the widened forms (once): from now on it narrows each line further."""
        entries = dict(self._entries)
        for pid, pattern in self._to_widen:
            try:
                entries[pid] = (_widen(pattern), entries[pid][1])
            except (_Unwidenable, RecursionError):
                pass
        self._to_widen = []
        widened = self._re2_lines(entries)
        if widened is not None:
            self._re2 = widened

    @property
    def horizon(self) -> int:
        return self.widen_after if self._re2 is not None and self._widenable else 0

    @property
    def seen(self) -> int:
        return self._seen if self._to_widen else self.horizon + 1

    def resume(self, seen: int) -> None:
        if not self.horizon:
            return
        if seen > self.widen_after:
            if self._to_widen:
                self._widen_now()
            return
        if not self._to_widen:  # widened already: back to the patterns' literals, as before widen_after
            self._to_widen = list(self._widenable)
            self._re2 = self._re2_lines(self._entries)
        self._seen = seen

    def candidates(self, data: bytes) -> Candidates:
        out: Candidates = {}
        if self._re2 is not None:
            if self._to_widen:
                self._seen += len(data)
                if self._seen > self.widen_after:
                    self._widen_now()
            self._re2.add_candidates(data, out)
        if self._finder is not None:
            self._finder.add_candidates(data, out)
        if self.always:
            start = 0
            while start < len(data):
                out.setdefault(start, set()).update(self.always)
                nl = data.find(b"\n", start)
                if nl < 0:
                    break
                start = nl + 1
        return out


def _only(
    by_literal: dict[tuple[bytes, bool], list[int]], pids: Container[int]
) -> dict[tuple[bytes, bool], list[int]]:
    """``by_literal`` for the patterns ``pids`` alone."""
    kept = {key: [p for p in ps if p in pids] for key, ps in by_literal.items()}
    return {key: ps for key, ps in kept.items() if ps}


def _hs_one_line(pattern: str) -> bytes:
    from qwen_triage.engine.literals import required_literals

    req = required_literals(pattern, one_line=True)
    if req is None:
        return b"(?s:.)"  # no literal: every line is a candidate (lint warns about such patterns)
    alts = "|".join(re.escape(a) for a in req.alternatives)
    return (f"(?i:{alts})" if req.ignore_case else f"(?:{alts})").encode("utf-8")


class NotCached(Exception):
    """The private cache holds no Hyperscan database for these patterns (the argument: its key)."""


def _hs_expressions(patterns: list[str], multiline: frozenset[int]) -> list[bytes]:
    """Each pattern as the database compiles it."""
    return [_hs_one_line(p) if i in multiline else _hs_expression(p) for i, p in enumerate(patterns)]


def _hs_key(hyperscan, patterns: list[str], multiline: frozenset[int], flags: int) -> str:
    """The cache key of a pack's database, known without building its expressions.

    Building them walks every pattern character by character (:func:`_without_line_starts`): a tenth of a
    warm 10-line scan. The key is what they are a function of instead: the patterns, which are multi-line,
    and the code that turns a pattern into its expression (this module and engine.literals, by content).
    """
    from qwen_triage.rulepack.cache import hasher

    h = hasher()
    try:
        for module_file in (__file__, Path(__file__).with_name("literals.py")):  # engine.literals, not imported
            h.update(Path(module_file).read_bytes())
    except (OSError, TypeError):  # no source files (a frozen build): key on the expressions themselves
        h.update(b"\0".join(_hs_expressions(patterns, multiline)))
    h.update(json.dumps([patterns, sorted(multiline), flags, hyperscan.__version__]).encode())  # one update, in C
    return h.hexdigest()[:32]


def _compile_database(hyperscan, expressions: list[bytes], screened: list[int], flags: int):
    """The database of every expression but the ``screened`` ones, and the ids of those it could not take.

    All at once first: a pack's patterns normally all compile, and probing each alone (to find one Hyperscan
    refuses) costs more than twice the whole compile (~22 s of a cold first scan for 1700 patterns). Its error
    does not say which expression it refused, so only when the whole compile fails is each probed alone.
    """
    bad, skip = list(screened), set(screened)
    ids = [pid for pid in range(len(expressions)) if pid not in skip]
    if ids:
        try:
            return _hs_database(hyperscan, [expressions[i] for i in ids], ids, flags), bad
        except Exception:  # noqa: BLE001 - hyperscan.error: some pattern is not supported; find which
            pass
    good = []
    for pid in ids:
        try:
            _hs_database(hyperscan, [expressions[pid]], [pid], flags)
        except Exception:  # noqa: BLE001 - hyperscan.error: pattern not supported
            bad.append(pid)
            continue
        good.append(pid)
    db = _hs_database(hyperscan, [expressions[i] for i in good], good, flags) if good else None
    return db, bad


def _hs_database(hyperscan, expressions: list[bytes], ids: list[int], flags: int):
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=expressions, ids=ids, elements=len(expressions), flags=[flags] * len(expressions))
    return db


def _db_head(blob: bytes) -> str:
    """A serialised Hyperscan database's header: magic, version, bytecode length, platform and the bytecode's
    CRC32C (hs_deserialize_database checks the bytecode against it), then the first bytecode bytes."""
    return blob[:DB_HEAD].hex()


def _hs_expression(pattern: str) -> bytes:
    # Rules match the message, but the prefilter sees the whole line with its
    # wrappers, so anchors are dropped here (a wider net, never a narrower one).
    pattern = _without_line_starts(pattern)
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1]
    return pattern.encode("utf-8")


def _without_line_starts(pattern: str) -> str:
    """The pattern with every `^` anchor dropped, wherever it stands (``(?:^|\\s)OSError``): the message
    starts after the wrappers (``[rank3]:OSError``), where no line does. Escaped carets and carets in
    a character class (``[^:]``) stay."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]" or (out[-1] in ("[", "[^"))  # `[]…]` and `[^]…]` hold a literal `]`
        elif c == "[":
            in_class = True
            if pattern.startswith("^", i + 1):
                out.append("[^")
                i += 2
                continue
        elif c == "^":
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


class HyperscanPrefilter:
    """All patterns in one Hyperscan database, block mode, prefilter semantics."""

    name = "hyperscan"

    def __init__(self, patterns: list[str], cache_dir: Path | None = None, multiline: frozenset[int] = frozenset(),
                 cached_only: bool = False):
        """``cached_only``: raise :class:`NotCached` rather than compile when the cache has no database."""
        import hyperscan  # noqa: PLC0415 - optional dependency

        self._hs = hyperscan
        # A pattern of a multi-line record (an NVRM sentence, an OOM report) spans raw lines with
        # their prefixes in between: its prefilter is the literal that must sit on one line; the
        # matcher finds where the record starts and confirms the pattern on the joined record.
        flags = hyperscan.HS_FLAG_PREFILTER | hyperscan.HS_FLAG_ALLOWEMPTY | hyperscan.HS_FLAG_MULTILINE
        key = _hs_key(hyperscan, patterns, multiline, flags)
        self.fallback: LiteralPrefilter | None = None
        self.screened: list[int] = []
        self.db = self._load_cached(cache_dir, key)
        if self.db is None:
            if cached_only:
                raise NotCached(key)
            # multi-line patterns compile as their literals only: cheap whatever their repeats.
            # Screening parses every pattern: done when compiling, its answer kept in the cache.
            self.screened = screen_heavy(patterns, skip=multiline)
            self.db, self.bad = _compile_database(hyperscan, _hs_expressions(patterns, multiline), self.screened,
                                                  flags)
            self._store_cached(cache_dir, key, self.bad, self.screened)
        if self.bad:
            # Patterns Hyperscan refuses still get a prefilter: their literals.
            sub = [patterns[i] for i in self.bad]
            self.fallback = LiteralPrefilter(sub, frozenset(n for n, i in enumerate(self.bad) if i in multiline))
            self._fallback_ids = self.bad

    def _load_cached(self, cache_dir: Path | None, key: str):
        """The database stored for ``key``, when the private cache holds it and it is the one stored there.

        Hyperscan checks a serialised database itself on loading: its header (magic, version, length, platform)
        and a CRC32C of its bytecode, which the header carries. The entry's metadata (``hsmeta-KEY``, beside the
        database ``hs-KEY``) records the database's first bytes, that CRC among them, so a valid database of other
        patterns put in its place is refused too. (A CRC of the whole ~5 MB, as this once took, was ~4 ms of a
        small scan, a SHA-256 ~3 ms; the database is its own file so that it is loaded as read, not copied out of
        a larger entry.)"""
        from qwen_triage.rulepack.cache import Cache

        self.bad = []
        cache = Cache.open(cache_dir) if cache_dir is not None else None
        header = cache.read(f"{HS_META}{key}") if cache is not None else None
        blob = cache.read(f"{HS_DB}{key}") if cache is not None and header is not None else None
        if header is None or blob is None:
            return None
        try:
            meta = json.loads(header)
            if meta.get("head") != _db_head(blob):
                return None  # replaced, or written by a version that did not record it: compile again
            bad = [int(x) for x in meta["bad"]]
            screened = [int(x) for x in meta.get("screened", [])]
            db = self._hs.loadb(blob, mode=self._hs.HS_MODE_BLOCK)
            db.scratch = self._hs.Scratch(db)  # a deserialised database has none
        except Exception:  # noqa: BLE001 - any cache problem means: compile again
            return None
        self.bad, self.screened = bad, screened
        return db

    def _store_cached(self, cache_dir: Path | None, key: str, bad: list[int], screened: list[int]) -> None:
        from qwen_triage.rulepack.cache import Cache

        if cache_dir is None or self.db is None:
            return  # nothing compiled: nothing worth caching
        cache = Cache.open(cache_dir)
        if cache is None:
            return
        blob = self._hs.dumpb(self.db)
        header = json.dumps({"bad": bad, "screened": screened, "head": _db_head(blob)}).encode()
        if cache.write(f"{HS_DB}{key}", blob) and cache.write(f"{HS_META}{key}", header):
            cache.prune(HS_DB, keep=f"{HS_DB}{key}")
            cache.prune(HS_META, keep=f"{HS_META}{key}")

    @property
    def horizon(self) -> int:
        return self.fallback.horizon if self.fallback is not None else 0

    @property
    def seen(self) -> int:
        return self.fallback.seen if self.fallback is not None else 1

    def resume(self, seen: int) -> None:
        if self.fallback is not None:
            self.fallback.resume(seen)

    def candidates(self, data: bytes) -> Candidates:
        out: Candidates = {}
        rfind = data.rfind
        get = out.get

        # Called for every match, so kept to the bone: the line's start (the match's last byte
        # may be the LF itself), then the pattern added to that line's set.
        def on_match(pid: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            start = rfind(b"\n", 0, to - 1) + 1 if to > 1 else 0
            pids = get(start)
            if pids is None:
                out[start] = {pid}
            else:
                pids.add(pid)

        if self.db is not None:
            self.db.scan(data, match_event_handler=on_match)
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


# Compiling the bundled pack costs ~8 s of CPU; the literal prefilter is several times slower per byte than
# Hyperscan (bench/bench_rg.py), so over about this much input compiling first pays back within the run.
INLINE_ABOVE = 256 * 2**20


def engine_for_input(engine: str, input_bytes: int) -> str:
    """The engine a run over ``input_bytes`` of log should ask for: "auto" becomes "hyperscan" (compile
    now, when the cache lacks the database) where the input is big enough to pay for it."""
    if engine == "auto" and input_bytes >= INLINE_ABOVE and build_mode() != "off" and hyperscan_available():
        return "hyperscan"
    return engine


def build_prefilter(
    patterns: list[str], engine: str = "auto", cache_dir: Path | None = None, multiline: frozenset[int] = frozenset()
) -> Prefilter:
    """``engine``: "auto" (Hyperscan where it loads), "hyperscan" or "literal".

    ``multiline``: ids of patterns that match multi-line records (their lines joined).

    "auto" never compiles Hyperscan on the critical path when it has a cache: compiling the
    bundled pack costs ~8 s of CPU, the literal prefilter (RE2) ~0.2 s, and both give the same
    candidates-then-confirm findings. So a database the cache holds is used; one it lacks is
    built for the next run by a detached, niced child (engine.detached) that writes the cache
    atomically, and this run scans with the literal prefilter. ``QWEN_TRIAGE_HS_BUILD=inline``
    restores compiling first (long runs over big inputs), ``off`` never compiles in "auto".
    "hyperscan" always compiles when it must.
    """
    if engine not in ("auto", "hyperscan", "literal"):
        raise ValueError(f"unknown prefilter engine {engine!r}")
    if engine == "auto" and cache_dir is not None and hyperscan_available():
        mode = build_mode()
        if mode != "inline":
            try:
                return HyperscanPrefilter(patterns, cache_dir=cache_dir, multiline=multiline, cached_only=True)
            except NotCached as missing:
                literal = LiteralPrefilter(patterns, multiline)
                if mode == "background":
                    literal.building = start_build(patterns, multiline, cache_dir, str(missing))
                return literal
    if engine != "literal" and (engine == "hyperscan" or hyperscan_available()):
        return HyperscanPrefilter(patterns, cache_dir=cache_dir, multiline=multiline)
    return LiteralPrefilter(patterns, multiline)
