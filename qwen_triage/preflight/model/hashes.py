"""sha256 of model files, streamed in chunks, and ``sha256sum``-format lists."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

CHUNK = 8 << 20
# ``<hex>  name`` (text mode) or ``<hex> *name`` (binary mode), as sha256sum writes.
_LINE = re.compile(r"^\\?(?P<hex>[0-9a-fA-F]{64})\s[ *](?P<name>.+?)\s*$")
# Ollama names blobs by their digest.
_BLOB = re.compile(r"^sha256[-:](?P<hex>[0-9a-f]{64})$")

# start(name, total_bytes) -> advance(n_bytes)
ProgressStart = Callable[[str, int], Callable[[int], None]]


class ChecksumFileError(ValueError):
    pass


def sha256_file(path: Path, progress: ProgressStart | None = None) -> str:
    h = hashlib.sha256()
    advance = progress(path.name, path.stat().st_size) if progress else None
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
            if advance:
                advance(len(chunk))
    return h.hexdigest()


def parse_sums(text: str) -> dict[str, str]:
    """name -> lower-case hex digest. Blank lines and ``#`` comments are skipped."""
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            raise ChecksumFileError(f"line {n} is not in sha256sum format: {line[:80]!r}")
        out[m["name"].removeprefix("./")] = m["hex"].lower()
    return out


def blob_digest(path: Path) -> str | None:
    m = _BLOB.match(path.name)
    return m["hex"] if m else None
