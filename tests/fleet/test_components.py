"""Real components: Debian's node_exporter and Prometheus with the shipped alert rules, and Slurm with munge.

Every daemon is started here, on 127.0.0.1 only, under `timeout` (so it stops by itself even if the test
run is killed), and stopped in the fixture's teardown. A daemon that is not installed or does not come up
skips its tests with the reason and the tail of its log. Measured delays are printed (run with -s) and
kept in tests' `record_property`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.timelimits import wait_until

from .conftest import QUIET, XID79, BootId, run_check_cli

pytestmark = [pytest.mark.components, pytest.mark.xdist_group("fleet-components")]  # one Slurm cluster per run
ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "qwen-triage.rules.yml"
ALERT = "QwenTriageCriticalDiagnosis"
DAEMON_LIFETIME = 900  # seconds: `timeout` ends a daemon this test run forgot


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def wait_for(pred: Callable[[], object], timeout: float, alive: Callable[[], bool] | None = None) -> object:
    """``pred``'s value once true; the wait ends early when the daemon it waits on (``alive``) has died."""
    return wait_until(pred, timeout, alive=alive, step=0.2)


class Daemon:
    def __init__(self, name: str, argv: list[str], log: Path, env: dict[str, str] | None = None):
        self.name, self.log = name, log
        self.fh = open(log, "ab")
        self.proc = subprocess.Popen(["timeout", "-k", "5", str(DAEMON_LIFETIME), *argv], stdout=self.fh,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                     env={**os.environ, **(env or {})})

    def alive(self) -> bool:
        return self.proc.poll() is None

    def skip(self, why: str) -> None:
        self.stop()
        pytest.skip(f"{self.name} could not start ({why}):\n{tail(self.log)}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.fh.close()


def http_get(url: str, timeout: float = 2.0) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.read().decode()
    except OSError:
        return None


def listening_on_loopback_only(port: int) -> bool:
    """Nothing of ours listens on the port at any address but 127.0.0.1."""
    try:
        out = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return True  # no ss: the listen address given on the command line is what we have
    addrs = [line.split()[3].rsplit(":", 1)[0] for line in out.splitlines() if line.strip()]
    return bool(addrs) and all(a == "127.0.0.1" for a in addrs)


def need(*binaries: str) -> None:
    missing = [b for b in binaries if shutil.which(b) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (apt-get install prometheus prometheus-node-exporter "
                    "slurmctld slurmd munge)")


# -- node_exporter and Prometheus ------------------------------------------------------------------


@pytest.fixture
def node_exporter(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    need("prometheus-node-exporter")
    textdir = tmp_path / "textfile"
    textdir.mkdir()
    port = free_port()
    d = Daemon("prometheus-node-exporter", ["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{port}",
                                            "--collector.disable-defaults", "--collector.textfile",
                                            f"--collector.textfile.directory={textdir}"], tmp_path / "ne.log")
    url = f"http://127.0.0.1:{port}/metrics"
    if not wait_for(lambda: d.alive() and http_get(url), 20, d.alive):
        d.skip("no /metrics within 20 s")
    assert listening_on_loopback_only(port)
    yield url, textdir
    d.stop()


def test_node_exporter_serves_the_textfile(node_exporter, tmp_path: Path, boot: BootId, warm_cli) -> None:  # type: ignore[no-untyped-def]
    url, textdir = node_exporter
    log = tmp_path / "kern.log"
    log.write_text(QUIET + XID79)
    # an explicit --timeout: the default 4 s is NPD's plugin budget, which a busy test machine can miss while loading
    # the pack; these tests follow the metrics, and test_check_deadline.py tests the deadline itself
    cp = run_check_cli("--file", str(log), "--state", str(tmp_path / "st"), "--textfile",
                       str(textdir / "qwen_triage.prom"), "--format", "npd", "--timeout", "120")
    assert cp.returncode == 1, cp.stderr
    metrics = http_get(url) or ""
    assert (f'qwen_triage_diagnosis{{class="hardware.xid_fatal",rule="kernel.xid",severity="critical",'
            f'source="{log}"}} 1') in metrics  # node_exporter sorts the labels
    assert "qwen_triage_up 1" in metrics
    assert f'qwen_triage_lines_read_total{{source="{log}"}} 2' in metrics
    assert "# TYPE qwen_triage_check_errors_total counter" in metrics
    assert "node_textfile_scrape_error 0" in metrics


def _rules_for_test(dest: Path) -> tuple[Path, str]:
    """The shipped rules file; `for:` of the critical alert shortened only if it is long (noted)."""
    if not RULES.exists():
        pytest.fail(f"{RULES} is missing: the alert rules this test exercises are not shipped")
    from ruamel.yaml import YAML

    yaml = YAML()
    doc = yaml.load(RULES.read_text())
    note = "shipped rules as they are"
    for group in doc["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == ALERT and rule.get("for") and str(rule["for"]) not in ("0s", "0", "0m"):
                note = f"{ALERT} for: {rule['for']} shortened to 1s for the test"
                rule["for"] = "1s"
    out = dest / "rules.yml"
    with open(out, "w") as fh:
        yaml.dump(doc, fh)
    return out, note


@pytest.fixture
def prometheus(node_exporter, tmp_path: Path) -> Iterator[tuple[str, Path, str, Callable[[], bool]]]:  # type: ignore[no-untyped-def]
    need("prometheus")
    ne_url, textdir = node_exporter
    target = ne_url.split("/")[2]
    rules, note = _rules_for_test(tmp_path)
    conf = tmp_path / "prometheus.yml"
    conf.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files: ['{rules}']\n"
        f"scrape_configs:\n  - job_name: node\n    static_configs:\n      - targets: ['{target}']\n"
    )
    port = free_port()
    d = Daemon("prometheus", ["prometheus", f"--config.file={conf}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                              f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
               tmp_path / "prometheus.log")
    base = f"http://127.0.0.1:{port}"
    if not wait_for(lambda: d.alive() and http_get(base + "/-/ready"), 60, d.alive):
        d.skip("not ready within 60 s")
    assert listening_on_loopback_only(port)
    rules_loaded = json.loads(http_get(base + "/api/v1/rules") or "{}")
    names = [r.get("name") for g in rules_loaded.get("data", {}).get("groups", []) for r in g["rules"]]
    assert ALERT in names, names
    yield base, textdir, note, d.alive
    d.stop()


def _alert_state(base: str) -> str | None:
    body = http_get(base + "/api/v1/alerts")
    if body is None:
        return None
    for a in json.loads(body)["data"]["alerts"]:
        if a["labels"].get("alertname") == ALERT and a["labels"].get("class") == "hardware.xid_fatal":
            return a["state"]
    return "inactive"


def test_xid79_fires_the_alert_and_it_resolves(prometheus, tmp_path: Path, boot: BootId, warm_cli,  # type: ignore[no-untyped-def]
                                               record_property) -> None:
    base, textdir, note, alive = prometheus
    log = tmp_path / "kern.log"
    log.write_text(QUIET)
    args = ["--file", str(log), "--state", str(tmp_path / "st"), "--textfile", str(textdir / "qwen_triage.prom"),
            "--hold", "2", "--format", "npd", "--timeout", "120"]  # a busy machine may miss the default 4 s
    assert run_check_cli(*args).returncode == 0
    up = wait_for(lambda: "qwen_triage_up" in (http_get(base + "/api/v1/query?query=qwen_triage_up") or "")
                  and json.loads(http_get(base + "/api/v1/query?query=qwen_triage_up") or "{}")["data"]["result"], 20, alive)
    assert up, "Prometheus never scraped qwen_triage_up"
    assert _alert_state(base) == "inactive"

    t0 = time.monotonic()
    with open(log, "a") as fh:
        fh.write(XID79)
    assert run_check_cli(*args).returncode == 1  # the periodic check runs (here: at once)
    state = wait_for(lambda: _alert_state(base) == "firing", 60, alive)
    fire_delay = time.monotonic() - t0
    assert state, f"{ALERT} did not fire within 60 s; alerts: {http_get(base + '/api/v1/alerts')}"

    # the line is old news now: later checks keep it active (held until the node reboots)
    time.sleep(2.5)
    assert run_check_cli(*args).returncode == 1
    assert _alert_state(base) == "firing"

    boot.reboot()
    t1 = time.monotonic()
    assert run_check_cli(*args).returncode == 0
    resolved = wait_for(lambda: _alert_state(base) == "inactive", 60, alive)
    resolve_delay = time.monotonic() - t1
    assert resolved, f"{ALERT} did not resolve; alerts: {http_get(base + '/api/v1/alerts')}"
    record_property("log_line_to_firing_alert_s", round(fire_delay, 2))
    record_property("clear_to_resolved_alert_s", round(resolve_delay, 2))
    print(f"\nPrometheus ({note}): log line -> firing alert {fire_delay:.2f} s (scrape and evaluation 1 s); "
          f"cleared -> resolved {resolve_delay:.2f} s")


# -- Slurm ----------------------------------------------------------------------------------------

NODE = "qtnode"


class Slurm:
    def __init__(self, root: Path, boot: BootId):
        self.root = root
        self.boot = boot
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.daemons: list[Daemon] = []

    def alive(self) -> bool:
        """Every daemon started so far still runs: a wait on the cluster ends when one has died."""
        return all(d.alive() for d in self.daemons)

    def scontrol(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=20, env=self.env,
                              stdin=subprocess.DEVNULL)

    def node(self) -> dict[str, str]:
        from qwen_triage.fleet.slurm import parse_show_node

        cp = self.scontrol("show", "node", "-o", NODE)
        return parse_show_node(cp.stdout) if cp.returncode == 0 else {}

    def configure_check(self, log: Path, state: Path, *extra: str) -> None:
        """What the HealthCheckProgram runs next: written atomically, read by the script each time."""
        args = " ".join(["--file", str(log), "--state", str(state), *extra])
        tmp = self.root / "hc.args.tmp"
        tmp.write_text(args + "\n")
        tmp.replace(self.root / "hc.args")

    def hc_runs(self) -> int:
        try:
            return (self.root / "hc.log").read_text().count("status:")
        except OSError:
            return 0

    def wait_runs(self, n: int, timeout: float = 90) -> None:
        start = self.hc_runs()
        assert wait_for(lambda: self.hc_runs() >= start + n, timeout, self.alive), (
            f"the health check did not run {n} more time(s):\n{tail(self.root / 'hc.log')}\n"
            f"{tail(self.root / 'slurmd.log')}")

    def reset(self) -> None:
        self.scontrol("update", f"NodeName={NODE}", "State=RESUME")
        assert wait_for(lambda: "DRAIN" not in self.node().get("State", "DRAIN"), 20, self.alive), self.node()


HEALTHCHECK = """#!/bin/sh
# slurmd runs this with an empty environment (PWD and SLURMD_NODENAME only): set what the check needs
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export SLURM_CONF={conf} QWEN_TRIAGE_BOOT_ID_FILE={boot} XDG_CACHE_HOME={cache} HOME={home}
# one check at a time: slurmd starts the next one every HealthCheckInterval even if the last still runs
exec flock -n {root}/hc.lock timeout -k 5 50 {python} -m qwen_triage check $(cat {root}/hc.args) --slurm-drain \\
  --hold 2 --format text >> {root}/hc.log 2>&1
"""


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory, warm_cli) -> Iterator[Slurm]:  # type: ignore[no-untyped-def]
    need("munged", "slurmctld", "slurmd", "scontrol")
    if os.geteuid() != 0:
        pytest.skip("slurmd and the health check's scontrol update need root")
    # short path: munge's socket name must fit a sockaddr_un
    root = Path(tempfile.mkdtemp(prefix="qt-slurm-", dir="/tmp"))
    boot = BootId(root / "boot_id")
    for d in ("munge", "ctld", "spool"):
        (root / d).mkdir(mode=0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    sock = root / "munge" / "sock"
    cluster = Slurm(root, boot)
    munged = Daemon("munged", ["munged", "-F", "-f", f"--key-file={key}", f"--socket={sock}",
                               f"--pid-file={root / 'munge' / 'pid'}", f"--log-file={root / 'munge' / 'log'}",
                               f"--seed-file={root / 'munge' / 'seed'}"], root / "munged.out")
    cluster.daemons.append(munged)

    def teardown() -> None:
        for d in reversed(cluster.daemons):
            d.stop()
        shutil.rmtree(root, ignore_errors=True)

    try:
        if not wait_for(lambda: munged.alive() and sock.exists(), 15, munged.alive):
            munged.skip("no socket within 15 s")
        ctld_port, d_port = free_port(), free_port()
        hc = root / "healthcheck"
        hc.write_text(HEALTHCHECK.format(conf=cluster.conf, boot=boot.path, cache=os.environ.get("XDG_CACHE_HOME", root),
                                         home=root, python=sys.executable, root=root))
        hc.chmod(0o755)
        (root / "hc.args").write_text(f"--file {root / 'none.log'} --state {root / 'st0'}\n")
        (root / "none.log").write_text(QUIET)
        cluster.conf.write_text(f"""\
ClusterName=qtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root / 'ctld'}
SlurmdSpoolDir={root / 'spool'}
SlurmctldPidFile={root / 'slurmctld.pid'}
SlurmdPidFile={root / 'slurmd.pid'}
SlurmctldLogFile={root / 'slurmctld.log'}
SlurmdLogFile={root / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/linear
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
HealthCheckProgram={hc}
HealthCheckInterval=1
HealthCheckNodeState=ANY
NodeName={NODE} NodeHostname={socket.gethostname()} NodeAddr=127.0.0.1 CPUs=1 RealMemory=100 State=UNKNOWN
PartitionName=debug Nodes={NODE} Default=YES State=UP
""")
        ctld = Daemon("slurmctld", ["slurmctld", "-D", "-i", "-f", str(cluster.conf)], root / "slurmctld.out",
                      env=cluster.env)
        cluster.daemons.append(ctld)
        if not wait_for(lambda: ctld.alive() and cluster.scontrol("ping").returncode == 0, 30, ctld.alive):
            ctld.skip(f"no answer to scontrol ping within 30 s\n{tail(root / 'slurmctld.log')}")
        slurmd = Daemon("slurmd", ["slurmd", "-D", "-f", str(cluster.conf), "-N", NODE], root / "slurmd.out",
                        env=cluster.env)
        cluster.daemons.append(slurmd)
        if not wait_for(lambda: slurmd.alive() and cluster.node().get("State", "").startswith("IDLE"), 40, slurmd.alive):
            slurmd.skip(f"node never became IDLE: {cluster.node()}\n{tail(root / 'slurmd.log')}")
        assert listening_on_loopback_only(ctld_port) and listening_on_loopback_only(d_port)
        cluster.wait_runs(1)
        yield cluster
    finally:
        teardown()


def test_slurm_xid79_drains_the_node_and_resumes_when_enabled(slurm_cluster: Slurm, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                              record_property) -> None:
    s = slurm_cluster
    s.reset()
    log, state = tmp_path / "kern.log", tmp_path / "state"
    log.write_text(QUIET)
    s.configure_check(log, state)
    s.wait_runs(2)
    assert "DRAIN" not in s.node()["State"]

    t0 = time.monotonic()
    with open(log, "a") as fh:
        fh.write(XID79)
    drained = wait_for(lambda: s.node().get("Reason", "").startswith("xid_fatal (qwen-triage: hardware.xid_fatal)"), 90,
                       s.alive)
    drain_delay = time.monotonic() - t0
    node = s.node()
    assert drained and "DRAIN" in node["State"], f"{node}\n{tail(s.root / 'hc.log')}"
    out = s.scontrol("show", "node", NODE).stdout
    assert "Reason=xid_fatal (qwen-triage: hardware.xid_fatal)" in out
    sinfo = subprocess.run(["sinfo", "-R", "-h", "-n", NODE], capture_output=True, text=True, timeout=20, env=s.env)
    assert sinfo.stdout.split()[:1] == ["xid_fatal"], sinfo.stdout  # the 20 characters sinfo -R shows

    # without --slurm-resume the drain stays, even once the condition has cleared (a reboot)
    s.boot.reboot()
    s.wait_runs(3)
    assert "DRAIN" in s.node()["State"]

    s.configure_check(log, state, "--slurm-resume")
    t1 = time.monotonic()
    resumed = wait_for(lambda: "DRAIN" not in s.node().get("State", "DRAIN"), 90, s.alive)
    resume_delay = time.monotonic() - t1
    assert resumed, f"{s.node()}\n{tail(s.root / 'hc.log')}"
    assert s.node().get("Reason", "") in ("", "(null)", "None")
    record_property("log_line_to_drained_node_s", round(drain_delay, 2))
    record_property("resume_enabled_to_resumed_node_s", round(resume_delay, 2))
    print(f"\nSlurm (HealthCheckInterval=1): log line -> drained node {drain_delay:.2f} s; "
          f"resume enabled -> resumed {resume_delay:.2f} s")


def test_slurm_leaves_someone_elses_drain_alone(slurm_cluster: Slurm, tmp_path: Path) -> None:
    s = slurm_cluster
    s.reset()
    log, state = tmp_path / "kern.log", tmp_path / "state"
    log.write_text(QUIET)
    s.configure_check(log, state, "--slurm-resume")
    assert s.scontrol("update", f"NodeName={NODE}", "State=DRAIN", "Reason=admin: bad DIMM").returncode == 0
    s.wait_runs(2)
    with open(log, "a") as fh:
        fh.write(XID79)
    s.wait_runs(3)
    node = s.node()
    assert "DRAIN" in node["State"] and node["Reason"].startswith("admin: bad DIMM"), node
    assert "left-alone" in tail(s.root / "hc.log", 40)
    # the condition clears: resume is on, but the drain is not ours
    s.boot.reboot()
    s.wait_runs(3)
    node = s.node()
    assert "DRAIN" in node["State"] and node["Reason"].startswith("admin: bad DIMM"), node
    s.reset()
