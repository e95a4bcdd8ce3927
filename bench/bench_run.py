#!/usr/bin/env python3
"""`qwen-triage run` pass-through cost: a child printing N lines, wrapped, beside the same child piped through `cat`.

    python bench/bench_run.py [--lines 100000] [--rounds 5]

The child is the same Python program each time: it prints N lines of the shared
generator's mix (journald, Ollama, vLLM, NCCL, kernel; about 0.1 % failures) as
fast as it can. Four commands, alternating, each a fresh process with its output
going to a pipe this script drains (as a terminal or a log collector would):

* ``child | cat`` and ``qwen-triage run -q --log FILE -- child``;
* the same two with a child that prints nothing: their start-up.

Each is timed twice: until the child's last byte has come out (the pass-through:
what the user watching the output waits for) and until the command exits (for
`run`, also the triage of the last lines and the summary). Prints medians and the
ratio the performance issue sets at 1.2 or under, (run - run start-up) /
(cat - cat start-up) on the pass-through, and the same ratio to exit. Machines
here are shared and noisy: read the ratios, not the milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED_GEN = ROOT.parent / "shared" / "bench" / "gen_log.py"

CHILD = """
import sys
data = open(sys.argv[1], "rb").read() if len(sys.argv) > 1 else b""
out = sys.stdout.buffer
for line in data.splitlines(keepends=True):
    out.write(line)
out.flush()
"""


def make_lines(path: Path, lines: int) -> None:
    if SHARED_GEN.is_file():
        subprocess.run([sys.executable, str(SHARED_GEN), "-n", str(lines), "--seed", "7", "-o", str(path)],
                       check=True, capture_output=True)
        return
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_scan  # noqa: PLC0415 - this repository's generator when the shared one is absent

    bench_scan.generate(path, lines, 7)


def timed(cmd: list[str] | str, expect: int, shell: bool = False) -> tuple[float, float]:
    """Seconds until the child's last byte came through, and until the command exited."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, shell=shell, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    got, through = 0, None
    while chunk := proc.stdout.read1(1 << 16):
        got += len(chunk)
        if got >= expect and through is None:
            through = time.perf_counter() - t0
    proc.wait()
    done = time.perf_counter() - t0
    return (through if through is not None else done), done


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="qt-bench-run-"))
    log = work / "child.log"
    make_lines(log, args.lines)
    child = work / "child.py"
    child.write_text(CHILD)
    py = sys.executable
    full = [py, str(child), str(log)]
    empty = [py, str(child)]
    qt = [py, "-m", "qwen_triage", "run", "-q", "--stall", "0", "--log", str(work / "run.log"), "--"]
    size = log.stat().st_size
    cmds = {
        "cat": (f"{py} {child} {log} | cat", True, size),
        "cat start-up": (f"{py} {child} | cat", True, 0),
        "run": (qt + full, False, size),
        "run start-up": (qt + empty, False, 0),
    }
    for cmd, shell, expect in cmds.values():  # warm the rule-pack cache and the file cache
        timed(cmd, expect, shell)
    through: dict[str, list[float]] = {name: [] for name in cmds}
    done: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(args.rounds):
        for name, (cmd, shell, expect) in cmds.items():
            t, d = timed(cmd, expect, shell)
            through[name].append(t)
            done[name].append(d)
    med = {name: statistics.median(w) for name, w in through.items()}
    exit_ = {name: statistics.median(w) for name, w in done.items()}
    print(f"child prints {args.lines} lines ({size / 1e6:.1f} MB); medians of {args.rounds} alternating rounds")
    print(f"  {'':14s} {'last byte out':>13s} {'exit':>8s}")
    for name in cmds:
        print(f"  {name:14s} {med[name]:11.3f} s {exit_[name]:6.3f} s")
    cat_work = med["cat"] - med["cat start-up"]
    run_work = med["run"] - med["run start-up"]
    print(f"pass-through, start-up subtracted: run {run_work:.3f} s against cat {cat_work:.3f} s: "
          f"{run_work / cat_work:.2f}x (target: 1.2x or under)")
    run_all = exit_["run"] - exit_["run start-up"]
    cat_all = exit_["cat"] - exit_["cat start-up"]
    print(f"to exit (triage of every line finished), start-up subtracted: run {run_all:.3f} s against cat "
          f"{cat_all:.3f} s: {run_all / cat_all:.2f}x")
    print(f"start-up: run {exit_['run start-up']:.3f} s, a bare child through cat {exit_['cat start-up']:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
