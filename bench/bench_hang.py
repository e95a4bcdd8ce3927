#!/usr/bin/env python3
"""What the hang analysis (engine.hang) costs a scan: nothing on a log without multi-rank lines, and time linear
in the size of a multi-rank log.

    python bench/bench_hang.py side [--mb 20] [--repeat 3]
    python bench/bench_hang.py linear [--sizes 100 1000] [--keep]

``side``: a seeded benign log whose lines name no rank (bench_scan.py's generator, rank-tagged kinds left out),
scanned in this process side by side with the analysis on (as shipped: the `hang` and `ras` patterns in the
prefilter's one pass, the tracker fed the lines they find) and off (the same pack without them, no tracker), each warm,
alternating, best of ``--repeat``. Same findings both ways is checked.

``linear``: a multi-rank log of each size made by repeating the genuine torchrun recordings of fixtures/hang (every
scenario's logs one after another, so the job's ranks time out, crash, desync again and again), scanned once each;
prints seconds and MB/s per size and the ratio of the largest to the smallest. The machines here are shared and
noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("QWEN_TRIAGE_HS_BUILD", "inline")  # the databases are built before the clock starts

from bench_scan import benign_line  # noqa: E402

from qwen_triage.engine import compiled as compiled_mod  # noqa: E402
from qwen_triage.engine.normalize import normalize  # noqa: E402
from qwen_triage.engine.scanner import Scanner, compile_pack  # noqa: E402
from qwen_triage.inputs.file import open_source  # noqa: E402

MB = 1 << 20


def benign_log(path: Path, size: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    written, i = 0, 0
    with open(path, "w") as f:
        while written < size:
            line = benign_line(rng, i)
            i += 1
            rec = normalize(line)
            if rec.rank is not None or rec.local_rank is not None:
                continue  # no multi-rank line: that is the point
            f.write(line + "\n")
            written += len(line) + 1


def multi_rank_log(path: Path, size: int) -> None:
    one = b"".join(p.read_bytes() for p in sorted((ROOT / "fixtures" / "hang").rglob("*.log")))
    with open(path, "wb") as f:
        for _ in range(max(1, size // len(one))):
            f.write(one)


def scan(compiled, path: Path, hang: bool = True) -> tuple[float, float, object]:
    """Wall and CPU seconds of one scan (CPU: this process's, steadier on a machine others share), its report."""
    scanner = Scanner(compiled)
    if not hang:
        scanner.matcher.hang = None
    t, c = time.perf_counter(), time.process_time()
    for _ in scanner.scan_source(open_source(str(path), 0)):
        pass
    report = scanner.report()
    return time.perf_counter() - t, time.process_time() - c, report


def pack_without_hang():
    """The shipped pack compiled without the `hang` and `ras` signals (engine.hang, engine.ras): their patterns are
    swapped for one the pack already has (the multi-line hints), so the prefilter's database is the one it was
    before the analysis."""
    saved = compiled_mod.HANG_PATTERN, compiled_mod.RAS_PATTERN
    compiled_mod.HANG_PATTERN = compiled_mod.RAS_PATTERN = compiled_mod.HINTS_PATTERN
    try:
        return compile_pack()
    finally:
        compiled_mod.HANG_PATTERN, compiled_mod.RAS_PATTERN = saved


def side(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "benign.log"
        benign_log(log, args.mb * MB)
        on, off = compile_pack(), pack_without_hang()
        print(f"prefilter: {on.prefilter.name} ({len(on.patterns)} patterns on, {len(off.patterns)} off); "
              f"log {log.stat().st_size / MB:.0f} MB, no multi-rank line")
        scan(on, log)  # warm both: imports, lazy regexes
        scan(off, log, hang=False)
        times: dict[str, list[float]] = {"on": [], "off": []}  # CPU seconds
        walls: dict[str, list[float]] = {"on": [], "off": []}
        reports = {}
        for _ in range(args.repeat):
            for name, pack, hang in (("off", off, False), ("on", on, True)):
                wall, cpu, reports[name] = scan(pack, log, hang)
                times[name].append(cpu)
                walls[name].append(wall)
        same = [d.class_ for d in reports["on"].diagnoses] == [d.class_ for d in reports["off"].diagnoses] \
            and reports["on"].stats.candidate_lines == reports["off"].stats.candidate_lines \
            and reports["on"].hang is None
        best = {k: min(v) for k, v in times.items()}
        for k in ("off", "on"):
            print(f"  hang analysis {k:3}: best {best[k]:.2f} CPU s of {', '.join(f'{t:.2f}' for t in times[k])} "
                  f"(wall best {min(walls[k]):.2f} s); {reports[k].stats.lines} lines, "
                  f"{reports[k].stats.candidate_lines} candidates")
        print(f"  on/off = {best['on'] / best['off']:.3f}; same findings and candidates: {same}")


def linear(args: argparse.Namespace) -> None:
    compiled = compile_pack()
    where = Path(args.dir or tempfile.mkdtemp(prefix="bench-hang-"))
    results = []
    for size in args.sizes:
        log = where / f"multi-rank-{size}mb.log"
        if not log.exists():
            multi_rank_log(log, size * MB)
        wall, cpu, report = scan(compiled, log)
        mb = log.stat().st_size / MB
        c = report.hang.culprit if report.hang else None
        print(f"  {mb:7.0f} MB: {cpu:8.1f} CPU s ({wall:.1f} s wall), {mb / cpu:5.2f} MB/CPU s, "
              f"{len(report.hang.ranks) if report.hang else 0} ranks, culprit {c.rank if c else None}", flush=True)
        results.append((mb, cpu))
        if not args.keep:
            log.unlink()
    if len(results) > 1:
        (m0, t0), (m1, t1) = results[0], results[-1]
        print(f"  x{m1 / m0:.1f} input -> x{t1 / t0:.2f} CPU time")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("side")
    s.add_argument("--mb", type=int, default=20)
    s.add_argument("--repeat", type=int, default=3)
    s.set_defaults(run=side)
    lin = sub.add_parser("linear")
    lin.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    lin.add_argument("--dir", help="where the logs go (default: a new temporary directory)")
    lin.add_argument("--keep", action="store_true")
    lin.set_defaults(run=linear)
    args = ap.parse_args()
    args.run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
