"""Whose rules these are: a rule directory another user owns or can write to is refused, never loaded.

A rule pack decides what ``check`` drains a node for, what ``run --kill-on-fatal`` stops and what a
relaunch changes. Root's node check reading ``--rules`` / ``QWEN_TRIAGE_RULES`` / a site directory that
``nobody`` could write would let any local user drain the node with a file planted there. The rule is the
one the prebuilt pack and the cache already follow: owned by root or by this user, writable by no group and
no other user — the directory, every directory below it, and every rule file in it. Mode bits do not count
on a read-only mount (a ConfigMap volume), where nobody can write.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from qwen_triage.rulepack.errors import RuleFileError


def untrusted_reason(path: Path) -> str | None:
    """Why ``path`` (followed to what it names) cannot be trusted to hold rules; None when it can."""
    try:
        st = os.stat(path)
    except OSError:
        return None  # the loader says why it cannot be read
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
        return None  # a device or a FIFO: the loader refuses it as not a regular file
    kind = "directory" if stat.S_ISDIR(st.st_mode) else "file"
    if st.st_uid not in (0, os.geteuid()):
        return f"rule {kind} belongs to uid {st.st_uid}, not to root or this user: refused"
    if st.st_mode & 0o022 and not _read_only_mount(path):
        return (f"rule {kind} is writable by {'others' if st.st_mode & 0o002 else 'its group'} "
                f"(mode {stat.S_IMODE(st.st_mode):04o}): refused; `chmod go-w` it to use it")
    return None


def _read_only_mount(path: Path) -> bool:
    """A read-only mount (a Kubernetes ConfigMap volume: root-owned, mode 0777, ``readOnly: true``): nobody can
    write there, whatever the mode bits say."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def require_trusted(directory: Path, files: list[Path]) -> None:
    """Raise :class:`RuleFileError` for the first untrusted path among ``directory``, the directories between
    it and each file, and the files themselves."""
    seen: set[Path] = set()
    for path in [directory, *files]:
        chain = [path]
        parent = path.parent
        while path != directory and parent not in seen and directory in parent.parents:
            chain.append(parent)
            parent = parent.parent
        for p in chain:
            if p in seen:
                continue
            seen.add(p)
            reason = untrusted_reason(p)
            if reason:
                raise RuleFileError(p, 1, 1, reason)
