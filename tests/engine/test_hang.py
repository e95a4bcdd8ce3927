"""Hang forensics (engine.hang) on genuine torchrun runs recorded by scripts/hang_scenarios.py.

Each fixtures/hang/<scenario>/ holds the logs a run left (one combined log, torchrun's --log-dir files, or one
log per node) and an expected.yaml with the culprit the scenario planted, or the suspects when the logs cannot
tell. The suite reads the recordings; one test re-runs a scenario live where the torch venv exists.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml

from qwen_triage.engine.hang import HangTracker, decide
from qwen_triage.engine.normalize import normalize
from qwen_triage.engine.scanner import Scanner
from qwen_triage.inputs.file import open_source
from qwen_triage.report.hangview import outlier_lines
from qwen_triage.report.model import Report, to_dict, validate

ROOT = Path(__file__).resolve().parents[2]
HANG = ROOT / "fixtures" / "hang"
SCENARIOS = sorted(p.parent.name for p in HANG.glob("*/expected.yaml"))
TORCHRUN = Path("/root/.cache/qwen-triage/vllm-venv/bin/torchrun")


def scan(compiled, paths: list[Path]):
    scanner = Scanner(compiled)
    for i, p in enumerate(paths):
        for _ in scanner.scan_source(open_source(str(p), i)):
            pass
    return scanner.report()


def logs_of(scenario_dir: Path, per_rank_only: bool = False) -> list[Path]:
    root = scenario_dir / "logs" if per_rank_only else scenario_dir
    return sorted(root.rglob("*.log"))


def test_scenarios_recorded():
    assert len(SCENARIOS) >= 11, SCENARIOS


@pytest.mark.parametrize("name", SCENARIOS)
def test_genuine_scenario_names_the_planted_culprit(compiled, name):
    expected = yaml.safe_load((HANG / name / "expected.yaml").read_text())
    report = scan(compiled, logs_of(HANG / name))
    hang = report.hang
    if expected["culprit"] is None and not expected.get("suspects"):  # a healthy run
        assert hang is None or (hang.culprit is None and not hang.suspects), hang
        return
    assert hang is not None
    if expected["culprit"] is None:
        assert hang.culprit is None
        assert sorted(s.rank for s in hang.suspects) == expected["suspects"]
        assert "cannot decide" in hang.summary
        return
    assert hang.culprit is not None, hang.summary
    assert hang.culprit.rank == expected["culprit"]["rank"]
    if "host" in expected["culprit"]:
        assert hang.culprit.host == expected["culprit"]["host"]
    if expected["culprit"]["rank"] is None:  # a host, not one rank of it
        assert "culprit" not in [r.verdict for r in hang.ranks]
        if expected["mode"] == "hostdown":  # lost whole: its log names none of its ranks
            assert all(r.host != hang.culprit.host for r in hang.ranks)
        else:  # behind: every rank on it is a suspect, no rank elsewhere
            on_host = sorted(r.rank for r in hang.ranks if r.host == hang.culprit.host)
            assert on_host and sorted(s.rank for s in hang.suspects) == on_host
        return
    verdicts = {r.rank: r.verdict for r in hang.ranks}
    assert verdicts[hang.culprit.rank] == "culprit"
    assert list(verdicts.values()).count("culprit") == 1
    assert len(hang.ranks) <= expected["world_size"]


def test_per_rank_files_alone_name_the_silent_rank(compiled):
    """torchrun --log-dir: no prefix on any line; the folder says the rank, and the silent one is the culprit."""
    report = scan(compiled, logs_of(HANG / "w6-sleep-logdir", per_rank_only=True))
    assert report.hang is not None and report.hang.culprit is not None
    assert report.hang.culprit.rank == 4
    assert {r.rank for r in report.hang.ranks} == set(range(6))
    culprit_row = next(r for r in report.hang.ranks if r.rank == 4)
    assert culprit_row.last_line is not None and "stalls at step 3" in culprit_row.last_line.text


def test_root_cause_block_names_a_victim_not_the_culprit(compiled):
    """torchrun's 'Root Cause (first observed failure)' names the first rank to time out; the culprit is another."""
    text = (HANG / "w4-sleep" / "torchrun.log").read_text()
    root = text.split("Root Cause (first observed failure):")[1]
    named = int(root.split("rank      : ")[1].split()[0])
    report = scan(compiled, [HANG / "w4-sleep" / "torchrun.log"])
    assert named != 2 and report.hang.culprit.rank == 2
    assert f"names rank {named}" in report.hang.culprit.why


