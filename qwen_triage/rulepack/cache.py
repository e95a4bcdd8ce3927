"""The user's cache directory, trusted only when it is private: the validated pack and the Hyperscan database.

A cache another user (or a planted file) can write is a way to run code or to
hide every rule, so: nothing read from it can name code to run (the whole pack is
a pickle whose loader resolves only the pack's own data classes, rulepack.pack;
each file's entry is JSON; the Hyperscan database is checked by Hyperscan's own
CRC32C, against damage, and against the header recorded beside it, against another
database put in its place); keys are digests of the files'
contents, not their size and mtime; the directory is 0700 and every file 0600
and owned by this user, anything else is ignored (never read, never trusted);
writes go to a private temporary file renamed into place; old entries of the
same kind are pruned.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

from qwen_triage.atomicfile import write_atomic

MAX_ENTRY_BYTES = 256 * 2**20
KEEP_PER_KIND = 4  # entries of one kind kept beside the newest (several packs in use at once)


def user_cache_path() -> Path:
    """``$XDG_CACHE_HOME/qwen-triage`` (``~/.cache/qwen-triage``) on Linux, as platformdirs has it; platformdirs
    itself elsewhere. Every scan asks, and on Linux the answer does not need the package imported."""
    if sys.platform == "linux" and "ANDROID_ROOT" not in os.environ:
        base = os.environ.get("XDG_CACHE_HOME", "")
        return Path(base if base.strip() else os.path.expanduser("~/.cache")) / "qwen-triage"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("qwen-triage"))


def hasher() -> Any:
    """A fresh BLAKE2b object for the cache's keys, from CPython's own ``_blake2`` where the build has it.

    ``hashlib`` would load OpenSSL's bindings too: about 3 ms of every scan, for one digest. A build without
    ``_blake2`` takes hashlib's BLAKE2b, the same digest.
    """
    try:
        from _blake2 import blake2b
    except ImportError:
        from hashlib import blake2b
    return blake2b(digest_size=32)


def digest(*parts: bytes) -> str:
    h = hasher()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


class Cache:
    """A private cache directory; every method fails soft (a miss), never raises."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def open(cls, path: Path | None = None) -> "Cache | None":
        """The cache at ``path`` (default: the user cache dir), or None when it cannot be trusted."""
        path = path or user_cache_path()
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                return None
            if st.st_mode & 0o077:
                os.chmod(path, 0o700)  # ours, but too open: close it before trusting anything in it
                if os.lstat(path).st_mode & 0o077:
                    return None
        except OSError:
            return None
        return cls(path)

    def read(self, name: str) -> bytes | None:
        """The entry's bytes when it is a regular file of ours, private and not too big; else None."""
        if "/" in name or name.startswith("."):
            return None
        try:
            fd = os.open(self.path / name, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if (
                not stat.S_ISREG(st.st_mode)
                or st.st_uid != os.geteuid()
                or st.st_mode & 0o077
                or st.st_size > MAX_ENTRY_BYTES
            ):
                return None
            # one read of the whole entry (a regular file gives it whole): no joined copy of a 5 MB database
            chunks = [os.read(fd, st.st_size)]
            left = st.st_size - len(chunks[0])
            while left > 0 and chunks[-1]:  # a short read: the rest, as far as it goes
                chunks.append(os.read(fd, left))
                left -= len(chunks[-1])
            _touch(fd)
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        except OSError:
            return None
        finally:
            os.close(fd)

    def write(self, name: str, data: bytes) -> bool:
        """Atomically: a private temporary file, then rename. False when it could not be written."""
        try:
            write_atomic(self.path / name, data, mode=0o600)
        except OSError:
            return False
        return True

    def prune(self, prefix: str, keep: str, keep_newest: int = KEEP_PER_KIND) -> None:
        """Remove entries named ``prefix*`` beyond the ``keep_newest`` used last, never ``keep``.

        A read touches its entry, so "newest" means used last: the pack a node scans with every
        day keeps its database however many other packs (a rule author's drafts) come and go."""
        try:
            entries = [p for p in self.path.iterdir() if p.name.startswith(prefix) and p.name != keep]
            entries.sort(key=lambda p: p.stat().st_mtime, reverse=True)
            for old in entries[keep_newest:]:
                old.unlink()
        except OSError:
            pass


def _touch(fd: int) -> None:
    """Mark an entry as just used (its mtime), for :meth:`Cache.prune`; best effort."""
    try:
        os.utime(fd)
    except (OSError, NotImplementedError):
        pass
