"""The compiled rule pack of a worker process, for the scans that use several (engine.batch: one input each;
engine.split: the parts of one big input).

A process pool's worker compiles the pack once, when it starts: a forked one inherits the pack its parent
compiled (:func:`share`, before the pool starts: copy-on-write, nothing compiled again), a spawned one loads it
from the on-disk cache in a fraction of a second. The pack is this module's, per process: the one thing a worker
function cannot be given with each task (a Hyperscan database does not pickle).
"""

from __future__ import annotations

import os
import signal

from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.scanner import compile_pack

_pack: CompiledPack | None = None
_pack_for: tuple[tuple[str, ...], str] | None = None  # (rule_dirs, engine) of _pack


def default_jobs() -> int:
    """The CPUs this process may run on (its affinity, as a container or `taskset` sets it)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def share(compiled: CompiledPack, rule_dirs: tuple[str, ...], engine: str) -> None:
    """The pack this process compiled, for the workers it forks next (and for itself, as a worker of one)."""
    global _pack, _pack_for
    _pack, _pack_for = compiled, (tuple(rule_dirs), engine)


def init(rule_dirs: tuple[str, ...], engine: str, pool: bool = False) -> None:
    """A worker starts: the pack for ``rule_dirs`` and ``engine``, inherited or compiled. ``pool``: Ctrl-C is
    the parent's to handle (it stops the pool); a pool's workers ignore it and print no tracebacks."""
    global _pack, _pack_for
    if pool:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if _pack is None or _pack_for != (tuple(rule_dirs), engine):
        _pack = compile_pack(rule_dirs, engine=engine)
        _pack_for = (tuple(rule_dirs), engine)


def pack() -> CompiledPack:
    """This worker's pack (after :func:`init`)."""
    assert _pack is not None, "worker not initialised"
    return _pack
