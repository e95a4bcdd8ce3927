"""The outputs' contracts: node-problem-detector's plugin protocol, the textfile format, the Slurm logic."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from qwen_triage.fleet import npd, slurm
from qwen_triage.fleet.check import CheckResult
from qwen_triage.fleet.state import ActiveDiagnosis
from qwen_triage.fleet.textfile import render, write_textfile

from .conftest import OOM, QUIET, XID79, bundled_policy, run_check_cli
from tests.timelimits import scaled


def diag(cls: str = "hardware.xid_fatal", severity: str = "critical", source: str = "kernel", **kw) -> ActiveDiagnosis:  # type: ignore[no-untyped-def]
    return ActiveDiagnosis(class_=cls, rule=kw.pop("rule", "kernel.xid-fatal"), severity=severity, source=source,
                           first_seen=1.0, last_seen=2.0, **kw)


def result(*active: ActiveDiagnosis, status: str | None = None, errors: list[str] | None = None) -> CheckResult:
    return CheckResult(status=status or ("problem" if active else "ok"), checked_at=1796136000.5, seconds=0.1,
                       boot_id="b", active=list(active), errors=errors or [],
                       lines_read_total={"kernel": 10}, check_errors_total=len(errors or []), policy=POLICY)


POLICY = bundled_policy()


# -- node-problem-detector ---------------------------------------------------------------------------
# Contract (node-problem-detector docs/custom_plugin_monitor.md): exit 0 OK, 1 NonOK, 2 Unknown; stdout is
# the condition message, at most max_output_length (default 80) bytes.


def test_npd_names_the_class_and_the_gpu() -> None:
    code, line = npd.npd_output(result(diag(facts={"pci": "0000:3b:00", "xid": 79})))
    assert (code, line) == (1, "hardware.xid_fatal: GPU 0000:3b:00 Xid 79")


def test_npd_condition_waits_for_an_error_of_a_node_level_class() -> None:
    """A lost carrier is named in the message, but the node's condition stays OK (as no Slurm drain follows)."""
    flap = diag(cls="node.nic_error", severity="warning", rule="node.nic-lost-carrier", title="A physical network link lost its carrier")
    code, line = npd.npd_output(result(flap))
    assert code == 0 and line.startswith("ok: warning only: node.nic_error")
    assert npd.npd_output(result(diag(), flap))[0] == 1
    assert npd.npd_output(result(diag(cls="memory.gpu_oom", severity="warning")))[0] == 1  # a workload's own warning


def test_npd_ok_and_unknown() -> None:
    assert npd.npd_output(result())[0] == 0
    code, line = npd.npd_output(result(status="unknown", errors=["/var/log/x: no such file"]))
    assert code == 2 and line.startswith("unknown: ")


@pytest.mark.parametrize("limit", [80, 40, 12])
def test_npd_line_is_bounded_one_line_and_clean(limit: int) -> None:
    hostile = diag(cls="node.kernel_panic", severity="critical", title="évil\x1b[31m\nline\r two\x00\x85 " + "é" * 200)
    code, line = npd.npd_output(result(hostile, diag(cls="memory.gpu_oom", severity="error")), max_output=limit)
    assert code == 1
    raw = line.encode("utf-8")
    assert len(raw) <= limit
    assert "\n" not in line and "\r" not in line and not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in line)
    raw.decode("utf-8")  # cut on a character boundary
    if limit >= 40:
        assert line.startswith("node.kernel_panic: ")


def test_npd_line_goes_through_the_one_sanitiser() -> None:
    """A node condition is read in `kubectl describe node`: a bidi override in a log's words would make it read
    differently from what it says, an escape sequence's parameters would show as text. The one sanitiser
    (textsafe.clean) removes both, as it does for every terminal."""
    from qwen_triage.textsafe import clean

    title = "GPU \u202eevil\u202c fell off \u2066the bus\u2069 \x1b]0;owned\x07\x1b[31mred\x1b[0m"
    _, line = npd.npd_output(result(diag(cls="node.kernel_panic", severity="critical", title=title)), max_output=200)
    assert line == "node.kernel_panic: " + " ".join(clean(title).split())
    assert not any(c in line for c in "\u202e\u202c\u2066\u2069\x1b") and "[31m" not in line and "owned" not in line


