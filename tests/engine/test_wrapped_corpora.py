"""Whole logs of the labelled sets, every line under a carrier's stamp: the diagnosis must not move.

`rules lint` renders each rule's examples under every wrapper (one line at a time). This test carries whole real
logs the way Kubernetes and container runtimes hand them over (`kubectl logs --timestamps`, a node's CRI log file):
the stamp goes before every line, tracebacks and multi-line records included, and the report must name the same
root cause as for the bare log (and a healthy log must stay healthy). It found a stamp read as journald's
`host prog:` head (`…Z sglang serve: error: argument …` lost its argparse diagnosis, `…Z rocBLAS error: …` its
backend one): 120 of the sets' logs changed their diagnosis under `kubectl logs --timestamps`. The launchers'
labels came next (session 38): under `srun --label`'s task, pdsh's host (DeepSpeed's multi-node launcher),
`kubectl logs --prefix` and moreutils' `ts` stamp, 270 to 370 logs each lost their diagnosis, all rules anchored
where the program's words start.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_triage.authoring.evaluate import load_cases
from qwen_triage.engine.normalize import normalize
from qwen_triage.engine.scanner import scan_paths
from tests.conftest import ROOT

SETS = ("fixtures/corpus/train", "fixtures/wordings", "fixtures/genuine", "fixtures/logs")
EVERY = 4  # every fourth case of each set (in its manifests' order): about 850 logs, so the test stays near a minute

# carrier: (the prefix of line n, every how many of the sampled logs it carries)
CARRIERS = {
    "kubectl-timestamps": (lambda n: f"2026-12-07T01:02:{n % 60:02d}.123456789Z ", 1),
    "cri": (lambda n: f"2026-12-07T01:02:{n % 60:02d}.123456789Z stderr F ", 1),
    # the launchers of many processes and the tools that label each line (a third of the sample each)
    "kubectl-prefix": (lambda n: "[pod/vllm-7d9f8c-abcde/vllm] ", 3),
    "srun-label": (lambda n: " 1: ", 3),
    "pdsh": (lambda n: "worker-1: ", 3),
    "moreutils-ts": (lambda n: f"Dec 07 01:02:{n % 60:02d} ", 3),
    "skypilot": (lambda n: "(worker1, rank=1, pid=3120, ip=10.0.0.3) ", 3),
}


def _composed(lines: list[str]) -> bool:
    """A log already in `docker compose`'s columns: no runtime stamps a compose terminal's output."""
    return any("compose" in normalize(line).formats for line in lines[:20])


@pytest.fixture(scope="module")
def read_right(compiled) -> list[tuple[str, list[str], list[str]]]:
    """The sampled cases the bare log is read right on (a miss is the eval's business): id, lines, top class."""
    out = []
    for name in SETS:
        for path, case in load_cases(ROOT / name)[::EVERY]:
            bare = scan_paths([str(path)], compiled).classes()[:1]
            if bare != case.expect[:1]:
                continue
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            if not _composed(lines):
                out.append((case.id, lines, bare))
    return out


@pytest.mark.parametrize("carrier", list(CARRIERS))
def test_a_stamp_before_every_line_keeps_each_diagnosis(compiled, read_right, tmp_path: Path, carrier: str) -> None:
    stamp, step = CARRIERS[carrier]
    moved = []
    for case_id, lines, bare in read_right[::step]:
        wrapped = tmp_path / f"{case_id}.log"
        wrapped.write_text("".join(stamp(n) + line + "\n" for n, line in enumerate(lines)), encoding="utf-8")
        got = scan_paths([str(wrapped)], compiled).classes()[:1]
        if got != bare:
            moved.append((case_id, bare, got))
    assert len(read_right) > 700
    assert moved == []
