"""Start the work that fills the cache off the critical path: detached children (engine.warmup).

Compiling the bundled pack costs Hyperscan ~8 s of CPU; a 10-line scan costs ~0.3 s. So a
run whose cache lacks the database scans with the literal prefilter (same findings) and leaves a
child (engine.warmup, run as a module, never imported), in a session of its own, niced, with no
terminal or pipe of its parent's, to compile the database and write it into the private cache
(atomically, with its digest: see rulepack.cache). A parent killed at once (node-problem-detector's 5 s plugin timeout) does not
stop it, so the next run finds the database.

The job (the patterns) goes through the cache too, as a private file; a lock file keeps two
runs from compiling the same database at once, and a lock left by a child that died is taken
over after :data:`STALE_LOCK` seconds.

A pack load cut by its deadline (rulepack.pack.LoadDeadline) hands the rest to the same kind of
child (:func:`start_pack_load`): it validates the remaining files and compiles the database, so
a node whose checks are killed at 5 s is warm by the time of its next checks.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

STALE_LOCK = 15 * 60  # seconds: a compile takes seconds, a minute on a loaded machine
BUILD_ENV = "QWEN_TRIAGE_HS_BUILD"  # "background" (default), "inline" (compile before scanning), "off"
BUILD_MODES = ("background", "inline", "off")


def build_mode() -> str:
    """How ``engine="auto"`` gets a Hyperscan database the cache lacks (engine.prefilter.build_prefilter);
    "off" also keeps a load cut by its deadline from starting a child."""
    mode = os.environ.get(BUILD_ENV, "").strip().lower() or "background"
    return mode if mode in BUILD_MODES else "background"


def _names(key: str) -> tuple[str, str]:
    # not "hs-*": Cache.prune("hs-") keeps only the newest databases
    return f"job-hs-{key}.json", f"lock-hs-{key}"


def _take_lock(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:
        try:
            if time.time() - os.lstat(path).st_mtime < STALE_LOCK:
                return False  # another run's child is compiling it
            os.unlink(path)
        except OSError:
            return False
        return _take_lock(path)
    except OSError:
        return False
    os.close(fd)
    return True


def _drop(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def start_build(patterns: list[str], multiline: frozenset[int], cache_dir: Path, key: str) -> bool:
    """Start the detached child that compiles ``patterns`` into the cache; True when one was started.

    False when the cache cannot be trusted, another child holds the lock, or no child can start:
    the run goes on with the literal prefilter either way.
    """
    from qwen_triage.rulepack.cache import Cache

    cache = Cache.open(cache_dir)
    if cache is None:
        return False
    job, lock = _names(key)
    if not _take_lock(cache.path / lock):
        return False
    data = json.dumps({"key": key, "patterns": patterns, "multiline": sorted(multiline)}).encode()
    if not cache.write(job, data):
        _drop(cache.path / lock)
        return False
    if not _spawn(["hs", str(cache.path), key]):
        _drop(cache.path / job)
        _drop(cache.path / lock)
        return False
    return True


def _spawn(args: list[str]) -> bool:
    """This module as a detached child: its own session, no descriptor of ours (a pipe NPD reads stays closed)."""
    import subprocess  # only when a child starts: not on a warm run's start-up path

    package_root = str(Path(__file__).resolve().parent.parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    try:
        subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "qwen_triage.engine.warmup", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd="/", env=env, close_fds=True, start_new_session=True,
        )
    except OSError:
        return False
    return True


PACK_LOCK = "lock-pack"


def start_pack_load(cache_dir: Path, extra_dirs: list[Path], bundled: bool) -> bool:
    """Finish a pack load cut by its deadline in a detached child (validate the rest, compile the database)."""
    from qwen_triage.rulepack.cache import Cache

    if build_mode() == "off":
        return False
    cache = Cache.open(cache_dir)
    if cache is None or not _take_lock(cache.path / PACK_LOCK):
        return False
    args = ["pack", str(cache.path), "bundled" if bundled else "alone", *(str(Path(d).resolve()) for d in extra_dirs)]
    if not _spawn(args):
        _drop(cache.path / PACK_LOCK)
        return False
    return True