def test_literal_prefilter_agrees(compiled_literal):
    report = scan(compiled_literal, logs_of(HANG / "n2-sleep"))
    assert (report.hang.culprit.rank, report.hang.culprit.host) == (4, "node-b")


def test_no_multi_rank_job_gives_null(compiled):
    one_rank = sorted((ROOT / "fixtures" / "logs").rglob("*.log"))[0]
    assert scan(compiled, [one_rank]).hang is None
    data = validate(Report, {"stats": {"lines": 0, "bytes": 0, "seconds": 0, "rules": 0}})
    assert data.hang is None and data.schema_version == 3


def test_json_carries_the_hang_object(compiled):
    report = scan(compiled, logs_of(HANG / "w4-kill"))
    data = to_dict(report)
    assert data["hang"]["culprit"] == {"rank": 3, "host": "localhost", "collective": None, "seq": None,
                                       "why": data["hang"]["culprit"]["why"]}
    assert "exit code -9" in data["hang"]["culprit"]["why"]
    validate(Report, data)


# --- the NCCL watchdog's sequence numbers (templates from torch's ProcessGroupNCCL.cpp) -----------------------

def _nccl_lines(ranks: dict[int, tuple[int, int]]) -> list[str]:
    out = []
    for r, (enq, done) in ranks.items():
        if enq > done:
            out.append(f"[rank{r}]:[E227 16:30:43.526290891 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught "
                       f"collective operation timeout: WorkNCCL(SeqNum={enq}, OpType=ALLREDUCE, NumelIn=1, "
                       f"NumelOut=1, Timeout(ms)=600000) ran for 600005 milliseconds before timing out.")
        out.append(f"[rank{r}]:[E227 16:30:43.526290891 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) "
                   f"Rank {r}] Exception (either an error or timeout) detected by watchdog at work: {enq}, last "
                   f"enqueued NCCL work: {enq}, last completed NCCL work: {done}.")
    return out


def _track(lines: list[str]) -> HangTracker:
    t = HangTracker()
    for i, line in enumerate(lines, 1):
        t.observe(normalize(line, "job.log", i))
    return t


def test_nccl_rank_that_never_entered_the_collective():
    v = _track(_nccl_lines({0: (32, 31), 1: (32, 31), 2: (31, 31), 3: (32, 31)})).verdict()
    assert v.culprit is not None and (v.culprit.rank, v.culprit.seq, v.culprit.collective) == (2, 32, "ALLREDUCE")


def test_nccl_every_rank_joined_none_finished_cannot_decide():
    v = _track(_nccl_lines({0: (32, 31), 1: (32, 31), 2: (32, 31), 3: (32, 31)})).verdict()
    assert v.culprit is None and not v.decided
    assert "every rank joined and none finished" in v.note
    assert sorted(r for r, _ in v.suspects) == [0, 1, 2, 3]


# --- a rank that never reached the process group's init (c10d TCPStore::doWait under gloo's rendezvous) --------

_STORE_WAIT = "torch.distributed.DistStoreError: wait timeout after 8000ms, keys: {key}"


def test_the_rank_the_others_waited_for_in_init_is_the_culprit():
    """n2-lateinit's lines without its launcher's summary: the store key names the rank every waiter waited for."""
    lines = [f"[rank{r}]: " + _STORE_WAIT.format(key="/default_pg/0//cpu//0/4") for r in (0, 1, 2, 3, 5)]
    v = _track(lines).verdict()
    assert v.culprit is not None and v.culprit.rank == 4
    assert "never reached the process group's init" in v.culprit.why
    assert all(s.waited for s in v.ranks if s.rank != 4)


@pytest.mark.parametrize("key", ["/default_pg//cuda//0", "/default_pg/0/0", "store_based_barrier_key:1",
                                 "/1//cpu//0/4"])