def test_npd_cli_exit_codes_and_output(tmp_path: Path, boot, warm_cli) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "k.log"
    log.write_text(QUIET)
    state = str(tmp_path / "state")
    cp = run_check_cli("--file", str(log), "--state", state, "--format", "npd")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.count("\n") == 1 and len(cp.stdout.rstrip("\n").encode()) <= 80
    with open(log, "a") as fh:
        fh.write(XID79)
    cp = run_check_cli("--file", str(log), "--state", state, "--format", "npd")
    assert cp.returncode == 1
    assert cp.stdout == "hardware.xid_fatal: GPU 0000:3b:00 Xid 79\n"
    # a condition filter for one NPD condition per class: other classes do not raise it
    cp = run_check_cli("--file", str(log), "--state", state, "--format", "npd", "--class", "runtime.*")
    assert cp.returncode == 0
    cp = run_check_cli("--file", str(tmp_path / "missing.log"), "--state", str(tmp_path / "s2"), "--format", "npd")
    assert cp.returncode == 2 and cp.stdout.startswith("unknown: ") and cp.stdout.count("\n") == 1
    cp = run_check_cli("--state", str(tmp_path / "s3"), "--format", "npd")
    assert cp.returncode == 2 and len(cp.stdout.rstrip("\n").encode()) <= 80


def test_a_locked_state_answers_from_the_stored_state(tmp_path: Path, boot, warm_cli) -> None:  # type: ignore[no-untyped-def]
    from qwen_triage.fleet.state import StateStore

    log = tmp_path / "k.log"
    log.write_text(XID79)
    state = tmp_path / "state"
    assert run_check_cli("--file", str(log), "--state", str(state), "--format", "npd").returncode == 1
    with open(log, "a") as fh:
        fh.write(OOM)
    before = (state / "state.json").read_bytes()
    with StateStore(state).locked():
        t = time.perf_counter()
        cp = run_check_cli("--file", str(log), "--state", str(state), "--format", "json", "--timeout",
                               f"{scaled(2):g}")  # the whole run: start-up on a busy machine included
        waited = time.perf_counter() - t
    assert cp.returncode == 1, cp.stderr
    out = json.loads(cp.stdout)
    assert [d["class"] for d in out["active"]] == ["hardware.xid_fatal"]  # the OOM is for the next run to read
    assert any("locked" in n for n in out["notes"]) and waited < scaled(4)
    assert (state / "state.json").read_bytes() == before


def test_quiet_node_check_is_well_inside_npd_timeout(tmp_path: Path, boot, warm_cli) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "k.log"
    log.write_text(QUIET * 1000)
    state = str(tmp_path / "state")
    run_check_cli("--file", str(log), "--state", state, "--format", "npd")
    t = time.perf_counter()
    cp = run_check_cli("--file", str(log), "--state", state, "--format", "npd", "--kernel")
    elapsed = time.perf_counter() - t
    assert cp.returncode in (0, 1), cp.stdout + cp.stderr
    assert elapsed < scaled(2.5), elapsed


# -- textfile ---------------------------------------------------------------------------------------


def test_textfile_parses_back_strictly() -> None:
    from prometheus_client import parser
    src = 'C:\\logs\\"odd"\nname.log'
    text = render(result(diag(), diag(cls="memory.gpu_oom", severity="error", rule="torch.cuda-oom", source=src)))
    fams = {f.name: f for f in parser.text_string_to_metric_families(text)}
    # counters are exposed as NAME_total; the parser names the family without _total
    assert set(fams) == {"qwen_triage_up", "qwen_triage_diagnosis", "qwen_triage_last_check_timestamp_seconds",
                         "qwen_triage_lines_read", "qwen_triage_check_errors"}
    diag_samples = fams["qwen_triage_diagnosis"].samples
    assert {s.labels["class"] for s in diag_samples} == {"hardware.xid_fatal", "memory.gpu_oom"}
    assert any(s.labels["source"] == src for s in diag_samples)
    assert all(set(s.labels) == {"class", "severity", "rule", "source"} and s.value == 1 for s in diag_samples)
    assert all(s.timestamp is None for f in fams.values() for s in f.samples)
    assert fams["qwen_triage_up"].samples[0].value == 1
    assert fams["qwen_triage_lines_read"].type == "counter"
    assert fams["qwen_triage_lines_read"].samples[0].labels == {"source": "kernel"}
    assert fams["qwen_triage_last_check_timestamp_seconds"].samples[0].value == pytest.approx(1796136000.5)
    for line in text.splitlines():
        if not line.startswith("#"):
            assert len(line.rsplit(" ", 1)) == 2  # NAME{labels} VALUE, no timestamp
    assert text.count("# HELP ") == text.count("# TYPE ") == 5


