#!/usr/bin/env python3
"""Cold start (issue 19), side by side in one run: what a first scan and a fresh node's first check cost.

    python bench/bench_coldstart.py [--runs 5] [--mode background|inline|off]

Prints three figures:

1. CPU time (user + system, of the scan process itself) of a 10-line `scan` with an empty cache
   against the same scan warm, and their ratio (target: at most 2), as installed from a wheel (the
   bundled pack validated at build time: rulepack.prebuilt), and without that artefact (a checkout that
   never built it: every bundled file parsed on the first run). The Hyperscan database is
   built by a detached, niced child for the next run (``--mode background``, the default); its CPU
   is off the critical path and not counted. ``--mode inline`` compiles it before scanning: the
   behaviour before issue 19, for the "before" figure.
2. Warm start-up: median wall time of the 10-line scan against `python -m json.tool` on a tiny
   file (target: at most 3).
3. `qwen-triage check --format npd` on a fresh node (new state directory, no XDG_CACHE_HOME, so the
   cache is <state>/cache) under node-problem-detector's 5 s plugin timeout: answered (with its
   exit status and line) or killed, for the first few runs of that node.

The machine should be quiet: read the ratios, not the milliseconds. `bench/bench_rg.py` stays the
throughput measure, `bench/bench_startup.py` the start-up one.
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
from bench_startup import SMALL_LOG, installed_bytecode, startup_pair  # noqa: E402

NPD_TIMEOUT = 5.0


def npd_run(cmd: list[str], env: dict[str, str], timeout: float) -> tuple[float, int | None, str]:
    """(wall seconds, exit status or None when killed at ``timeout``, first line of stdout)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # as NPD does: the plugin process, not its detached children
        proc.communicate()
        return time.perf_counter() - t0, None, ""
    lines = out.decode(errors="replace").strip().splitlines()
    return time.perf_counter() - t0, proc.returncode, lines[0] if lines else ""


def timed_cpu(cmd: list[str], env: dict[str, str]) -> float:
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env,
                   check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def timed_wall(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env,
                   check=False)
    return time.perf_counter() - t0


def wait_built(cache: Path, limit: float = 600) -> bool:
    """Until the detached children are done (no lock left in the cache)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if cache.is_dir() and not any(p.name.startswith(("lock-", "job-")) for p in cache.iterdir()):
            return True
        time.sleep(0.5)
    return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="warm runs (medians)")
    ap.add_argument("--mode", choices=("background", "inline", "off"), default="background",
                    help="QWEN_TRIAGE_HS_BUILD for the runs (inline: compile before scanning, as before issue 19)")
    ap.add_argument("--node-runs", type=int, default=3, help="fresh-node checks in a row")
    args = ap.parse_args()
    installed_bytecode()
    # the bundled pack validated once, where the wheel's build hook (hatch_build.py) puts it
    subprocess.run([sys.executable, "-m", "qwen_triage.rulepack.prebuild"], stdout=subprocess.DEVNULL, check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    base_env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "QWEN_TRIAGE_PREBUILT")}
    base_env["PYTHONPATH"] = str(ROOT)
    base_env["QWEN_TRIAGE_HS_BUILD"] = args.mode
    with tempfile.TemporaryDirectory() as tmp:
        scan, jsontool = startup_pair(tmp)

        # 1. cold vs warm CPU, installed (prebuilt pack) and without the artefact
        for label, extra in (("installed", {}), ("no prebuilt pack", {"QWEN_TRIAGE_PREBUILT": "off"})):
            xdg = Path(tmp, f"xdg-{len(extra)}")
            env = {**base_env, **extra, "XDG_CACHE_HOME": str(xdg)}
            cold = timed_cpu(scan, env)
            built = wait_built(xdg / "qwen-triage")
            warm = statistics.median(timed_cpu(scan, env) for _ in range(args.runs))
            print(f"10-line scan CPU, empty cache vs warm ({args.mode}, {label}): {cold:.2f} s vs {warm:.2f} s "
                  f"= {cold / warm:.1f}x (target <= 2x){'' if built else '  [background build not finished]'}")
        env = {**base_env, "XDG_CACHE_HOME": str(Path(tmp, "xdg-0"))}

        # 2. warm start-up vs json.tool
        timed_wall(jsontool, env)
        ours, theirs = [], []
        for _ in range(max(args.runs, 3)):
            ours.append(timed_wall(scan, env))
            theirs.append(timed_wall(jsontool, env))
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"warm start-up, 10-line scan vs python -m json.tool: {a * 1000:.0f} ms vs {b * 1000:.0f} ms "
              f"= {a / b:.1f}x (target <= 3x)")

        # 3. fresh node, NPD's plugin timeout
        state = Path(tmp, "node-state")
        node_log = Path(tmp, "node.log")
        node_log.write_text(SMALL_LOG)
        check = [sys.executable, "-m", "qwen_triage", "check", "--format", "npd", "--file", str(node_log),
                 "--state", str(state)]
        for i in range(args.node_runs):
            wall, code, line = npd_run(check, base_env, timeout=NPD_TIMEOUT)
            verdict = f"answered in {wall:.1f} s, exit {code}: {line}" if code is not None else f"KILLED at {NPD_TIMEOUT:.0f} s"
            print(f"fresh-node check run {i + 1} under {NPD_TIMEOUT:.0f} s: {verdict}")
            if i + 1 < args.node_runs:
                time.sleep(NPD_TIMEOUT)  # NPD's invoke interval is longer; the detached warm-up goes on meanwhile
    return 0


if __name__ == "__main__":
    sys.exit(main())