def test_store_keys_that_are_not_a_peers_address_name_no_rank(key):
    """NCCL's unique-id key counts communicators, the barrier key counts barriers, a subgroup's key holds its own
    group rank: none of them says which global rank is missing."""
    lines = [f"[rank{r}]: " + _STORE_WAIT.format(key=key) for r in (1, 2, 3)]
    v = _track(lines).verdict()
    assert v is not None and not any(s.accused for s in v.ranks)
    assert v.culprit is None or "never reached" not in v.culprit.why


# --- the host whose log got less far than the others' (rules/stages.yaml; n2-latenode) --------------------------

def test_the_host_behind_in_the_launch_is_the_outlier(compiled):
    """n2-latenode: node-b's launcher rendezvoused and started its workers, which never reached the process group's
    init that node-a's did (their backend's lines): node-b is behind, its three ranks the suspects."""
    hang = scan(compiled, logs_of(HANG / "n2-latenode")).hang
    assert hang is not None and hang.culprit is not None
    assert (hang.culprit.rank, hang.culprit.host) == (None, "node-b")
    stage = [o for o in hang.outliers if o.kind == "stage"]
    assert [(o.host, o.value, o.others) for o in stage] == [
        ("node-b", "torchrun rendezvous / starting workers", "NCCL / distributed init")]
    text = "\n".join(outlier_lines(hang))
    assert "host node-b got only as far as 'torchrun rendezvous / starting workers'" in text


def test_one_late_rank_on_a_host_that_got_as_far_is_named_alone(compiled):
    """n2-lateinit: rank 4 is late, its host's other ranks reached the group's init: no host is behind."""
    hang = scan(compiled, logs_of(HANG / "n2-lateinit")).hang
    assert hang is not None and hang.culprit is not None and hang.culprit.rank == 4
    assert not [o for o in hang.outliers if o.kind == "stage"]


@pytest.mark.parametrize("reached, behind", [
    ({"a": "nccl", "b": "rendezvous", "c": "nccl"}, ("b", "rendezvous")),
    ({"a": "loading", "b": "nccl"}, ("b", "nccl")),
    ({"a": "nccl", "b": "nccl"}, None),
    ({"a": "rendezvous", "b": "rendezvous", "c": "nccl"}, None),  # two hosts behind: neither is the one
    ({"a": "nccl"}, None),
])
def test_stage_ladder_names_one_host_behind_all_others(compiled, reached, behind):
    ladder = compiled.stage_ladder
    got = ladder.behind(reached)
    assert (got[0], next(k for k, st in ladder.stages.items() if st["label"] == got[1])) == behind if behind else \
        got is None


def test_a_single_hosts_log_reads_no_stage(compiled):
    """The stage of a file is read only when a second host's file shows: a lone server log is not searched again,
    nor is one host's multi-rank log (its end is kept, never read)."""
    one = ROOT / "fixtures" / "logs" / "audit-healthy" / "fx-healthy-vllm-xformers-warning.log"
    assert compiled.stage_ladder.last(one.read_bytes()) == "serving"  # it has stage lines to read
    scanner = Scanner(compiled)
    for _ in scanner.scan_source(open_source(str(one), 0)):
        pass
    assert scanner.hang.stage_of == {} and scanner.hang._tails == {}
    ranks = HANG / "n2-latenode" / "node-a.log"  # one host's file of a job that has stage lines
    assert compiled.stage_ladder.last(ranks.read_bytes()) == "nccl"
    scanner = Scanner(compiled)
    for _ in scanner.scan_source(open_source(str(ranks), 0)):
        pass
    assert scanner.report().hang is not None
    assert scanner.hang._tails and scanner.hang.stage_of == {}


def test_one_rank_is_not_a_job():
    assert _track(_nccl_lines({0: (32, 31)})).verdict() is None
    assert decide([]).culprit is None


# --- every line knows its rank and host (engine.normalize) ----------------------------------------------------

@pytest.mark.parametrize("line, path, rank, local, host", [
    ("[rank3]: RuntimeError: boom", "x.log", 3, None, None),
    ("[default2]:step 3", "x.log", None, 2, None),
    ("(VllmWorker rank=5 pid=77) INFO ready", "x.log", 5, None, None),
    ("(Worker_TP2 pid=77) INFO ready", "x.log", 2, None, None),
    ("(RayWorkerWrapper pid=9, ip=10.1.2.3) INFO ready", "x.log", None, None, "10.1.2.3"),
    ("gpu-b7:1234:1290 [3] NCCL INFO Channel 00/02", "x.log", None, None, "gpu-b7"),
    ("plain words", "out/none_ab12/attempt_0/4/stderr.log", None, 4, None),
    ("plain words", "logs/rank_7.log", 7, None, None),
    ("plain words", "logs/frank7.log", None, None, None),
])
def test_rank_and_host_from_line_or_file(line, path, rank, local, host):
    rec = normalize(line, path, 1)
    assert (rec.rank, rec.local_rank, rec.host) == (rank, local, host)


