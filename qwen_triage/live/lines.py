"""Cutting a byte stream into whole lines, with a bound on line length."""

from __future__ import annotations

from dataclasses import dataclass

from qwen_triage.inputs.source import MAX_LINE


@dataclass(frozen=True, slots=True)
class Lines:
    """Whole lines cut from a stream, kept as one block: each line ends in LF.

    One bytes object rather than a list of lines: a child printing a hundred
    thousand lines a second would otherwise cost an object per line, split and
    joined again on the way to the engine (which wants a block anyway).
    """

    data: bytes = b""
    count: int = 0
    cut: tuple[int, ...] = ()  # indices of the lines cut to the length bound

    def __bool__(self) -> bool:
        return self.count > 0

    def split(self) -> list[bytes]:
        """Each line, without its LF."""
        return self.data.split(b"\n")[:-1] if self.count else []

    def tail(self, n: int) -> list[bytes]:
        """The last ``n`` lines (fewer when there are fewer), without their LF."""
        if not self.count or n <= 0:
            return []
        return self.data[:-1].rsplit(b"\n", n)[-n:]

    def pairs(self) -> list[tuple[bytes, bool]]:
        """(line, cut) for each line."""
        cut = set(self.cut)
        return [(line, i in cut) for i, line in enumerate(self.split())]


def _bounded(whole: bytes, limit: int) -> tuple[bytes, list[int]]:
    """``whole`` (lines ending in LF) with every line over ``limit`` cut to it, and the cut lines' indices.

    Walks by at most ``limit`` bytes (the last LF within reach), so ordinary text
    costs about len/limit steps, not one per line.
    """
    if len(whole) <= limit:
        return whole, []
    pieces: list[bytes] = []
    cut: list[int] = []
    pos = kept = 0
    end = len(whole)
    while pos < end:
        nl = whole.rfind(b"\n", pos, pos + limit + 1)
        if nl >= 0:
            pos = nl + 1
            continue
        # an overlong line starts at pos: keep its first `limit` bytes
        pieces.append(whole[kept:pos])
        cut.append(whole.count(b"\n", 0, pos))
        pieces.append(whole[pos : pos + limit] + b"\n")
        pos = kept = whole.find(b"\n", pos + limit) + 1
    pieces.append(whole[kept:])
    return b"".join(pieces), cut


class LineSplitter:
    """Bytes in, whole lines out; a line over ``max_line`` keeps its prefix."""

    __slots__ = ("max_line", "buf", "skipping")

    def __init__(self, max_line: int = MAX_LINE):
        self.max_line = max_line
        self.buf = bytearray()
        self.skipping = False  # inside the unread tail of an overlong line

    def feed_lines(self, data: bytes) -> Lines:
        """The lines ``data`` completes (joined to what was pending), as one block."""
        limit = self.max_line
        last = data.rfind(b"\n")
        if last < 0:
            self._hold(data)
            return Lines()
        first_cut = False
        if self.buf or self.skipping:
            nl = data.find(b"\n")
            first_cut = self.skipping or len(self.buf) + nl > limit
            head = bytes(self.buf) + (b"" if self.skipping else data[:nl])
            self.buf.clear()
            self.skipping = False
            whole = head[:limit] + data[nl : last + 1]
        else:
            whole = data[: last + 1]
        whole, cut = _bounded(whole, limit)
        if first_cut and (not cut or cut[0] != 0):
            cut.insert(0, 0)
        self._hold(data[last + 1 :])
        return Lines(whole, whole.count(b"\n"), tuple(cut))

    def feed(self, data: bytes) -> list[tuple[bytes, bool]]:
        """Complete lines in ``data``, each with its cut flag (:meth:`feed_lines`, a pair per line)."""
        return self.feed_lines(data).pairs()

    def _hold(self, tail: bytes) -> None:
        if not tail or self.skipping:
            return
        self.buf += tail
        if len(self.buf) > self.max_line:
            del self.buf[self.max_line :]
            self.skipping = True

    def pending(self) -> bytes:
        return bytes(self.buf)

    def close_lines(self) -> Lines:
        """The partial last line, if any, as a line of its own."""
        if not self.buf and not self.skipping:
            return Lines()
        line, cut = bytes(self.buf), self.skipping
        self.buf.clear()
        self.skipping = False
        return Lines(line + b"\n", 1, (0,) if cut else ())

    def close(self) -> list[tuple[bytes, bool]]:
        return self.close_lines().pairs()
