#!/usr/bin/env python3
"""`qwen-triage run` pass-through cost: a child printing N lines, wrapped, beside the same child piped through `cat`.

    python bench/bench_run.py [--lines 100000] [--rounds 15] [--child unbuffered|buffered|both] [--busy N]

The child is the same Python program each time: it prints N lines of the shared
generator's mix (journald, Ollama, vLLM, NCCL, kernel; about 0.1 % failures) as
fast as it can. Five commands, alternating, each a fresh process with its output
going to a pipe this script drains (as a terminal or a log collector would):

* ``child | cat``, ``child | tee FILE`` and ``qwen-triage run -q --log FILE -- child``;
* ``cat`` and ``run`` with a child that prints nothing: their start-up.

Two kinds of child, the same on both sides: one that writes each line as it
prints it (PYTHONUNBUFFERED=1 — what `run` gives a Python child by default, and
what a server's logger does, flushing every record), and one that writes 8 KB
blocks (a buffered child: the harshest case, the fastest producer).

The child times its own writes (first to last, flushed): the issue's target is the child under
``run`` never slower than into ``tee`` (which saves a log too). Each command is also timed three
times: when the child's first byte comes out, when its last does, and when the command exits (for `run`, after the triage of the last lines
and the summary). The pass-through is first byte to last byte, start-up excluded
on both sides: the ratio the performance issue sets at 1.2 or under. The time to
exit, less each command's exit with a silent child, is printed beside it.
Machines here are shared and noisy: read the ratios, not the milliseconds.

``--busy N`` runs the whole table beside N busy-loop processes per core (the issue's "at any load": a node
whose cores its GPUs' host threads keep busy), started from this script, so in its session and its scheduler
group as the ``cat`` and ``tee`` pipelines are; the load average is printed with each table.
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
SHARED_GEN = ROOT.parent / "shared" / "bench" / "gen_log.py"

CHILD = """
import os, sys, time
data = open(sys.argv[1], "rb").read() if len(sys.argv) > 1 else b""
out = sys.stdout.buffer
t0 = time.perf_counter()
for line in data.splitlines(keepends=True):
    out.write(line)
out.flush()
took = time.perf_counter() - t0
if os.environ.get("QT_BENCH_CHILD_TIME"):  # the child's own time: how long its writes took
    with open(os.environ["QT_BENCH_CHILD_TIME"], "a") as f:
        f.write(f"{took}\\n")
