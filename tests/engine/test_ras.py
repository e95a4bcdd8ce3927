"""NCCL RAS output as an input to the hang analysis (engine.ras, engine.hang): `ncclras` text and JSON reports.

fixtures/ras/ holds reports written line for line from NCCL's templates (src/ras/client_support.cc, cited in
fixtures/ras/README.md): no machine here runs a multi-rank NCCL job to record one. The variants below are made
from them the way NCCL would print them (the same templates, other values).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from qwen_triage.cli.main import cli
from qwen_triage.engine.ras import TextReader, load_json, places
from qwen_triage.report.model import Report, to_dict, validate
from tests.engine.test_hang import ROOT, scan

RAS = ROOT / "fixtures" / "ras"


def scan_json(*paths: Path) -> dict:
    """`qwen-triage scan --format json PATH…`, parsed."""
    out = CliRunner().invoke(cli, ["scan", "--format", "json", *map(str, paths)])
    assert out.exit_code in (0, 1), out.output
    return json.loads(out.output)


@pytest.mark.parametrize(("name", "culprit"), [
    ("text-dead.txt", (5, "10.0.0.12", None, None)),  # its process considered dead
    ("json-behind.json", (3, "10.0.0.11", "AllReduce", 1208)),  # it never launched AllReduce 1208
    ("watchdog-2.25.log", (2, "10.1.0.5", None, 412)),  # 2.25's one count for every collective, inside a log
])
def test_scan_names_the_rank_the_report_names(name: str, culprit: tuple) -> None:
    data = scan_json(RAS / name)
    hang = data["hang"]
    c = hang["culprit"]
    assert (c["rank"], c["host"], c["collective"], c["seq"]) == culprit
    assert "NCCL RAS" in c["why"] and hang["suspects"] == []
    verdicts = {r["rank"]: r["verdict"] for r in hang["ranks"]}
    assert verdicts.pop(culprit[0]) == "culprit"
    assert set(verdicts.values()) == {"in step"}  # the others: RAS reports nothing against them
    line = next(r for r in hang["ranks"] if r["rank"] == culprit[0])["last_line"]
    if not name.endswith(".json"):  # the text's line that names it is its evidence (a JSON report has no lines)
        assert line["path"].endswith(name) and f"Rank {culprit[0]} " in line["text"]
    validate(Report, data)


@pytest.mark.parametrize("name", ["text-healthy.txt", "json-healthy.json"])
def test_a_healthy_report_names_no_one(name: str) -> None:
    hang = scan_json(RAS / name)["hang"]
    assert hang is not None  # a multi-rank job: the report lists its eight ranks
    assert hang["culprit"] is None and hang["suspects"] == []
    assert [r["rank"] for r in hang["ranks"]] == list(range(8))
    assert {r["verdict"] for r in hang["ranks"]} == {"ok"}


def test_the_json_report_is_read_whole_as_ncclras_writes_it_or_compacted(compiled, tmp_path: Path) -> None:
    compact = tmp_path / "ras.json"
    compact.write_text(json.dumps(json.loads((RAS / "json-behind.json").read_text())))
    for path in (RAS / "json-behind.json", compact):
        report = scan(compiled, [path])
        assert [i.kind for i in report.inputs] == ["ncclras-json"]
        assert (report.hang.culprit.rank, report.hang.culprit.seq) == (3, 1208)


def test_a_broken_json_report_is_noted_not_read(compiled, tmp_path: Path) -> None:
    cut = tmp_path / "ras.json"
    cut.write_bytes((RAS / "json-behind.json").read_bytes()[:900])
    report = scan(compiled, [cut])
    assert report.hang is None
    assert any("an NCCL RAS report not read" in n for n in report.notes)


def test_the_report_inside_a_syslog_is_read_whatever_the_prefilter(compiled, compiled_literal, tmp_path: Path) -> None:
    """A watchdog that hands `ncclras` output to the journal: each line behind its syslog prefix."""
    log = tmp_path / "messages"
    log.write_text("".join(f"Nov  4 09:41:27 node-a ras-watch[812]: {line}\n" if line.strip() else "\n"
                           for line in (RAS / "text-dead.txt").read_text().splitlines()))
    for engine in (compiled, compiled_literal):
        c = scan(engine, [log]).hang.culprit
        assert (c.rank, c.host) == (5, "10.0.0.12")


def test_lines_like_a_report_s_outside_one_say_nothing(compiled, compiled_literal, tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("  Rank 3 -- GPU 3 managed by process 4410 on node 10.0.0.11\n"
                   "  2 ranks have launched up to operation 7\n"
                   "ERROR something failed\n")
    assert scan(compiled, [log]).hang is None
    assert scan(compiled_literal, [log]).hang is None


def _report_25(top: int, low: int) -> str:
    """The watchdog log's report with other counts."""
    text = (RAS / "watchdog-2.25.log").read_text()
    return text.replace("operation 412", f"operation {top}").replace("operation 411", f"operation {low}")


