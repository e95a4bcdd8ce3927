#!/usr/bin/env python3
"""What multi-line records and unrecognised-error mining cost: one scan with them, one without, alternating.

    python bench/bench_features.py LOG [--rounds 3]

"Without" runs the same compiled pack with the error signals taken out of the matcher
(no unrecognised templates) and multi-line assembly switched off; both in this process,
so only the feature work differs. Prints the medians and the overhead in percent, and
the peak RSS growth of each run.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def scan(log: str, compiled, features: bool) -> float:  # type: ignore[no-untyped-def]
    from qwen_triage.engine import matcher as matcher_mod
    from qwen_triage.engine.scanner import Scanner
    from qwen_triage.inputs.file import open_source

    saved = matcher_mod.may_span
    if not features:
        matcher_mod.may_span = lambda _message: False
    try:
        scanner = Scanner(compiled)
        if not features:
            scanner.matcher.collector = None
        t0 = time.perf_counter()
        for _ in scanner.scan_source(open_source(log)):
            pass
        scanner.report()
        return time.perf_counter() - t0
    finally:
        matcher_mod.may_span = saved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from qwen_triage.engine.scanner import compile_pack

    compiled = compile_pack()
    runs: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.rounds):
        for features in (False, True):
            runs[features].append(scan(args.log, compiled, features))
    without, with_ = statistics.median(runs[False]), statistics.median(runs[True])
    print(f"without multi-line records and mining: {without:.2f} s")
    print(f"with them:                             {with_:.2f} s")
    print(f"overhead: {100 * (with_ / without - 1):+.1f} %  (peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
