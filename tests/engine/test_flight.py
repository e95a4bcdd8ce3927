"""PyTorch Flight Recorder dumps as an input (engine.flight), on dumps made here by genuine gloo runs.

scripts/hang_scenarios.py records them: torch 2.13 records gloo collectives in the Flight Recorder
(TORCH_FR_BUFFER_SIZE) but writes a dump by itself only for NCCL (the watchdog, TORCH_FR_DUMP_TEMP_FILE<rank>); the
worker calls torch's own dump (`torch._C._distributed_c10d._dump_fr_trace()`) when its collective fails or the
launcher's SIGTERM comes, which gives the bytes the watchdog writes.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from qwen_triage.engine.flight import DumpError, load, rank_of, state_of
from qwen_triage.report.model import Report, to_dict, validate
from tests.engine.test_hang import HANG, logs_of, scan

W4_FR = HANG / "w4-fr"  # rank 2 sleeps at step 3; every rank dumps, rank 2 when the launcher stops it
UNDUMPED = HANG / "w4-fr-culprit-undumped"  # the same, dumps only where a collective failed: none of rank 2


def dumps(scenario: Path) -> list[Path]:
    return sorted((scenario / "fr").iterdir())


def test_the_dump_is_read_as_torch_writes_it() -> None:
    for path in dumps(W4_FR) + dumps(UNDUMPED):
        data = path.read_bytes()
        assert load(data) == pickle.loads(data)  # the same values as unpickling, without unpickling


def test_dumps_alone_name_the_rank_that_never_entered_the_collective(compiled) -> None:
    report = scan(compiled, dumps(W4_FR))
    assert [i.kind for i in report.inputs] == ["flight-recorder"] * 4
    c = report.hang.culprit
    assert (c.rank, c.collective, c.seq) == (2, "all_reduce", 4)
    assert "Flight Recorder" in c.why
    assert {r.rank: (r.entered, r.verdict) for r in report.hang.ranks} == {
        0: (4, "in collective"), 1: (4, "in collective"), 2: (3, "culprit"), 3: (4, "in collective")}
    validate(Report, to_dict(report))


def test_the_culprit_s_missing_dump_leaves_it_a_suspect(compiled) -> None:
    hang = scan(compiled, dumps(UNDUMPED)).hang
    assert hang.culprit is None
    assert [s.rank for s in hang.suspects] == [2]
    assert "Flight Recorder dumps of rank(s) 2 are missing" in hang.summary


@pytest.mark.parametrize("scenario", [W4_FR, UNDUMPED])
def test_logs_and_dumps_together_give_the_sequence_number(compiled, scenario: Path) -> None:
    logs_only = scan(compiled, logs_of(scenario)).hang.culprit
    both = scan(compiled, logs_of(scenario) + dumps(scenario)).hang.culprit
    assert (logs_only.rank, logs_only.seq) == (2, None)
    assert (both.rank, both.collective, both.seq) == (2, "all_reduce", 4)


def test_healthy_dumps_name_no_one(compiled) -> None:
    hang = scan(compiled, dumps(HANG / "w4-fr-healthy")).hang
    assert hang.culprit is None and not hang.suspects
    assert {r.verdict for r in hang.ranks} == {"ok"}


def test_the_json_form_reads_the_same(compiled, tmp_path: Path) -> None:
    for path in dumps(W4_FR):  # _dump_fr_trace_json's form: the same dict as JSON
        (tmp_path / path.name).write_text(json.dumps(pickle.loads(path.read_bytes())))
    c = scan(compiled, sorted(tmp_path.iterdir())).hang.culprit
    assert (c.rank, c.seq) == (2, 4)


class Evil:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path("/tmp/qwen-triage-pwned").touch, ())


def test_a_hostile_dump_runs_nothing_and_is_noted(compiled, tmp_path: Path) -> None:
    good = pickle.loads((W4_FR / "fr" / "rank_0").read_bytes())
    (tmp_path / "rank_0").write_bytes(pickle.dumps({**good, "pg_config": Evil()}, protocol=4))
    (tmp_path / "rank_1").write_bytes((W4_FR / "fr" / "rank_1").read_bytes()[:700])  # cut short
    report = scan(compiled, sorted(tmp_path.iterdir()))
    assert not Path("/tmp/qwen-triage-pwned").exists()
    assert any("rank_0: a Flight Recorder dump not read" in n for n in report.notes)
    assert any("rank_1: a Flight Recorder dump not read" in n for n in report.notes)
    with pytest.raises(DumpError):
        load(pickle.dumps(Evil(), protocol=2))


def test_rank_from_the_file_name_and_state() -> None:
    assert rank_of("/dumps/nccl_trace_rank_12") == 12
    assert rank_of("fr/rank_3.json") == 3
    assert rank_of("trace") is None
    st = state_of(load((W4_FR / "fr" / "rank_2").read_bytes()), 2)
    assert (st.entered, st.op, st.shape, st.completed, st.world) == (3, "all_reduce", "[4]", None, (0, 1, 2, 3))
