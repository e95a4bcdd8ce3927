"""What the detached children of engine.detached run: ``python -m qwen_triage.engine.warmup``.

``hs CACHE KEY``: compile the Hyperscan database of the job stored in the cache.
``pack CACHE bundled|alone [DIR...]``: finish a pack load cut by its deadline, then the database.
Niced; each drops its lock when done; a failure leaves nothing but a miss the next run retries.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from qwen_triage.engine.detached import BUILD_ENV, PACK_LOCK, _drop, _names


def load_rest(cache_dir: Path, bundled: bool, extra_dirs: list[Path]) -> bool:
    """What :func:`start_pack_load`'s child runs: the whole load, then the Hyperscan database, into the cache."""
    from qwen_triage.engine.compiled import CompiledPack
    from qwen_triage.engine.prefilter import hyperscan_available
    from qwen_triage.rulepack.pack import load_pack

    try:
        pack = load_pack(extra_dirs, bundled=bundled, cache_dir=cache_dir)
        if hyperscan_available():
            # "auto" in the background mode: the database is built by the one child holding its lock
            # (a check that ran meanwhile may have started it already)
            os.environ[BUILD_ENV] = "background"
            CompiledPack.build(pack, engine="auto", cache_dir=cache_dir)
        return True
    finally:
        _drop(cache_dir / PACK_LOCK)


def build(cache_dir: Path, key: str) -> bool:
    """Compile the job stored for ``key`` into the cache (what the child runs); True when the database is there."""
    from qwen_triage.engine.prefilter import HyperscanPrefilter, NotCached
    from qwen_triage.rulepack.cache import Cache

    cache = Cache.open(cache_dir)
    if cache is None:
        return False
    job, lock = _names(key)
    try:
        blob = cache.read(job)  # private and ours, or nothing
        if blob is None:
            return False
        try:
            data = json.loads(blob)
            patterns = [str(p) for p in data["patterns"]]
            multiline = frozenset(int(i) for i in data["multiline"])
        except (ValueError, KeyError, TypeError):
            return False
        HyperscanPrefilter(patterns, cache_dir=cache.path, multiline=multiline)
        try:  # the database is in the cache under the key the job was for
            HyperscanPrefilter(patterns, cache_dir=cache.path, multiline=multiline, cached_only=True)
        except NotCached:
            return False
        return True
    finally:
        _drop(cache.path / job)
        _drop(cache.path / lock)


def main(argv: list[str]) -> int:
    """``hs CACHE KEY`` or ``pack CACHE bundled|alone [DIR...]``."""
    if len(argv) < 3 or argv[0] not in ("hs", "pack"):
        return 2
    try:
        os.nice(19)  # leave the CPU to whatever the node is doing
    except OSError:
        pass
    try:
        if argv[0] == "hs":
            return 0 if build(Path(argv[1]), argv[2]) else 1
        return 0 if load_rest(Path(argv[1]), argv[2] == "bundled", [Path(d) for d in argv[3:]]) else 1
    except Exception:  # noqa: BLE001 - a detached child has nobody to tell; the next run retries
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
