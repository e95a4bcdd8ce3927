#!/usr/bin/env python3
"""Peak memory of `qwen-triage scan` as the input grows: flat, or not (issue 31).

    python bench/bench_memory.py [--sizes 100000,1000000,3000000]

One block of the shared mixed log (``../shared/bench/gen_log.py --seed 7``, 100 000 lines, ~17 MB; this
repository's generator when that is absent) is written to ``scan -``'s stdin as many times as each size
asks, so no input file of the larger sizes is generated or stored: a 10 M-line run (1.7 GB) needs no disk,
only the time (2-5 µs of CPU a line with Hyperscan: 20-50 s, minutes of wall time on a loaded machine),
which is why the default stops at 3 M.
Each size is its own process; its peak RSS is the maximum resident set size ``wait4`` reports (the
interpreter, the rule pack and the Hyperscan database included: ~80 MB before the first line). Prints
each size's lines, peak RSS, CPU seconds, and the largest peak over the smallest, with the load average.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from bench_run import make_lines  # noqa: E402 - the shared generator, or this repository's

BLOCK_LINES = 100_000


def scan_stdin(block: bytes, times: int, env: dict[str, str]) -> tuple[int, float, int]:
    """(peak RSS in bytes, CPU seconds, exit status) of one scan of ``block`` repeated ``times`` on stdin."""
    proc = subprocess.Popen([sys.executable, "-m", "qwen_triage", "scan", "--format", "json", "-"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None

    def feed() -> None:
        try:
            for _ in range(times):
                proc.stdin.write(block)  # type: ignore[union-attr]
            proc.stdin.close()  # type: ignore[union-attr]
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    writer.join()
    return usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000,3000000",
                    help="lines per run, comma-separated, multiples of 100000 (10000000: 20-50 s of CPU)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if any(n % BLOCK_LINES for n in sizes):
        ap.error(f"each size is a multiple of {BLOCK_LINES}")
    before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "block.log")
        make_lines(path, BLOCK_LINES)
        block = path.read_bytes()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(Path(tmp, "cache")),
               "QWEN_TRIAGE_HS_BUILD": "inline"}
        scan_stdin(block, 1, env)  # the cache filled: the pack, the Hyperscan database
        rows = [(n, *scan_stdin(block, n // BLOCK_LINES, env)) for n in sizes]
    after = os.getloadavg()[0]
    print(f"load average (1 min): {before:.1f} before, {after:.1f} after, on {os.cpu_count()} CPUs; "
          f"input: {len(block) / BLOCK_LINES:.0f} bytes a line")
    for n, rss, cpu, status in rows:
        print(f"  {n:>10,} lines  peak RSS {rss / 2**20:7.1f} MiB  CPU {cpu:6.1f} s  exit {status}")
    peaks = [r[1] for r in rows]
    print(f"largest peak / smallest: {max(peaks) / min(peaks):.2f}x over {max(sizes) // min(sizes)}x the lines "
          "(flat: about 1x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