def test_pipeline_stage_is_not_taken_for_the_rank():
    rec = normalize("(Worker_PP1_TP0 pid=77) INFO ready", "x.log", 1)
    assert rec.rank is None and rec.extra == {"pp_rank": "1", "tp_rank": "0"}


@pytest.mark.skipif(not TORCHRUN.exists(), reason="the torch venv that records the scenarios is not here")
def test_live_scenario_reproduces(compiled, tmp_path):
    """Record w4-kill afresh with torchrun (gloo, CPU) and read it: the SIGKILLed rank is named."""
    subprocess.run([sys.executable, str(ROOT / "scripts" / "hang_scenarios.py"), "--torchrun", str(TORCHRUN),
                    "--out", str(tmp_path), "--port", "29611", "w4-kill"], check=True, timeout=300)
    report = scan(compiled, logs_of(tmp_path / "w4-kill"))
    assert report.hang.culprit.rank == 3


# --- several hosts, and the kernel log of the culprit's host ---------------------------------------------------

# the NVIDIA driver's Xid 79 line as the kernel prints it (template of fixtures/logs/system/sys-fx-xid79-*.log),
# in the journal's short form with the host the line came from
XID79 = ("Dec 02 08:47:58 {host} kernel: NVRM: Xid (PCI:0000:61:00): 79, pid=29946, name=python, "
         "GPU has fallen off the bus.\n")


def _two_hosts_with_kernel_log(tmp_path: Path, kernel_host: str) -> list[Path]:
    paths = []
    for name in ("node-a.log", "node-b.log"):
        p = tmp_path / name
        p.write_bytes((HANG / "n2-sleep" / name).read_bytes())
        paths.append(p)
    kern = tmp_path / f"{kernel_host}-kern.log"
    kern.write_text(XID79.format(host=kernel_host))
    return paths + [kern]


def test_kernel_log_of_the_culprits_host_becomes_the_cause(compiled, tmp_path):
    report = scan(compiled, _two_hosts_with_kernel_log(tmp_path, "node-b"))
    hang = report.hang
    assert (hang.culprit.rank, hang.culprit.host) == (4, "node-b")
    assert hang.cause is not None and hang.cause.class_ == "hardware.xid_fatal"
    assert "hardware.xid_fatal" in hang.culprit.why


def test_another_hosts_kernel_log_is_not_the_culprits_cause(compiled, tmp_path):
    report = scan(compiled, _two_hosts_with_kernel_log(tmp_path, "node-a"))
    assert report.hang.culprit.rank == 4 and report.hang.cause is None


def test_one_log_with_kernel_lines_joins(compiled):
    report = scan(compiled, [ROOT / "fixtures" / "logs" / "system" / "sys-fx-xid79-timeout-mixed.log"])
    assert report.hang.culprit.rank == 2  # the rank that printed nothing while 0, 1 and 3 waited in #18002
    assert report.hang.culprit.seq == 18002
    assert report.hang.cause is not None and report.hang.cause.class_ == "hardware.xid_fatal"


def test_scan_reads_a_directory_of_per_rank_files():
    from click.testing import CliRunner

    from qwen_triage.cli.main import cli

    out = CliRunner().invoke(cli, ["scan", "--format", "json", str(HANG / "w6-sleep-logdir" / "logs")])
    data = __import__("json").loads(out.output)
    assert len(data["inputs"]) == 12
    assert data["hang"]["culprit"]["rank"] == 4


