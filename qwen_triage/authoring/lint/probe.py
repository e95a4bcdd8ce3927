"""The backtracking probe: lines that make a catastrophic pattern blow up, measured in CPU seconds.

Every pattern runs on untrusted log lines, so one that backtracks exponentially hangs a scan; the
probe finds such a pattern before it ships (rules' patterns, `where` constraints, benign patterns).
"""

from __future__ import annotations

import re
import time

from qwen_triage.engine.literals import required_literals
from qwen_triage.rulepack.pack import compile_pattern

PROBE_TIMEOUT = 0.5  # a pattern slower than this on a probe line is hostile
PROBE_SLOW = 0.2  # CPU seconds, generous
PROBE_MAX = 64 * 1024  # the matcher never sees more of a line than this
_NESTED_QUANT = re.compile(r"\((?:[^()\\]|\\.)*[+*](?:\)|\)\?)?[^()]*\)[+*{]")


def _probes(pattern: str, examples: list[str]) -> list[str]:
    """Lines that make a backtracking-prone pattern blow up."""
    probes = [c * 20_000 for c in ("a", " ", "0", ".", ":", "-", "x/")]
    req = required_literals(pattern)
    lit = req.alternatives[0] if req else ""
    if lit:
        probes += [lit * (20_000 // max(len(lit), 1)), (lit + " ") * 3000, lit + " " * 20_000, lit + "a" * 20_000]
    # Runs of each character the pattern mentions, after its literal: what an
    # overlapping alternation or nested repeat chokes on.
    for ch in sorted({c for c in pattern if c.isprintable() and c not in "\\()[]{}|+*?^$"})[:40]:
        probes.append(lit + " " + ch * 5000)
        probes.append(lit + ch * 5000)
        # a short run that then fails (`(a|aa)+$` on 45 bytes ran for a minute): exponential backtracking
        # shows on a few dozen characters, long before a long run would
        probes.append(lit + " " + ch * 40 + "\x00")
        probes.append(lit + ch * 40 + "\x00")
    for ex in examples[:3]:
        probes.append((ex + " ") * 50)
        probes.append(ex[: len(ex) // 2] + "a" * 20_000)
    return probes


def probe_pattern(pattern: str, examples: list[str], full: bool = False) -> str | None:
    """A reason when the pattern looks catastrophic, else None.

    ``full``: a `where` constraint, which must match a whole field; probed with
    ``fullmatch``, and on short fields too (a field of 41 characters was enough).
    """
    if _NESTED_QUANT.search(pattern):
        return "nested quantifier (e.g. `(a+)+`): catastrophic backtracking risk"
    compiled = compile_pattern(pattern)
    probes = _probes(pattern, examples)
    if full:  # short fields that almost match: the whole field must be taken, then one character fails
        probes = [p[:40] + end for p in probes for end in ("", "\x00", "!")] + probes
    run = compiled.fullmatch if full else compiled.search
    for probe in probes:
        probe = probe[:PROBE_MAX]
        cost = _cpu_seconds(run, probe)
        if cost is None:
            return f"timed out (>{PROBE_TIMEOUT}s of CPU) on a {len(probe)}-character probe line"
        if cost > PROBE_SLOW:
            return f"took {cost:.2f}s of CPU on a {len(probe)}-character probe line"
    return None


def _cpu_seconds(run, probe: str) -> float | None:
    """The CPU this thread spent on one probe; None once it has spent PROBE_TIMEOUT of CPU.

    Decided by work, not by the clock: the regex engine's only limit is wall time, so a probe cut
    off having had less than its CPU budget was starved by other work, not slow, and is run again
    with a limit four times longer - for as long as that takes. The wall limit only bounds one try;
    the answer comes from the CPU spent, the same on an idle and a loaded machine (two cores shared
    by thirty jobs give a probe a thirtieth of a core: about 15 s of wall for its half second).
    """
    wall = PROBE_TIMEOUT
    while True:
        t0 = time.thread_time()
        try:
            run(probe, timeout=wall)
        except TimeoutError:
            if time.thread_time() - t0 >= PROBE_TIMEOUT * 0.9:
                return None
            wall *= 4  # starved, not slow: give it the CPU it did not get
            continue
        return time.thread_time() - t0
