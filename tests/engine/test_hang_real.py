"""Hang forensics (engine.hang) on real multi-rank reports from public threads.

Each fixtures/hang-real/<case>/ holds the log lines a public thread quoted (verbatim, users' paths neutralised) and
an expected.yaml: the thread's URL, what the thread settled and who settled it, and the culprit (rank, and where the
thread says so the collective and its sequence number) or, where the logs cannot decide, `culprit: null` with the
ranks that must be among the suspects. The recordings made here (fixtures/hang/, tests/engine/test_hang.py) plant
the culprit; these are the field's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.engine.test_hang import logs_of, scan

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "fixtures" / "hang-real"
CASES = sorted(p.parent.name for p in REAL.glob("*/expected.yaml"))


def test_cases_recorded():
    assert len(CASES) >= 4, CASES
    for name in CASES:
        expected = yaml.safe_load((REAL / name / "expected.yaml").read_text())
        assert expected["url"].startswith("https://github.com/"), name
        assert expected["what"] and expected["settled_by"], name
        assert logs_of(REAL / name), name
        assert not set(expected.get("suspects") or ()) & set(expected.get("not_suspects", ())), name


@pytest.mark.parametrize("name", CASES)
def test_real_report_names_what_the_thread_settled(compiled, name):
    expected = yaml.safe_load((REAL / name / "expected.yaml").read_text())
    hang = scan(compiled, logs_of(REAL / name)).hang
    assert hang is not None, "no multi-rank job read"
    want = expected["culprit"]
    if want is None:
        assert hang.culprit is None, hang.culprit
        assert "cannot decide" in hang.summary, hang.summary
        assert set(expected["suspects"]) <= {s.rank for s in hang.suspects}, hang.suspects
        assert not set(expected.get("not_suspects", ())) & {s.rank for s in hang.suspects}, hang.suspects
        return
    assert hang.culprit is not None, hang.summary
    assert hang.culprit.rank == want["rank"], hang.culprit
    for key in ("host", "collective", "seq"):
        if key in want:
            assert getattr(hang.culprit, key) == want[key], (key, hang.culprit)
    verdicts = {r.rank: r.verdict for r in hang.ranks}
    assert verdicts[want["rank"]] == "culprit"
    assert list(verdicts.values()).count("culprit") == 1


# --- the families these reports exposed, on lines written from torch's templates (ProcessGroupWrapper.cpp) ------

_FP = ("CollectiveFingerPrint(SequenceNumber={seq}, OpType={op}, TensorShape=[{n}], TensorDtypes=Float, "
       "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda))")


def _trace(rank: int, seq: int, op: str = "BROADCAST", n: int = 1) -> str:
    return f"[I ProcessGroupWrapper.cpp:562] [Rank {rank}] Running collective: {_FP.format(seq=seq, op=op, n=n)}"


def _scan_text(compiled, tmp_path, lines: list[str]):
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    return scan(compiled, [log]).hang


def test_trace_of_a_healthy_run_names_no_one(compiled, tmp_path):
    """Every rank's trace ends at the same collective: nothing stopped."""
    lines = [_trace(r, s) for s in (1, 2, 3) for r in range(4)]
    hang = _scan_text(compiled, tmp_path, lines)
    assert hang is not None and hang.culprit is None and not hang.suspects


def test_trace_with_two_ranks_behind_gives_suspects(compiled, tmp_path):
    lines = [_trace(r, s) for s in (1, 2) for r in range(4)] + [_trace(0, 3), _trace(1, 3)]
    hang = _scan_text(compiled, tmp_path, lines)
    assert hang is not None and hang.culprit is None
    assert sorted(s.rank for s in hang.suspects) == [2, 3] and "cannot decide" in hang.summary


def test_trace_skew_while_the_log_is_still_coming_names_no_one():
    """A live log whose ranks traced their collectives moments apart: the input has not ended, so where each trace
    stops says nothing yet (engine.hang only reads the traces of inputs read to their end)."""
    from qwen_triage.engine.hang import HangTracker
    from qwen_triage.engine.normalize import normalize

    t = HangTracker()
    for i, line in enumerate([_trace(r, 1) for r in range(4)] + [_trace(r, 2) for r in (0, 2, 3)], 1):
        t.observe(normalize(line, "live.log", i))
    v = t.verdict()
    assert v is not None and v.culprit is None and not v.suspects


def test_peer_fingerprint_without_tensors_is_at_the_reporters_step(compiled, tmp_path):
    """torch < 2.1 printed the peer's fingerprint as `SequenceNumber=0OpType=REDUCE` (pytorch#100207): the peer is
    at the reporting rank's step, and a report with no rank prefix is the reporting rank's."""
    peer = "CollectiveFingerPrint(SequenceNumber=0OpType=REDUCE)"
    lines = [f"RuntimeError: Detected mismatch between collectives on ranks. Rank {r} is running collective: "
             f"{_FP.format(seq=77, op='BROADCAST', n=1)}, but Rank 0 is running collective: {peer}." for r in (1, 2, 3)]
    hang = _scan_text(compiled, tmp_path, lines)
    assert hang is not None and hang.culprit is not None
    assert (hang.culprit.rank, hang.culprit.collective, hang.culprit.seq) == (0, "REDUCE", 77)
    assert {r.rank for r in hang.ranks} == {0, 1, 2, 3}


def test_same_op_peer_without_tensors_is_not_a_desync(compiled, tmp_path):
    """A peer whose fingerprint lacks its shape and runs the same op differs in nothing the log says."""
    peer = "CollectiveFingerPrint(SequenceNumber=0OpType=BROADCAST)"
    lines = [f"[rank{r}]: RuntimeError: Detected mismatch between collectives on ranks. Rank {r} is running "
             f"collective: {_FP.format(seq=9, op='BROADCAST', n=1)}, but Rank 0 is running collective: {peer}."
             for r in (1, 2, 3)]
    hang = _scan_text(compiled, tmp_path, lines)
    assert hang is not None and hang.culprit is None
    assert "desync" not in hang.summary