def test_lines_that_only_carry_a_rank_say_nothing_whatever_the_prefilter(compiled, compiled_literal, tmp_path):
    """The literal prefilter points at more lines than Hyperscan; ranked lines with nothing to tell must not make
    a job of a healthy log under one engine and none under the other."""
    log = tmp_path / "ranks.log"
    log.write_text("".join(f"(VllmWorker rank={r} pid={100 + r}) INFO 11-29 10:00:01 [worker.py:1] cache "
                           f"request model layer ready error_count=0\n[rank{r}]: cache ready\n" for r in range(4)))
    assert scan(compiled_literal, [log]).hang is None
    assert scan(compiled, [log]).hang is None


# -- several hosts, one clock (engine.clock) -------------------------------------------------------------------

GLOG_TS = re.compile(r"(?m)^(\[?[IWEF])(\d{4} \d\d:\d\d:\d\d)")


def _shift_glog(text: str, seconds: int) -> str:
    """Moves every glog timestamp of a recorded log by ``seconds``: the recording's two "hosts" share one clock
    (loopback), so the test shifts one host's timestamps to simulate a host whose clock is off."""
    def move(m: re.Match) -> str:
        t = datetime.strptime("2000" + m[2], "%Y%m%d %H:%M:%S") + timedelta(seconds=seconds)
        return m[1] + t.strftime("%m%d %H:%M:%S")
    return GLOG_TS.sub(move, text)


def _two_hosts(tmp_path: Path, scenario: str, shift: int, kernel: str | None = None) -> list[Path]:
    a, b = tmp_path / "node-a.log", tmp_path / "node-b.log"
    a.write_bytes((HANG / scenario / "node-a.log").read_bytes())
    b.write_text(_shift_glog((HANG / scenario / "node-b.log").read_text(), shift))
    paths = [a, b]
    if kernel is not None:
        (tmp_path / "node-b-kern.log").write_text(kernel)
        paths.append(tmp_path / "node-b-kern.log")
    return paths


def _offset(hang, host: str) -> float:
    return next(c.clock_offset_s for c in hang.clocks if c.host == host)


SKEW = 1.0  # the recorded launches of the two "hosts" began within a second of each other (same clock, loopback)


@pytest.mark.parametrize("shift", [0, 37, -250, 3600])
def test_a_host_clock_that_is_off_is_recovered(compiled, tmp_path, shift):
    hang = scan(compiled, _two_hosts(tmp_path, "n2-sleep", shift)).hang
    assert _offset(hang, "node-a") == 0.0  # the reference
    assert abs(_offset(hang, "node-b") - shift) < SKEW, hang.clocks
    assert (hang.culprit.rank, hang.culprit.host) == (4, "node-b")


def _xid_on_b(at: str) -> str:
    return XID79.format(host="node-b").replace("08:47:58", at)


def test_kernel_log_joins_on_the_aligned_clock(compiled, tmp_path):
    # node-b's clock is 37 s ahead: its kernel logged the Xid at 08:48:35 by its clock, 08:47:58 on node-a's,
    # 8 s before the ranks' first failure (node-a's launcher, 08:48:06). Unaligned it would come 29 s after.
    hang = scan(compiled, _two_hosts(tmp_path, "n2-sleep", 37, kernel=_xid_on_b("08:48:35"))).hang
    assert hang.cause is not None and hang.cause.class_ == "hardware.xid_fatal"
    assert abs(hang.cause_lead_s - 8) < SKEW
    assert f"{hang.cause_lead_s:.0f} s before the first failure the ranks reported (host clocks aligned)" \
        in hang.culprit.why


def test_kernel_line_after_the_failure_on_the_aligned_clock_is_not_the_cause(compiled, tmp_path):
    # the same Xid a minute after the ranks failed (on node-b's clock 08:49:43 = 08:49:06 aligned): not why
    hang = scan(compiled, _two_hosts(tmp_path, "n2-sleep", 37, kernel=_xid_on_b("08:49:43"))).hang
    assert hang.culprit.rank == 4 and hang.cause is None


def test_healthy_two_host_run_names_no_culprit_whatever_the_clocks(compiled, tmp_path):
    hang = scan(compiled, _two_hosts(tmp_path, "n2-healthy", 37)).hang
    assert hang is None or (hang.culprit is None and not hang.suspects)


def _versions(by_host: dict[str, str]) -> list[str]:
    # NCCL's own init line, as each host's rank 0 prints it (`host:pid:tid [dev] NCCL INFO NCCL version …`)
    return [f"{h}:{100 + i}:{100 + i} [0] NCCL INFO NCCL version {v}" for i, (h, v) in enumerate(by_host.items())]


