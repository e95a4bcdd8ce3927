"""Cutting a byte stream into whole lines, with a bound on line length."""

from __future__ import annotations

from qwen_triage.engine.sources import MAX_LINE


class LineSplitter:
    """Bytes in, whole lines out (without their LF); a line over ``max_line`` keeps its prefix."""

    __slots__ = ("max_line", "buf", "skipping")

    def __init__(self, max_line: int = MAX_LINE):
        self.max_line = max_line
        self.buf = bytearray()
        self.skipping = False  # inside the unread tail of an overlong line

    def feed(self, data: bytes) -> list[tuple[bytes, bool]]:
        """Complete lines in ``data`` (joined to what was pending), each with its cut flag."""
        out: list[tuple[bytes, bool]] = []
        parts = data.split(b"\n")
        tail = parts.pop()  # after the last LF: the new pending part
        limit = self.max_line
        for i, part in enumerate(parts):
            if i == 0 and (self.buf or self.skipping):
                cut = self.skipping or len(self.buf) + len(part) > limit
                line = bytes(self.buf) + (b"" if self.skipping else part)
                self.buf.clear()
                self.skipping = False
                out.append((line[:limit], cut))
            elif len(part) > limit:
                out.append((part[:limit], True))
            else:
                out.append((part, False))
        if tail:
            if self.skipping:
                pass
            else:
                self.buf += tail
                if len(self.buf) > limit:
                    del self.buf[limit:]
                    self.skipping = True
        return out

    def pending(self) -> bytes:
        return bytes(self.buf)

    def close(self) -> list[tuple[bytes, bool]]:
        """The partial last line, if any, as a line of its own."""
        if not self.buf and not self.skipping:
            return []
        line, cut = bytes(self.buf), self.skipping
        self.buf.clear()
        self.skipping = False
        return [(line, cut)]