def test_the_last_report_counts_and_a_job_that_progressed_is_not_stuck(compiled, tmp_path: Path) -> None:
    """NCCL's docs: a count mismatch is no concern as long as the counts go up across queries."""
    log = tmp_path / "watchdog.log"
    log.write_text(_report_25(412, 411) + _report_25(530, 529))  # the others went on: in flight, not stuck
    hang = scan(compiled, [log]).hang
    assert hang.culprit is None and hang.suspects == []
    assert "progressing" in hang.summary
    assert {r.rank: r.verdict for r in hang.ranks}[2] == "behind"
    log.write_text(_report_25(412, 411) + _report_25(412, 411))  # the same counts a minute later: stuck
    assert scan(compiled, [log]).hang.culprit.rank == 2
    log.write_text(_report_25(412, 411) + _report_25(413, 413).replace(
        "  Communicator ranks have different collective operation counts\n  3 ranks have launched up to "
        "operation 413\n  Rank 2 has launched up to operation 413 -- GPU 2 managed by process 3113 on node "
        "10.1.0.5\n", ""))  # caught up: the last report has no mismatch left
    assert scan(compiled, [log]).hang.culprit is None


def _json(name: str = "json-healthy.json") -> dict:
    return json.loads((RAS / name).read_text())


def test_a_host_whose_ranks_are_all_dead_is_the_culprit(compiled, tmp_path: Path) -> None:
    doc = _json()
    world = doc["communicators"][0]
    gone = [r for r in world["ranks"] if r["host"] == "10.0.0.12"]
    world["ranks"] = [r for r in world["ranks"] if r["host"] != "10.0.0.12"]
    world["missing_ranks"] = [{k: r[k] for k in ("rank", "host", "pid", "cuda_dev", "nvml_dev")}
                              | {"status": {"unresponsive": True, "considered_dead": True}} for r in gone]
    path = tmp_path / "ras.json"
    path.write_text(json.dumps(doc, indent=2))
    hang = scan(compiled, [path]).hang
    assert (hang.culprit.rank, hang.culprit.host) == (None, "10.0.0.12")
    assert [s.rank for s in hang.suspects] == [4, 5, 6, 7]
    assert {r.rank: r.verdict for r in hang.ranks} == {**{r: "in step" for r in range(4)},
                                                        **{r: "suspect" for r in range(4, 8)}}


def test_a_rank_of_a_smaller_communicator_is_placed_through_its_process(compiled, tmp_path: Path) -> None:
    """Only node 10.0.0.12's 4-rank communicator is behind: its rank 1 is global rank 5 (same host, pid, GPU)."""
    doc = _json()
    doc["communicators"][2]["ranks"][1]["collective_counts"]["AllReduce"] -= 1
    path = tmp_path / "ras.json"
    path.write_text(json.dumps(doc, indent=2))
    c = scan(compiled, [path]).hang.culprit
    assert (c.rank, c.host, c.collective, c.seq) == (5, "10.0.0.12", "AllReduce", 4830)
    assert "communicator 0xe27a51d08c3b96f4" in c.why


def test_a_dead_process_outranks_a_rank_behind(compiled, tmp_path: Path) -> None:
    doc = _json("json-behind.json")
    world = doc["communicators"][0]
    dead = world["ranks"].pop(6)
    world["missing_ranks"] = [{k: dead[k] for k in ("rank", "host", "pid", "cuda_dev", "nvml_dev")}
                              | {"status": {"unresponsive": True, "considered_dead": False}}]
    path = tmp_path / "ras.json"
    path.write_text(json.dumps(doc, indent=2))
    hang = scan(compiled, [path]).hang
    assert hang.culprit.rank == 6 and "did not answer NCCL RAS" in hang.culprit.why
    assert {r.rank: r.verdict for r in hang.ranks}[3] == "behind"


