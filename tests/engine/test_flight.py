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


# --- the NCCL watchdog's own dump (needs two GPUs and a torch built with CUDA) --------------------------------

def _cuda_torchrun() -> tuple[str | None, str]:
    """A torchrun whose torch sees two GPUs: QWEN_TRIAGE_CUDA_TORCHRUN, else the one on PATH; why not, if none."""
    import os
    import shutil
    import subprocess

    torchrun = os.environ.get("QWEN_TRIAGE_CUDA_TORCHRUN") or shutil.which("torchrun")
    if torchrun is None:
        return None, "no torchrun (set QWEN_TRIAGE_CUDA_TORCHRUN to one whose torch has CUDA)"
    python = Path(torchrun).parent / "python"
    probe = subprocess.run([str(python if python.exists() else "python3"), "-c",
                            "import torch; print(torch.cuda.device_count())"], capture_output=True, text=True)
    count = int(probe.stdout.strip() or 0) if probe.returncode == 0 else 0
    if count < 2:
        return None, f"{torchrun}: torch sees {count} GPU(s); NCCL needs one GPU per rank, two at least"
    return torchrun, ""


@pytest.mark.gpu
def test_nccl_watchdog_dumps_name_the_rank_that_never_entered(compiled, tmp_path: Path) -> None:
    """A genuine NCCL run: rank 1 sleeps at step 3, rank 0's watchdog times its all_reduce out and, with
    TORCH_NCCL_DUMP_ON_TIMEOUT, torch writes the Flight Recorder dumps itself (the env names of torch 2.2-2.6 and
    of 2.7 and later, both set). The dumps alone and the logs with them name rank 1 and the collective."""
    import sys

    torchrun, why = _cuda_torchrun()
    if torchrun is None:
        pytest.skip(why)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    from hang_scenarios import Scenario, record

    (tmp_path / "fr").mkdir()
    prefix = str(tmp_path / "fr" / "rank_")  # outside the run's folder, which record() makes afresh
    sc = Scenario("g2-nccl-sleep", "sleep", 2, bad=1, culprit=1, env={
        "HANG_BACKEND": "nccl", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_FR_BUFFER_SIZE": "2000",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": prefix, "TORCH_FR_DUMP_TEMP_FILE": prefix},
        what="two GPUs; rank 1 sleeps at step 3; the watchdog of rank 0 dumps")
    record(torchrun, sc, tmp_path / "run", 29611)
    written = dumps(tmp_path)
    assert written, "torch wrote no Flight Recorder dump on the watchdog's timeout"
    for hang in (scan(compiled, written).hang, scan(compiled, logs_of(tmp_path / "run") + written).hang):
        assert hang is not None and hang.culprit is not None, hang
        assert hang.culprit.rank == 1 and hang.culprit.seq is not None
        assert hang.culprit.collective is not None and "all" in hang.culprit.collective.lower()