def test_a_host_with_another_nccl_version_is_the_outlier(compiled, tmp_path):
    lines = _versions({"node-a": "2.21.5+cuda12.4", "node-b": "2.21.5+cuda12.4", "node-c": "2.18.1+cuda12.1"})
    v = _track(lines + _nccl_lines({0: (32, 31), 1: (32, 31), 2: (32, 31)})).verdict()
    assert v.outliers == [("node-c", "NCCL version", "2.18.1+cuda12.1", "2.21.5+cuda12.4")]
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines + _nccl_lines({0: (32, 31), 1: (32, 31), 2: (32, 31)})) + "\n")
    report = scan(compiled, [log])
    assert [(o.host, o.what) for o in report.hang.outliers] == [("node-c", "NCCL version")]
    validate(Report, to_dict(report))


def test_a_host_whose_environment_gave_nccl_another_setting_is_the_outlier(compiled, tmp_path):
    """NCCL prints each setting its environment gave (`NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0`):
    the one host of three whose value differs is the outlier, named by the setting."""
    env = {"node-a": "eth0", "node-b": "eth0", "node-c": "ib0"}
    lines = [f"{h}:{100 + i}:{100 + i} [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to {v}"
             for i, (h, v) in enumerate(env.items())]
    lines += [f"{h}:{200 + i}:{200 + i} [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1"
              for i, h in enumerate(env)]  # alike everywhere: no outlier
    job = lines + _nccl_lines({0: (32, 31), 1: (32, 31), 2: (32, 31)})
    assert _track(job).verdict().outliers == [("node-c", "NCCL_SOCKET_IFNAME", "ib0", "eth0")]
    log = tmp_path / "job.log"
    log.write_text("\n".join(job) + "\n")
    report = scan(compiled, [log])
    assert [(o.host, o.what, o.value) for o in report.hang.outliers] == [("node-c", "NCCL_SOCKET_IFNAME", "ib0")]


@pytest.mark.parametrize("by_host", [
    {"node-a": "2.21.5", "node-b": "2.18.1"},  # two hosts that differ: which one is off cannot be told
    {"node-a": "2.21.5", "node-b": "2.21.5", "node-c": "2.21.5"},
    {"node-a": "2.21.5", "node-b": "2.19.3", "node-c": "2.18.1"},
])
def test_no_outlier_when_no_one_host_stands_apart(by_host):
    v = _track(_versions(by_host) + _nccl_lines({0: (32, 31), 1: (32, 31), 2: (32, 31)})).verdict()
    assert v.outliers == []


# --- a host lost whole (n2-hostdown: node-b's launcher and workers SIGKILLed at once at step 3) ---------------


@pytest.mark.parametrize("shift", [0, 37, -250])
def test_the_host_that_went_quiet_first_is_named(compiled, tmp_path, shift):
    hang = scan(compiled, _two_hosts(tmp_path, "n2-hostdown", shift)).hang
    assert (hang.culprit.rank, hang.culprit.host, hang.culprit.collective) == (None, "node-b", "all_reduce")
    assert "went quiet first" in hang.culprit.why and "lost their peers" in hang.culprit.why
    quiet = [o for o in hang.outliers if o.kind == "quiet"]
    assert [o.host for o in quiet] == ["node-b"]
    # its last timed line (the gloo set-up, 14:51:46.97 by its clock) came 1.45 s before node-a's launcher
    # reported the first failure (14:51:48.42), whatever node-b's clock says once aligned
    assert abs(quiet[0].quiet_lead_s - 1.45) < SKEW
    # rank 0 was stopped by its own launcher after its peers failed: alive then, not the one that died
    assert {r.rank: r.verdict for r in hang.ranks} == {0: "stopped by launcher", 1: "lost peer", 2: "lost peer"}


def test_the_lost_host_s_kernel_log_is_the_cause(compiled, tmp_path):
    xid = XID79.format(host="node-b").replace("08:47:58", "14:51:45").replace("Dec 02", "Dec  2")
    hang = scan(compiled, _two_hosts(tmp_path, "n2-hostdown", 37, kernel=_shift_syslog(xid, 37))).hang
    assert hang.culprit.host == "node-b" and hang.cause is not None
    assert hang.cause.class_ == "hardware.xid_fatal" and abs(hang.cause_lead_s - 3.4) < SKEW


