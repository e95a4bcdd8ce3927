#!/usr/bin/env python3
"""This checkout's scan beside another checkout's (and ripgrep's) on the same log: CPU seconds, side by side.

    python bench/bench_ab.py LOG --against DIR [--rounds 2] [--rg PATH] [--engine hyperscan]

A change to the engine is measured against the code before it (``git worktree add /tmp/before main``)
in one run: ``qwen-triage scan --format json LOG`` of each checkout, alternating, each with a private
cache whose Hyperscan database is compiled before timing (the user's cache is shared by every checkout
and pack on the machine). With ``--rg``, ripgrep on the prefilter's own patterns, widened as the literal
engine widens them, in byte mode (``--no-unicode``), is the yardstick the issues quote. CPU time (user +
system, from ``wait4``) measures the work; wall time on a loaded machine measures the queue. Prints
each round, the medians, the ratios and the load average before and after: read ratios from one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cpu_run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, exit status) of one process."""
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    _pid, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - t0, child.returncode


def rg_patterns(work: Path) -> Path:
    """The prefilter's own patterns as the literal engine widens them (every construct whose bytes are not known
    exactly made "any bytes"): in byte mode ripgrep then finds about the lines the prefilter gives."""
    path = work / "rg-prefilter.pats"
    subprocess.run([sys.executable, "-c", "import sys; from qwen_triage.engine.scanner import compile_pack; "
                    "from qwen_triage.engine.prefilter import _widen; "
                    "open(sys.argv[1], 'wb').write(b''.join(_widen(p) + b'\\n' for p in "
                    "compile_pack(engine='literal').patterns))", str(path)],
                   check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--against", type=Path, required=True, help="the other checkout (its repository root)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--engine", default="hyperscan", choices=("hyperscan", "literal"))
    ap.add_argument("--rg", help="ripgrep binary: also time it on the pack's patterns (widened, --no-unicode)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="qt-bench-ab-"))
    trees = {"before": args.against.resolve(), "after": ROOT}
    runs: dict[str, tuple[list[str], dict[str, str] | None, Path | None]] = {}
    for name, tree in trees.items():
        env = {**os.environ, "PYTHONPATH": str(tree), "XDG_CACHE_HOME": str(work / f"cache-{name}")}
        cmd = [sys.executable, "-m", "qwen_triage", "scan", "--engine", args.engine, "--format", "json"]
        cpu_run(cmd + ["/dev/null"], {**env, "QWEN_TRIAGE_HS_BUILD": "inline"}, work)  # the database, compiled
        runs[name] = (cmd + [str(args.log)], env, work)
    if args.rg:
        pats = rg_patterns(work)
        runs["rg"] = ([args.rg, "--regex-size-limit", "1G", "--dfa-size-limit", "1G", "--no-unicode", "-c", "-f",
                       str(pats), str(args.log)], None, None)
    load = [os.getloadavg()[0]]
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    print(f"{args.log} ({args.log.stat().st_size / 1e6:.0f} MB), engine {args.engine}, {args.rounds} rounds, "
          f"before = {trees['before']}")
    for r in range(args.rounds):
        line = []
        for name, (cmd, env, cwd) in runs.items():
            seconds, wall, code = cpu_run(cmd, env, cwd)
            if code not in (0, 1):
                print(f"  {name} exited {code}")
            cpu[name].append(seconds)
            line.append(f"{name} {seconds:6.2f} s CPU ({wall:6.2f} s wall)")
        load.append(os.getloadavg()[0])
        print(f"  round {r + 1}: " + "; ".join(line))
    med = {name: statistics.median(v) for name, v in cpu.items()}
    print(f"load average (1 min): {min(load):.1f}-{max(load):.1f} on {os.cpu_count()} CPUs")
    print(f"median CPU: " + ", ".join(f"{n} {s:.2f} s" for n, s in med.items()))
    print(f"after / before: {med['after'] / med['before']:.2f}x")
    if "rg" in med:
        print(f"vs rg: before {med['before'] / med['rg']:.2f}x, after {med['after'] / med['rg']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
