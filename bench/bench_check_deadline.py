#!/usr/bin/env python3
"""A fresh node's `check --format npd` under load (issue 31 §4): does it answer inside NPD's 5 s?

    python bench/bench_check_deadline.py [--runs 10] [--per-core 4] [--timeout 4] [--prebuilt yes|no]

Starts ``--per-core`` busy-loop processes per core (four by default: a node whose GPUs' host threads
keep every core busy), then runs `qwen-triage check --format npd` ``--runs`` times, each a first run:
a new state directory and no XDG_CACHE_HOME (the cache is <state>/cache, empty). Each run is killed
at ``--kill`` seconds (60 by default, so the distribution shows how late a late one is; NPD kills at
5 s). Prints, with the load average before, while and after:

- how many runs answered inside 5 s wall, and the wall distribution (min, median, p90, max);
- the answers (NPD exit status and the first words of the line): ``unknown`` is the expected
  answer of a fresh node cut by its deadline, the detached loader finishing the rules meanwhile;
- ``python -c pass`` under the same load: the floor (a shared, oversubscribed machine can put it
  past 5 s by itself; then read the check's figures against it).

``--prebuilt yes`` (default) validates the bundled pack ahead of time as a wheel's build hook does
(rulepack.prebuilt); ``no`` is a source checkout that never built it (every rule file parsed cold).
The detached loaders and compilers the runs leave (niced) are ended at the end, by their pids.
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
sys.path.insert(0, str(ROOT / "bench"))
from bench_coldstart import NPD_TIMEOUT, npd_run  # noqa: E402

BUSY = "while True: pass"


def busy_loops(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", BUSY], stdin=subprocess.DEVNULL) for _ in range(n)]


def end(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def end_children_under(tmp: str) -> int:
    """The detached warm-up children the runs left (their argv names a cache under ``tmp``): ended by pid."""
    import psutil

    ended = 0
    for proc in psutil.process_iter(["pid", "cmdline"]):
        argv = proc.info["cmdline"] or []
        if "qwen_triage.engine.warmup" in argv and any(a.startswith(tmp) for a in argv):
            try:
                proc.kill()
                ended += 1
            except psutil.Error:
                pass
    return ended


def bare_python(env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True, stdin=subprocess.DEVNULL)
    return time.perf_counter() - t0


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--per-core", type=int, default=4, help="busy-loop processes per core")
    ap.add_argument("--timeout", type=float, default=4.0, help="the check's --timeout (the default: 4 s)")
    ap.add_argument("--kill", type=float, default=60.0, help="a run still going after this long is killed")
    ap.add_argument("--prebuilt", choices=("yes", "no"), default="yes")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "QWEN_TRIAGE_PREBUILT")}
    env["PYTHONPATH"] = str(ROOT)
    env["QWEN_TRIAGE_HS_BUILD"] = "background"  # as deployed
    if args.prebuilt == "yes":
        subprocess.run([sys.executable, "-m", "qwen_triage.rulepack.prebuild"], stdout=subprocess.DEVNULL,
                       check=True, env=env)
    else:
        env["QWEN_TRIAGE_PREBUILT"] = "off"
    cores = os.cpu_count() or 1
    print(f"check --format npd, first run (empty state and cache), --timeout {args.timeout:g}, prebuilt pack: "
          f"{args.prebuilt}; {args.per_core} busy loops x {cores} cores; load before {load()}")
    walls: list[float] = []
    answers: dict[str, int] = {}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-deadline-") as tmp:
        log = Path(tmp, "node.log")
        log.write_text("kernel: all quiet\n" * 10)
        busy = busy_loops(args.per_core * cores)
        try:
            time.sleep(2.0)  # the loops get going before the first run
            bare = bare_python(env)
            print(f"  python -c pass under the same load (the floor no Python program goes under): {bare:.2f} s wall")
            for i in range(args.runs):
                cmd = [sys.executable, "-m", "qwen_triage", "check", "--format", "npd", "--file", str(log),
                       "--state", str(Path(tmp, f"state-{i}")), "--timeout", f"{args.timeout:g}"]
                wall, code, line = npd_run(cmd, env, timeout=args.kill)
                walls.append(wall)
                loads.append(os.getloadavg()[0])
                kind = "KILLED" if code is None else f"exit {code} {line.split(':')[0]}"
                answers[kind] = answers.get(kind, 0) + 1
                print(f"  run {i + 1}: {wall:5.2f} s  {kind}: {line[:70]}")
        finally:
            end(busy)
            left = end_children_under(tmp)
    inside = sum(w <= NPD_TIMEOUT for w in walls)
    print(f"inside {NPD_TIMEOUT:g} s wall: {inside} of {len(walls)}")
    print(f"wall: min {min(walls):.2f}  median {statistics.median(walls):.2f}  p90 {pct(walls, 0.9):.2f}  "
          f"max {max(walls):.2f} s")
    print("answers: " + ", ".join(f"{k} x{v}" for k, v in sorted(answers.items())))
    print(f"load (1 min) while running: {min(loads):.1f}-{max(loads):.1f}; after {load()}; "
          f"detached children ended: {left}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