ERRORS_TEXT = """NCCL version 2.28.9 compiled with CUDA 12.9
CUDA runtime version 12090, driver version 12080

Communicators... (0.003s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         1         4         4         4   RUNNING   ERROR

Errors
======

#0-0 (51d2e07a9c3b8f14) ERROR
  Asynchronous errors on 4 ranks
  3 ranks reported Remote process error
  Rank 0 -- GPU 0 managed by process 7101 on node 10.2.0.7
  Rank 1 -- GPU 1 managed by process 7102 on node 10.2.0.7
  Rank 2 -- GPU 2 managed by process 7103 on node 10.2.0.7
  Rank 3 reported System error -- GPU 3 (NVML 7) managed by process 7104 on node 10.2.0.7

Warnings
========

"""


def test_an_error_of_its_own_names_the_rank_its_peers_saw_fail(compiled, tmp_path: Path) -> None:
    path = tmp_path / "ras.txt"
    path.write_text(ERRORS_TEXT)
    hang = scan(compiled, [path]).hang
    assert (hang.culprit.rank, hang.culprit.host) == (3, "10.2.0.7")
    assert "reported System error" in hang.culprit.why
    rows = {r.rank: r for r in hang.ranks}
    assert [rows[r].verdict for r in range(3)] == ["lost peer"] * 3
    assert rows[3].error == "System error"
    validate(Report, to_dict(scan(compiled, [path])))


GUIDE = RAS / "guide"  # the real output NVIDIA's user guide prints (fixtures/ras/README.md)


@pytest.mark.parametrize(("name", "kind"), [("incomplete.txt", "unresponsive"), ("dead.txt", "dead")])
def test_the_user_guide_s_stopped_process_is_its_missing_rank(compiled, name: str, kind: str) -> None:
    """2.24/2.25 list the missing rank by number only; the one process missing is its process."""
    hang = scan(compiled, [GUIDE / name]).hang
    assert (hang.culprit.rank, hang.culprit.host) == (21, "172.16.64.213")
    assert ("considered dead" if kind == "dead" else "did not answer") in hang.culprit.why
    assert len(hang.ranks) == 32 and [r.rank for r in hang.ranks if r.verdict != "in step"] == [21]


def test_the_user_guide_s_six_ranks_behind_are_suspects_not_a_culprit(compiled) -> None:
    hang = scan(compiled, [GUIDE / "mismatch.txt"]).hang
    assert hang.culprit is None
    assert [s.rank for s in hang.suspects] == [0, 2, 3, 4, 5, 7]
    assert "cannot decide" in hang.summary
    rows = {r.rank: (r.entered, r.host) for r in hang.ranks}
    assert rows[1] == (6650, None) and rows[2] == (6649, "172.16.64.210")  # the rest: the group it does not list


def test_the_reader_takes_each_template() -> None:
    reader = TextReader()
    lines = ["NCCL version 2.30.7 compiled with CUDA 13.0", "Communicators... (0.020s)",
             "    0         1         2       1-2         4         4  FINALIZE  MISMATCH",
             "#0-0 (00c0ffee00c0ffee) MISMATCH", "  Communicator ranks have different status",
             "  3 ranks have status RUNNING", "  Rank 2 has status FINALIZE -- [process information not found]",
             "  Communicator ranks have different Broadcast operation counts",
             "  2 ranks have launched up to operation 9", "  Rank 0 -- GPU 0 managed by process 11 on node fe80::1",
             "  Rank 1 -- GPU 1 (NVML 3) managed by process 12 on node fe80::1",
             "  2 ranks have not launched any operations", "  Rank 2 -- [process information not found]",
             "  Rank 3 -- GPU 1 managed by process 21 on node fe80::2"]
    for n, line in enumerate(lines, 1):
        reader.feed(line, "ras.txt", n, line, n)
    comm = reader.current.comms["#0-0"]
    assert comm.size == 4 and comm.hash == "00c0ffee00c0ffee"
    assert comm.members[2].status == "FINALIZE"
    assert {r: m.counts for r, m in comm.members.items()} == {0: {"Broadcast": 9}, 1: {"Broadcast": 9},
                                                              2: {"Broadcast": 0}, 3: {"Broadcast": 0}}
    assert (comm.members[1].gpu, comm.members[1].host) == ("1 (NVML 3)", "fe80::1")
    found = places(reader.current)
    assert [found.ranks[r].kind for r in range(4)] == ["in step", "in step", "behind", "behind"]
    assert all(found.ranks[r].claim for r in (2, 3))  # two behind: suspects, not one culprit


def test_no_communicator_spans_the_job_then_no_rank_is_placed() -> None:
    """Eight 4-rank communicators and none larger: their ranks are not the job's ranks."""
    doc = _json()
    doc["communicators"] = doc["communicators"][1:]
    found = places(load_json(json.dumps(doc).encode(), "ras.json"))
    assert found.ranks == {} and "no one communicator spans the job" in found.note