def _shift_syslog(line: str, seconds: int) -> str:
    t = datetime.strptime(line[:15], "%b %d %H:%M:%S") + timedelta(seconds=seconds)
    return t.strftime("%b %d %H:%M:%S") + line[15:]


def test_a_host_that_logged_on_after_the_failure_did_not_go_quiet(compiled, tmp_path):
    paths = _two_hosts(tmp_path, "n2-hostdown", 0)
    with open(paths[1], "a") as f:  # node-b still writing 40 s after node-a's ranks failed
        f.write("W1202 14:52:28.000000 19999 torch/distributed/run.py:874] still here\n")
    hang = scan(compiled, paths).hang
    assert hang.culprit is None and not [o for o in hang.outliers if o.kind == "quiet"]
    assert "cannot decide" in hang.summary


@pytest.mark.parametrize("scenario", ["n2-sleep", "n2-healthy"])
def test_no_host_went_quiet_when_every_host_spoke(compiled, scenario):
    hang = scan(compiled, logs_of(HANG / scenario)).hang
    assert hang is None or not [o for o in hang.outliers if o.kind == "quiet"]


# --- real multi-rank reports from public threads (the team's corpus, train part) ------------------------------

TRAIN = ROOT / "fixtures" / "corpus" / "train"


def _train_case(case_id: str) -> Path:
    return next(TRAIN.glob(f"*/{case_id}.log"))


def test_collectives_of_other_kinds_are_not_compared_by_number(compiled):
    """torchtune#1107: rank 1 waits in FSDP's _ALLGATHER_BASE #313, rank 0 in the default group's ALLREDUCE #315.
    The thread: rank 0 was saving a checkpoint while rank 1 went on into the all-gather. Sequence numbers count per
    process group, so rank 1's smaller number says nothing: the logs cannot decide, and rank 0 is a suspect (it
    used to be rank 1, named the culprit for its smaller number)."""
    hang = scan(compiled, [_train_case("c-torchtune-midepoch-save-allgather-watchdog-124")]).hang
    assert hang.culprit is None
    assert sorted(s.rank for s in hang.suspects) == [0, 1]


def test_the_rank_behind_in_the_same_collective_is_named(compiled):
    """LlamaFactory#2902: rank 0 waits in ALLREDUCE #1516 while rank 1 already waits in #1517."""
    c = scan(compiled, [_train_case("i-llamafactory-allreduce-desync-watchdog-timeout-023")]).hang.culprit
    assert (c.rank, c.collective, c.seq) == (0, "ALLREDUCE", 1517)


def test_a_rank_suspected_twice_is_one_suspect(compiled):
    """alpaca-lora in a container: both ranks die of SIGBUS (-7) and neither waited: each is one suspect, its
    reasons joined, and none is said to have been silent "while others waited"."""
    hang = scan(compiled, [_train_case("c-alpaca-lora-sigbus-container-089")]).hang
    assert hang.culprit is None
    assert [s.rank for s in hang.suspects] == [0, 1]
    assert all("exit code -7" in s.why and "while others waited" not in s.why for s in hang.suspects)


def _tracker_state(tracker: HangTracker) -> dict:
    import copy

    state = copy.deepcopy({k: v for k, v in vars(tracker).items() if k != "_order"})
    return state


def test_a_record_without_news_changes_only_the_count():
    """HangTracker.news, told without state, is what a part's worker (engine.split) decides by: a record whose news
    the tracker had already (none at all: a line that only carries a rank) leaves it as it was, but its count."""
    lines = [line for p in sorted(HANG.rglob("*.log")) for line in p.read_text(errors="replace").splitlines()]
    tracker, known, quiet = HangTracker(), set(), 0
    for n, line in enumerate(lines, 1):
        rec = normalize(line, "x.log", n)
        news = HangTracker.news(rec)
        if news is not None and news <= known:
            before, order = _tracker_state(tracker), tracker.seen
            tracker.observe(rec)
            assert _tracker_state(tracker) == before and tracker.seen == order + 1, line
            quiet += 1
        else:
            tracker.observe(rec)
            known |= news or set()
    assert quiet > 100 and tracker.ranks  # many such lines, and the rest told the tracker something
