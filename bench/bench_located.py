#!/usr/bin/env python3
"""Issue 27's measure: on every labelled set, are a failing log's errors diagnosed or located?

    python bench/bench_located.py [--list] [--placed] [--json] [SET_DIR ...]

Each set is a folder walked for ``cases.yaml`` (shared/corpus/FORMAT.md). Every case is scanned as ``eval``
scans it; for each failing log (``expect`` not empty) the lines no rule explained (the report's ``exception``
and ``error`` items, and the diagnoses the catalogue made, ``because: catalogue``) are counted:
``located`` when the message catalogue placed the line (``printed_by``), ``classed`` when it also made it a
diagnosis, right when that class is one the case expects or allows. ``unlocated`` lines are the ones left
to do; ``--list`` prints them, ``--placed`` the located lines no class was given (the map's review).
Healthy logs (``expect: []``) must stay without any diagnosis.

By default: ../shared/corpus*, fixtures/corpus/train, fixtures/genuine, fixtures/logs, fixtures/peers.
fixtures/corpus/heldout is never read, scored or listed, whatever is asked.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HELDOUT = (ROOT / "fixtures" / "corpus" / "heldout").resolve()
LOOKED_UP = ("exception", "error")  # engine.locate.LOCATED_KINDS: what the catalogue is asked about


def default_sets() -> list[Path]:
    shared = sorted((ROOT.parent / "shared").glob("corpus*"))
    return [*shared, *(ROOT / "fixtures" / s for s in ("corpus/train", "genuine", "logs", "peers"))]


@dataclass
class SetFigures:
    name: str
    failing: int = 0
    healthy: int = 0
    healthy_diagnosed: int = 0
    logs_with_unexplained: int = 0
    unexplained: int = 0  # lines no rule explained, in failing logs
    located: int = 0
    classed_right: int = 0
    classed_wrong: int = 0
    unlocated: list[dict[str, str]] = field(default_factory=list)
    placed: list[dict[str, str]] = field(default_factory=list)  # located, not classed: where, and what the case expects


def measure(directory: Path, compiled) -> SetFigures:
    from qwen_triage.authoring.evaluate import load_cases
    from qwen_triage.engine.scanner import scan_paths

    fig = SetFigures(directory.name if directory.parent.name != "corpus" else f"corpus/{directory.name}")
    for path, case in load_cases(directory):
        if HELDOUT in path.resolve().parents:
            continue  # never scored, whatever directory was given
        report = scan_paths([str(path)], compiled)
        if not case.expect:
            fig.healthy += 1
            fig.healthy_diagnosed += bool(report.diagnoses)
            continue
        fig.failing += 1
        allowed = set(case.expect) | set(case.also)
        classed = [d for d in report.diagnoses if d.because == "catalogue"]
        listed = [u for u in report.unrecognised if u.kind in LOOKED_UP]
        fig.logs_with_unexplained += bool(classed or listed)
        fig.unexplained += len(classed) + len(listed)
        fig.located += len(classed) + sum(u.printed_by is not None for u in listed)
        fig.classed_right += sum(d.class_ in allowed for d in classed)
        fig.classed_wrong += sum(d.class_ not in allowed for d in classed)
        fig.unlocated += [{"case": case.id, "kind": u.kind, "program": u.program or "", "raised_by": u.raised_by or "",
                           "line": u.evidence.text} for u in listed if u.printed_by is None]
        fig.placed += [{"case": case.id, "expect": ",".join(case.expect), "got": ",".join(report.classes()),
                        "where": f"{u.printed_by.program}:{u.printed_by.file}", "template": u.printed_by.template or "",
                        "line": u.evidence.text} for u in listed if u.printed_by is not None]
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("sets", nargs="*", type=Path, help="folders walked for cases.yaml (default: see above)")
    ap.add_argument("--list", action="store_true", help="print every unlocated line")
    ap.add_argument("--placed", action="store_true", help="print every line located but not classed")
    ap.add_argument("--json", action="store_true", help="the figures as JSON")
    args = ap.parse_args(argv)
    from qwen_triage.engine.scanner import load_compiled

    compiled = load_compiled((), "auto")
    sets = [s for s in (args.sets or default_sets()) if s.resolve() != HELDOUT and s.is_dir()]
    figures = [measure(s, compiled) for s in sets]
    if args.json:
        print(json.dumps([asdict(f) for f in figures], indent=1))
        return 0
    cols = ("failing", "logs_with_unexplained", "unexplained", "located", "classed_right", "classed_wrong",
            "healthy", "healthy_diagnosed")
    heads = ("failing", "logs w/", "unexpl.", "located", "cls ok", "cls bad", "healthy", "h.diag")
    print(f"{'set':18}" + "".join(f"{h:>9}" for h in heads) + f"{'unlocated':>10}")
    total = SetFigures("total")
    for f in figures:
        print(f"{f.name:18}" + "".join(f"{getattr(f, c):>9}" for c in cols) + f"{len(f.unlocated):>10}")
        for c in cols:
            setattr(total, c, getattr(total, c) + getattr(f, c))
        total.unlocated += f.unlocated
    print(f"{'total':18}" + "".join(f"{getattr(total, c):>9}" for c in cols) + f"{len(total.unlocated):>10}")
    if args.placed:
        for f in figures:
            for u in f.placed:
                print(f"{f.name}\t{u['case']}\texpect={u['expect']}\tgot={u['got']}\t{u['where']}\t"
                      f"{u['template'][:120]!r}\t{u['line'][:200]}")
    if args.list:
        for f in figures:
            for u in f.unlocated:
                print(f"{f.name}\t{u['case']}\t{u['kind']}\t{u['program']}\t{u['raised_by']}\t{u['line'][:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
