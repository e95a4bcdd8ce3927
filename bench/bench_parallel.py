#!/usr/bin/env python3
"""One big log scanned in one process and split over the cores (engine.split), side by side (issue 31 §6).

    python bench/bench_parallel.py [--lines 2000000] [--jobs N] [--rounds 2] [--log PATH]

The shared mixed log (``../shared/bench/gen_log.py --seed 7``; this repository's generator when that is
absent): 2 M lines are ~300 MiB, above the 256 MiB from which ``scan`` splits an input. Each round runs
``qwen-triage scan --format json LOG`` with ``--jobs 1`` (one process) and ``--jobs N`` (N: the CPUs this
process may use), alternating, with a private cache whose Hyperscan database is compiled before timing.
Prints wall seconds (what a user waits), CPU seconds of the scan and its workers (user + system, from
``wait4``: the work, and what splitting adds to it: warm-ups, the merge), peak RSS of the largest process
(flat: a worker holds a block, not its part), whether both reports are the same (but ``seconds``), and the
load average before and after: on a loaded machine the wall times measure the queue as much as the scan.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from bench_run import make_lines  # noqa: E402 - the shared generator, or this repository's


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def scan(log: Path, jobs: int, env: dict[str, str], out: Path) -> tuple[float, float, int, int]:
    """(wall seconds, CPU seconds with its workers', peak RSS bytes, exit status) of one scan into ``out``."""
    t0 = time.perf_counter()
    with open(out, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "qwen_triage", "scan", "--format", "json", "--jobs", str(jobs),
                                 str(log)], stdout=fh, stderr=subprocess.DEVNULL, env=env)
        _pid, status, usage = os.wait4(proc.pid, 0)  # the workers the scan waited for are counted in
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, proc.returncode


def report(path: Path) -> dict:
    obj = json.loads(path.read_text())
    obj["stats"].pop("seconds", None)
    return obj


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--log", type=Path, help="a log to scan instead of a generated one")
    ap.add_argument("--jobs", type=int, default=usable_cpus())
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="qt-bench-parallel-") as tmp:
        log = args.log or Path(tmp, "mixed.log")
        if args.log is None:
            make_lines(log, args.lines)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(Path(tmp, "cache")),
               "QWEN_TRIAGE_HS_BUILD": "inline"}
        env.pop("QWEN_TRIAGE_SPLIT_ABOVE", None)
        subprocess.run([sys.executable, "-m", "qwen_triage", "rules", "warm"], env=env, check=True,
                       capture_output=True)  # the pack and its Hyperscan database, compiled before timing
        before = os.getloadavg()
        runs: dict[int, list[tuple[float, float, int, int]]] = {1: [], args.jobs: []}
        for _ in range(args.rounds):
            for jobs in runs:
                runs[jobs].append(scan(log, jobs, env, Path(tmp, f"report-{jobs}.json")))
        after = os.getloadavg()
        same = report(Path(tmp, "report-1.json")) == report(Path(tmp, f"report-{args.jobs}.json"))
        size = log.stat().st_size
    print(f"log: {size / 2**20:.0f} MiB ({args.log or f'{args.lines:,} lines of gen_log.py --seed 7'}); "
          f"{usable_cpus()} usable CPUs; load average (1, 5 min): {before[0]:.1f} {before[1]:.1f} before, "
          f"{after[0]:.1f} {after[1]:.1f} after")
    print(f"{'':14}{'wall s (each round)':>26}{'CPU s (each round)':>26}{'peak RSS MiB':>14}  exit")
    for jobs, rows in runs.items():
        walls = " ".join(f"{r[0]:6.1f}" for r in rows)
        cpus = " ".join(f"{r[1]:6.1f}" for r in rows)
        label = "one process" if jobs == 1 else f"--jobs {jobs}"
        print(f"{label:14}{walls:>26}{cpus:>26}{max(r[2] for r in rows) / 2**20:>14.0f}  "
              f"{','.join(str(r[3]) for r in rows)}")
    one, split = runs[1], runs[args.jobs]
    wall = statistics.median(r[0] for r in one) / statistics.median(r[0] for r in split)
    cpu = statistics.median(r[1] for r in split) / statistics.median(r[1] for r in one)
    print(f"median wall: split {wall:.2f}x faster; median CPU: split {cpu:.2f}x one process's; "
          f"reports {'the same' if same else 'DIFFERENT'} (but seconds)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