"""


def make_lines(path: Path, lines: int) -> None:
    if SHARED_GEN.is_file():
        subprocess.run([sys.executable, str(SHARED_GEN), "-n", str(lines), "--seed", "7", "-o", str(path)],
                       check=True, capture_output=True)
        return
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_scan  # noqa: PLC0415 - this repository's generator when the shared one is absent

    bench_scan.generate(path, lines, 7)


def timed(cmd: list[str] | str, expect: int, shell: bool = False,
          env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Seconds until the child's first byte came through, until its last did, and until the command exited."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, shell=shell, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    got, first, last = 0, None, None
    while chunk := proc.stdout.read1(1 << 16):
        got += len(chunk)
        if first is None:
            first = time.perf_counter() - t0
        if got >= expect and last is None:
            last = time.perf_counter() - t0
    proc.wait()
    done = time.perf_counter() - t0
    return (first if first is not None else done), (last if last is not None else done), done


def measure(child: Path, log: Path, work: Path, rounds: int, unbuffered: bool) -> None:
    """One table: the four commands, alternating, with the child writing each line or 8 KB blocks."""
    py = sys.executable
    full = [py, str(child), str(log)]
    empty = [py, str(child)]
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"  # what `run` gives a child by default: the cat side gets it too
    qt = [py, "-m", "qwen_triage", "run", "-q", "--stall", "0", "--log", str(work / "run.log"),
          "--unbuffered" if unbuffered else "--no-unbuffered", "--"]
    size = log.stat().st_size
    cmds = {
        "cat": (f"{py} {child} {log} | cat", True, size),
        "tee": (f"{py} {child} {log} | tee {work / 'tee.log'}", True, size),
        "cat start-up": (f"{py} {child} | cat", True, 0),
        "run": (qt + full, False, size),
        "run start-up": (qt + empty, False, 0),
    }
    for cmd, shell, expect in cmds.values():  # warm the rule-pack cache and the file cache
        timed(cmd, expect, shell, env)
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in cmds}
    own: dict[str, list[float]] = {name: [] for name in ("cat", "tee", "run")}  # the child's own time
    stamp = work / "child-time"
    for _ in range(rounds):
        for name, (cmd, shell, expect) in cmds.items():
            stamp.unlink(missing_ok=True)
            runs[name].append(timed(cmd, expect, shell, {**env, "QT_BENCH_CHILD_TIME": str(stamp)}))
            if name in own and stamp.exists():
                own[name].append(float(stamp.read_text().split()[-1]))

    def med(name: str, i: int) -> float:
        return statistics.median(r[i] for r in runs[name])

    how = "each line a write (PYTHONUNBUFFERED=1, run's default)" if unbuffered else "8 KB writes (buffered)"
    print(f"child prints {size / 1e6:.1f} MB, {how}; medians of {rounds} alternating rounds; "
          f"load average (1 min) {os.getloadavg()[0]:.1f}")
    print(f"  {'':14s} {'first byte out':>14s} {'last byte out':>14s} {'exit':>8s}")
    for name in cmds:
        print(f"  {name:14s} {med(name, 0):12.3f} s {med(name, 1):12.3f} s {med(name, 2):6.3f} s")
    cat_flow = statistics.median(r[1] - r[0] for r in runs["cat"])
    run_flow = statistics.median(r[1] - r[0] for r in runs["run"])
    # Each round's run beside the cat run just before it: the machine's drift cancels out.
    paired = sorted((r[1] - r[0]) / max(c[1] - c[0], 1e-6) for r, c in zip(runs["run"], runs["cat"], strict=True))
    quart = statistics.quantiles(paired, n=4) if len(paired) > 1 else [paired[0]] * 3
    print(f"pass-through (first byte out to last byte out): run {run_flow:.3f} s against cat {cat_flow:.3f} s: "
          f"{run_flow / cat_flow:.2f}x; per round {quart[1]:.2f}x (quartiles {quart[0]:.2f}-{quart[2]:.2f}; "
          f"target: 1.2x or under)")
    paired_tee = sorted(r / t for r, t in zip(own["run"], own["tee"], strict=False))
    print("the child's own time writing it all: " + ", ".join(f"{n} {statistics.median(v):.3f} s" for n, v in own.items())
          + f"; run / tee per round {statistics.median(paired_tee):.2f}x (target: 1.0x or under)")
    run_all = med("run", 2) - med("run start-up", 2)
    cat_all = med("cat", 2) - med("cat start-up", 2)
    print(f"to exit (triage of every line finished), start-up subtracted: run {run_all:.3f} s against cat "
          f"{cat_all:.3f} s: {run_all / cat_all:.2f}x")
    print(f"start-up to exit with a silent child: run {med('run start-up', 2):.3f} s, through cat "
          f"{med('cat start-up', 2):.3f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--child", choices=("unbuffered", "buffered", "both"), default="both",
                    help="the child writes each line (run's default for Python) or 8 KB blocks; both sides alike")
    ap.add_argument("--busy", type=int, default=0, help="busy-loop processes per core running beside the table")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="qt-bench-run-"))
    log = work / "child.log"
    make_lines(log, args.lines)
    child = work / "child.py"
    child.write_text(CHILD)
    modes = {"unbuffered": [True], "buffered": [False], "both": [True, False]}[args.child]
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_check_deadline import busy_loops, end  # noqa: PLC0415 - the deadline bench's load, the same here

    busy = busy_loops(args.busy * (os.cpu_count() or 1))
    if busy:
        print(f"{len(busy)} busy-loop processes beside the table ({args.busy} per core)")
    try:
        for n, unbuffered in enumerate(modes):
            if n:
                print()
            measure(child, log, work, args.rounds, unbuffered)
    finally:
        end(busy)
    return 0


if __name__ == "__main__":
    sys.exit(main())