def test_textfile_up_is_0_when_a_source_failed() -> None:
    text = render(result(status="unknown", errors=["x"]))
    assert "qwen_triage_up 0\n" in text and "qwen_triage_check_errors_total 1\n" in text


def test_textfile_written_atomically_with_the_prom_suffix(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_textfile(tmp_path / "x.txt", "x")
    write_textfile(tmp_path / "qwen.prom", render(result()))
    assert [p.name for p in tmp_path.iterdir()] == ["qwen.prom"]
    assert (tmp_path / "qwen.prom").stat().st_mode & 0o777 == 0o644


def test_textfile_from_the_cli(tmp_path: Path, boot, warm_cli) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "v.log"
    log.write_text(OOM)
    prom = tmp_path / "tf" / "qwen_triage.prom"
    prom.parent.mkdir()
    cp = run_check_cli("--file", str(log), "--state", str(tmp_path / "st"), "--textfile", str(prom), "--format", "json")
    assert cp.returncode == 1, cp.stderr
    out = json.loads(cp.stdout)
    assert out["status"] == "problem" and out["active"][0]["class"] == "memory.gpu_oom"
    text = prom.read_text()
    assert (f'qwen_triage_diagnosis{{class="memory.gpu_oom",severity="error",rule="torch.cuda-oom",'
            f'source="{log}"}} 1') in text
    assert f'qwen_triage_lines_read_total{{source="{log}"}} 1' in text


# -- Slurm ------------------------------------------------------------------------------------------

SHOW = ("NodeName=gpu1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 OS=Linux 6.1 #1 SMP PREEMPT_DYNAMIC RealMemory=100 "
        "State={state} ThreadsPerCore=1 Partitions=debug BootTime=2026-12-01T14:34:44 CfgTRES=cpu=1,mem=100M "
        "AllocTRES= CapWatts=n/a{reason}")


class FakeScontrol:
    def __init__(self, state: str = "IDLE", reason: str = ""):
        self.state, self.reason = state, reason
        self.calls: list[list[str]] = []

    def __call__(self, args):  # type: ignore[no-untyped-def]
        args = list(args)
        self.calls.append(args)
        if args[:3] == ["scontrol", "show", "node"]:
            r = f" Reason={self.reason} [someone@2026-12-01T10:00:00]" if self.reason else ""
            return subprocess.CompletedProcess(args, 0, SHOW.format(state=self.state, reason=r) + "\n", "")
        if args[:2] == ["scontrol", "update"]:
            kv = dict(a.split("=", 1) for a in args[2:])
            if kv["State"] == "DRAIN":
                self.state, self.reason = "IDLE+DRAIN", kv["Reason"]
            elif kv["State"] == "RESUME":
                self.state, self.reason = "IDLE", ""
            return subprocess.CompletedProcess(args, 0, "", "")
        return subprocess.CompletedProcess(args, 1, "", "unexpected")

    @property
    def updates(self) -> list[list[str]]:
        return [c for c in self.calls if c[1] == "update"]


def test_parse_show_node_keeps_spaces_in_reason() -> None:
    f = slurm.parse_show_node(SHOW.format(state="IDLE+DRAIN", reason=" Reason=qwen-triage: hardware.xid_fatal [root@x]"))
    assert f["State"] == "IDLE+DRAIN" and f["Reason"] == "qwen-triage: hardware.xid_fatal [root@x]"
    assert f["OS"] == "Linux 6.1 #1 SMP PREEMPT_DYNAMIC" and f["CfgTRES"] == "cpu=1,mem=100M"


def test_drains_on_a_node_level_class() -> None:
    fake = FakeScontrol()
    out = slurm.apply([diag(), diag(cls="memory.gpu_oom", severity="error")], "gpu1", fake, policy=POLICY)
    assert out.action == "drained"
    assert fake.updates == [["scontrol", "update", "NodeName=gpu1", "State=DRAIN",
                             "Reason=xid_fatal (qwen-triage: hardware.xid_fatal)"]]
    out = slurm.apply([diag()], "gpu1", fake, policy=POLICY)  # already ours with the same reason: nothing to do
    assert out.action == "none" and len(fake.updates) == 1


@pytest.mark.parametrize("cls", sorted(POLICY.node_level))
def test_the_first_20_characters_of_the_reason_name_the_condition(cls: str) -> None:
    """`sinfo -R` prints 20 characters of a reason: "qwen-triage: hardwar" named nothing."""
    shown = slurm.drain_reason([cls, "node.nic_error"])[:20]
    assert shown.startswith(cls.rsplit(".", 1)[1][:20])


def test_warning_level_node_diagnoses_do_not_drain() -> None:
    """A lost carrier or a non-fatal SXid is reported, not a reason to take the node out of service."""
    fake = FakeScontrol()
    flap = diag(cls="node.nic_error", severity="warning", rule="node.nic-lost-carrier")
    sxid = diag(cls="hardware.nvlink_error", severity="warning", rule="kernel.nvswitch-sxid")
    assert slurm.apply([flap, sxid], "gpu1", fake, policy=POLICY).action == "none" and fake.updates == []
    out = slurm.apply([diag(), flap], "gpu1", fake, policy=POLICY)
    assert out.action == "drained" and out.detail == "xid_fatal (qwen-triage: hardware.xid_fatal)"


def test_job_level_classes_do_not_drain() -> None:
    fake = FakeScontrol()
    assert slurm.apply([diag(cls="memory.gpu_oom", severity="error")], "gpu1", fake, policy=POLICY).action == "none"
    assert fake.updates == []


@pytest.mark.parametrize("state", ["IDLE+DRAIN", "DOWN", "DOWN*+DRAIN", "MIXED+DRAIN", "DRAINED"])
def test_never_touches_someone_elses_drain(state: str) -> None:
    fake = FakeScontrol(state=state, reason="bad DIMM, ticket 4711")
    out = slurm.apply([diag()], "gpu1", fake, resume=True, policy=POLICY)
    assert out.action == "left-alone" and fake.updates == []
    out = slurm.apply([], "gpu1", fake, resume=True, policy=POLICY)
    assert out.action == "none" and fake.updates == []


@pytest.mark.parametrize("reason", ["xid_fatal (qwen-triage: hardware.xid_fatal)",
                                    "qwen-triage: hardware.xid_fatal"], ids=["ours", "ours-before-issue-20"])
def test_resume_only_when_enabled_and_only_our_drain(reason: str) -> None:
    fake = FakeScontrol(state="IDLE+DRAIN", reason=reason)
    assert slurm.apply([], "gpu1", fake, resume=False, policy=POLICY).action == "none"
    assert fake.updates == []
    out = slurm.apply([], "gpu1", fake, resume=True, policy=POLICY)
    assert out.action == "resumed"
    assert fake.updates == [["scontrol", "update", "NodeName=gpu1", "State=RESUME"]]


def test_scontrol_failure_is_reported_not_acted_on() -> None:
    def broken(args):  # type: ignore[no-untyped-def]
        return subprocess.CompletedProcess(list(args), 1, "", "slurm_load_node error: Unable to contact slurm controller")

    out = slurm.apply([diag()], "gpu1", broken, policy=POLICY)
    assert out.action == "error" and "Unable to contact" in out.detail


def test_node_name_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURMD_NODENAME", "from-env")
    assert slurm.node_name() == "from-env" and slurm.node_name("given") == "given"
    monkeypatch.delenv("SLURMD_NODENAME")
    assert slurm.node_name() and "." not in slurm.node_name()


def test_check_text_prints_a_file_paths_escapes_as_nothing(tmp_path: Path, boot, warm_cli) -> None:  # type: ignore[no-untyped-def]
    """Issue 29 §2: a --file path is text from outside; its escapes (OSC title, CSI, BEL) never reach the terminal."""
    log = tmp_path / "x\x1b]0;pwned\x07\x1b[2Jy.log"
    log.write_text(OOM)
    cp = run_check_cli("--file", str(log), "--state", str(tmp_path / "st"), "--format", "text", "--timeout", "120",
                       timeout=300)
    assert cp.returncode == 1, cp.stderr
    assert "memory.gpu_oom" in cp.stdout and "xy.log" in cp.stdout
    assert not any(c in cp.stdout for c in "\x1b\x07"), repr(cp.stdout)
