#!/usr/bin/env python3
"""Scan throughput and peak memory beside ripgrep and grep, as ratios in one run.

    python bench/bench_scan.py [--lines 1000000] [--seed 7] [--keep]

Generates a seeded mixed log (99.9 % benign lines in every recognised format,
0.1 % failure lines taken from the rules' own `match` examples), then times
`qwen-triage scan` with each prefilter engine, `rg -c -f` and `grep -E -c -f`
over the same patterns on the same file. Each tool runs as its own process;
peak memory is that process's maximum RSS (wait4). Machines here are shared and
noisy: read the ratios, not the absolute seconds.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the tree this file is in is the one benched (its rules, its package), not whatever qwen_triage is installed
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

HOSTS = ["gpu-node-1", "host1", "worker-a7", "dgx-03"]
WORDS = "model layer tensor request cache batch token worker scheduler engine runner prompt stream".split()


def benign_line(rng: random.Random, i: int) -> str:
    h = rng.choice(HOSTS)
    pid = rng.randint(100, 99999)
    n = rng.randint(0, 10**6)
    w = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12)))
    ts = f"Nov {rng.randint(10, 28)} {rng.randint(10, 23)}:{rng.randint(10, 59)}:{rng.randint(10, 59)}"
    kind = i % 12
    if kind == 0:
        return (f'{ts} {h} ollama[{pid}]: time=2024-11-29T10:{n % 60:02d}:00.{n % 1000:03d}Z level=INFO '
                f'source=server.go:{n % 900} msg="{w}" layers.offload={n % 80} memory.available="[{n % 24}.1 GiB]"')
    if kind == 1:
        return (f'{ts} {h} ollama[{pid}]: [GIN] 2024/11/29 - 10:00:{n % 60:02d} | 200 | {n % 999}.{n % 97}ms | '
                f'127.0.0.1 | POST "/api/chat"')
    if kind == 2:
        return (f"(VllmWorker rank={n % 6} pid={pid}) INFO 11-29 10:00:{n % 60:02d} [gpu_model_runner.py:{n % 2000}] "
                f"{w} took {n % 90}.{n % 100} seconds and {n % 40}.{n % 10} GiB")
    if kind == 3:
        return f"INFO 11-29 10:00:{n % 60:02d} [loggers.py:{n % 300}] Engine 000: Avg prompt throughput: {n % 900}.0 tokens/s, {w}"
    if kind == 4:
        return f"{h}:{pid}:{pid + 7} [{n % 6}] NCCL INFO Channel {n % 32:02d}/0 : {n % 6}[{n % 6}] -> {(n + 1) % 6}[{(n + 1) % 6}] via P2P/CUMEM/read"
    if kind == 5:
        return f"{h}:{pid}:{pid + 7} [{n % 6}] NCCL INFO comm 0x{n:x} rank {n % 6} nRanks 6 nNodes 1 localRanks 6 localRank {n % 6} MNNVL 0"
    if kind == 6:
        return f"[{n % 99999:5d}.{n % 999999:06d}] nvidia 0000:{n % 255:02x}:00.0: enabling device (0000 -> 0002) {w}"
    if kind == 7:
        return f"[Sun Nov 24 23:{n % 60:02d}:{n % 60:02d} 2024] EXT4-fs (nvme0n1p{n % 4}): mounted filesystem with ordered data mode. {w}"
    if kind == 8:
        return f"[rank{n % 6}]:[I1129 10:00:{n % 60:02d}.{n:06d} {pid} ProcessGroupNCCL.cpp:{n % 3000}] [PG ID 0 PG GUID 0 Rank {n % 6}] {w}"
    if kind == 9:
        return f"{ts} {h} systemd[1]: Started session-{n}.scope - Session {n} of User user. {w}"
    if kind == 10:
        return f'  File "/usr/lib/python3/dist-packages/vllm/{rng.choice(WORDS)}.py", line {n % 2000}, in {rng.choice(WORDS)}'
    return f"{ts} {h} kernel: audit: type=1400 audit({n}.{n % 1000}:{n % 100}): apparmor=\"STATUS\" {w}"


def failure_lines() -> list[str]:
    from qwen_triage.rulepack.pack import load_pack

    out = []
    for lr in load_pack().rules:
        out.extend(ex.splitlines()[0] for ex in lr.rule.examples.match if ex.strip())
    return out or ["Segmentation fault (core dumped)"]


def generate(path: Path, lines: int, seed: int) -> None:
    rng = random.Random(seed)
    failures = failure_lines()
    with open(path, "w", encoding="utf-8") as f:
        for i in range(lines):
            f.write((rng.choice(failures) if rng.random() < 0.001 else benign_line(rng, i)) + "\n")


def patterns() -> list[str]:
    from qwen_triage.rulepack.pack import load_pack

    pats: list[str] = []
    for lr in load_pack().rules:
        m = lr.rule.match
        pats += m.any + m.all + m.unless
    return list(dict.fromkeys(pats))


def strip_lookaround(p: str) -> str:
    """Drop (?=…) (?!…) (?<=…) (?<!…) groups, nested parentheses included: a wider pattern."""
    out, i = [], 0
    while i < len(p):
        if p[i] == "\\":
            out.append(p[i : i + 2])
            i += 2
            continue
        m = re.match(r"\(\?<?[=!]", p[i:])
        if m:
            depth, j = 0, i
            while j < len(p):
                if p[j] == "\\":
                    j += 2
                    continue
                depth += {"(": 1, ")": -1}.get(p[j], 0)
                j += 1
                if depth == 0:
                    break
            i = j
            continue
        out.append(p[i])
        i += 1
    return "".join(out)


def to_rust(p: str) -> str:
    p = strip_lookaround(p)  # ripgrep has no look-around: widen
    return re.sub(r"\(\?P?<\w+>", "(?:", p)  # one alternation: group names would clash


def to_ere(p: str) -> str:
    p = to_rust(p).replace("(?:", "(").replace("(?i)", "")
    p = p.replace(r"\d", "[0-9]").replace(r"\s", "[[:space:]]").replace(r"\w", "[[:alnum:]_]")
    p = re.sub(r"([*+?}])\?", r"\1", p)  # lazy quantifiers do not exist in ERE
    return p


def usable(tool: list[str], pattern: str) -> bool:
    proc = subprocess.run(tool + ["-e", pattern, "/dev/null"], capture_output=True)
    return proc.returncode in (0, 1)


def run(cmd: list[str], limit: float | None = None) -> tuple[float, int, int]:
    """Wall seconds, peak RSS in MiB, exit status of one process (-9 when stopped at ``limit``)."""
    wall, _cpu, peak, code = run_cpu(cmd, limit)
    return wall, peak, code


def run_cpu(cmd: list[str], limit: float | None = None) -> tuple[float, float, int, int]:
    """Wall seconds, CPU seconds (user + system, from ``wait4``: the process and the children it reaped), peak
    RSS in MiB, exit status of one process (-9 when stopped at ``limit``)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stopped = False
    while True:  # reaped here with wait4 (not Popen.poll, which would take the rusage with it)
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG if limit is not None and not stopped else 0)
        if pid:
            break
        if time.perf_counter() - t0 >= limit:  # type: ignore[operator]
            proc.kill()
            stopped = True
        else:
            time.sleep(0.02)
    wall = time.perf_counter() - t0
    proc.returncode = -9 if stopped else os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", action="store_true", help="keep the generated log")
    ap.add_argument("--grep-limit", type=float, default=120.0, help="stop grep after this many seconds")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="qt-bench-"))
    log = work / "mixed.log"
    t0 = time.perf_counter()
    generate(log, args.lines, args.seed)
    size = log.stat().st_size
    print(f"generated {args.lines} lines, {size / 1e6:.1f} MB in {time.perf_counter() - t0:.1f}s ({log})")

    pats = patterns()
    qt = [sys.executable, "-m", "qwen_triage"]
    # warm the Hyperscan database cache so compile time is not counted as scanning
    subprocess.run(qt + ["scan", "--format", "json", "/dev/null"], capture_output=True)
    rows: list[tuple[str, float, int]] = []

    t_read = time.perf_counter()
    with open(log, "rb") as f:
        while f.read(1 << 20):
            pass
    rows.append(("python: read file in 1 MiB chunks (floor)", time.perf_counter() - t_read, 0))

    for engine in ("hyperscan", "literal"):
        wall, rss, code = run(qt + ["scan", "--engine", engine, "--format", "json", str(log)])
        if code in (0, 1):
            rows.append((f"qwen-triage scan --engine {engine}", wall, rss))
        else:
            rows.append((f"qwen-triage scan --engine {engine} (failed: exit {code})", wall, rss))

    if shutil.which("rg"):
        rust = [p for p in (to_rust(p) for p in pats) if usable(["rg", "-q"], p)]
        (work / "rg.pats").write_text("\n".join(rust) + "\n")
        limits = ["--regex-size-limit", "1G", "--dfa-size-limit", "1G"]
        for extra, label in (([], ""), (["--no-unicode"], " --no-unicode")):
            wall, rss, code = run(["rg", *limits, *extra, "-c", "-f", str(work / "rg.pats"), str(log)])
            failed = "" if code in (0, 1) else f" FAILED exit {code}"
            rows.append((f"rg{label} -c -f ({len(rust)} of {len(pats)} patterns){failed}", wall, rss))
    else:
        print("rg not found: install ripgrep for the reference figure")
    ere = [p for p in (to_ere(p) for p in pats) if usable(["grep", "-E", "-q"], p)]
    (work / "grep.pats").write_text("\n".join(ere) + "\n")
    wall, rss, code = run(["grep", "-E", "-c", "-f", str(work / "grep.pats"), str(log)], limit=args.grep_limit)
    failed = "" if code in (0, 1) else (f" STOPPED at {args.grep_limit:.0f}s" if code == -9 else f" FAILED exit {code}")
    rows.append((f"grep -E -c -f ({len(ere)} of {len(pats)} patterns){failed}", wall, rss))

    # the faster ripgrep run is the reference
    ref = min((w for name, w, _ in rows if name.startswith("rg") and "FAILED" not in name), default=None)
    print(f"\n{len(pats)} patterns, {args.lines} lines, {size / 1e6:.1f} MB")
    print(f"{'tool':58} {'seconds':>8} {'lines/s':>12} {'peak MiB':>9} {'x rg':>6}")
    for name, wall, rss in rows:
        ratio = f"{wall / ref:.2f}" if ref else "-"
        print(f"{name:58} {wall:8.2f} {args.lines / wall:12,.0f} {rss or '-':>9} {ratio:>6}")
    if args.keep:
        print(f"kept {log}")
    else:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
