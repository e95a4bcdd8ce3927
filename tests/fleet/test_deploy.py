"""deploy/: NPD configs up to date and within NPD's contract, Prometheus rules under promtool, Slurm lines."""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from qwen_triage.rulepack.pack import load_pack

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NPD = DEPLOY / "npd"
PROM = DEPLOY / "prometheus"
SLURM = DEPLOY / "slurm"
REGEN = "regenerate with: qwen-triage rules export --to npd --out deploy/npd"


def load_yaml_docs(path: Path) -> list:
    return [d for d in YAML(typ="safe").load_all(path.read_text()) if d is not None]


@pytest.fixture(scope="module")
def bundled_pack():
    old = os.environ.pop("QWEN_TRIAGE_RULES", None)  # the shipped files come from the bundled pack alone
    try:
        return load_pack()
    finally:
        if old is not None:
            os.environ["QWEN_TRIAGE_RULES"] = old


# --- node-problem-detector ------------------------------------------------------------------------------


def test_shipped_npd_configs_are_up_to_date_with_the_pack(bundled_pack) -> None:
    import re2  # noqa: F401 - google-re2, in the `test` extra
    from qwen_triage.fleet.npd_export import PLUGIN_MONITOR_FILE, export_npd, plugin_monitor_config

    want = dict(export_npd(bundled_pack).configs)
    want[PLUGIN_MONITOR_FILE] = plugin_monitor_config(bundled_pack)
    shipped = {p.name: json.loads(p.read_text()) for p in NPD.glob("*.json")}
    assert set(shipped) == set(want), REGEN
    for name, config in want.items():
        assert shipped[name] == json.loads(json.dumps(config)), f"{name} is stale; {REGEN}"


def test_shipped_log_monitor_configs_meet_the_npd_contract() -> None:
    import re2  # noqa: F401 - google-re2, in the `test` extra
    from tests.fleet.test_npd_export import assert_npd_log_config

    configs = sorted(NPD.glob("system-log-monitor-*.json"))
    assert {p.name for p in configs} == {"system-log-monitor-kmsg.json", "system-log-monitor-journald.json"}
    for path in configs:
        assert_npd_log_config(json.loads(path.read_text()))


def test_plugin_monitor_config_meets_the_custom_plugin_contract(bundled_pack) -> None:
    from qwen_triage.fleet.npd_export import node_level_classes, reason_for

    config = json.loads((NPD / "qwen-triage-plugin-monitor.json").read_text())
    assert config["plugin"] == "custom"
    pc = config["pluginConfig"]
    assert set(pc) <= {"invoke_interval", "timeout", "max_output_length", "concurrency",
                       "enable_message_change_based_condition_update", "skip_initial_status"}
    assert pc["timeout"] == "5s"  # NPD's default plugin timeout: the check must fit in it
    assert pc["max_output_length"] == 80
    assert pc["concurrency"] == 1  # the runs share one state directory and its lock
    node_classes = node_level_classes(bundled_pack)
    assert node_classes and "hardware.xid_fatal" in node_classes
    conditions = {c["type"]: c for c in config["conditions"]}
    assert len(conditions) == len(config["conditions"]) == len(node_classes)  # one condition per class
    for cls in node_classes:
        cond = conditions[f"QwenTriage{reason_for(cls)}"]
        assert cond["reason"] == f"No{reason_for(cls)}"
    classes_seen = []
    for rule in config["rules"]:
        assert rule["type"] == "permanent" and rule["condition"] in conditions
        assert re.fullmatch(r"[A-Z][A-Za-z0-9]*", rule["reason"])
        assert rule["path"].startswith("/")
        assert float(rule["timeout"].rstrip("s")) <= 5  # NPD refuses a rule timeout above the global one
        args = rule["args"]
        for flag in ("--format", "--kernel", "--state", "--class"):
            assert flag in args
        assert args[args.index("--format") + 1] == "npd"
        assert args[args.index("--state") + 1] == "/var/lib/qwen-triage"
        cls = args[args.index("--class") + 1]
        assert rule["condition"] == f"QwenTriage{reason_for(cls)}" and rule["reason"] == reason_for(cls)
        classes_seen.append(cls)
    assert sorted(classes_seen) == sorted(node_classes)
    # no condition type is set by two monitors (each re-reports all of its conditions)
    log_types = {c["type"] for p in NPD.glob("system-log-monitor-*.json") for c in json.loads(p.read_text())["conditions"]}
    assert not log_types & set(conditions)


def test_plugin_args_parse_with_the_real_check_command() -> None:
    from qwen_triage.cli import fleet as fleet_cli
    config = json.loads((NPD / "qwen-triage-plugin-monitor.json").read_text())
    for rule in config["rules"]:
        args = rule["args"]
        assert args[0] == "check"
        ctx = fleet_cli.check.make_context("check", list(args[1:]), resilient_parsing=False)
        assert ctx.params["fmt"] == "npd" and ctx.params["kernel"] is True


def test_node_level_classes_agree_with_the_slurm_drain(bundled_pack) -> None:
    from qwen_triage.fleet.npd_export import node_level_classes
    from qwen_triage.fleet.policy import NodePolicy

    policy = NodePolicy.of(bundled_pack.classes)  # what the Slurm channel drains on
    assert set(node_level_classes(bundled_pack)) == policy.node_level
    assert {c for c in bundled_pack.classes if c.startswith("node.")} <= policy.node_level & policy.held_until_boot


def test_docs_name_every_node_condition(bundled_pack) -> None:
    from qwen_triage.fleet.npd_export import node_level_classes, reason_for

    docs = (ROOT / "docs" / "fleet.md").read_text()
    for cls in node_level_classes(bundled_pack):
        row = f"| `{cls}` | `QwenTriage{reason_for(cls)}` | `QwenTriageLog{reason_for(cls)}` | `{reason_for(cls)}` |"
        assert row in docs, f"docs/fleet.md lacks the row for {cls}"


def test_daemonset_mounts_what_the_check_reads() -> None:
    docs = load_yaml_docs(NPD / "daemonset.yaml")
    kinds = {d["kind"] for d in docs}
    assert {"DaemonSet", "ServiceAccount", "ClusterRoleBinding"} <= kinds
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    host_paths = {v["hostPath"]["path"]: name for name, v in volumes.items() if "hostPath" in v}
    for path in ("/dev/kmsg", "/var/log/journal", "/run/log/journal", "/etc/machine-id", "/var/lib/qwen-triage"):
        assert path in host_paths, path
    (container,) = spec["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert set(mounts) <= set(volumes)
    for path in ("/dev/kmsg", "/var/log/journal", "/run/log/journal", "/etc/machine-id"):
        m = mounts[host_paths[path]]
        assert m["mountPath"] == path and m.get("readOnly") is True
    state = mounts[host_paths["/var/lib/qwen-triage"]]
    assert state["mountPath"] == "/var/lib/qwen-triage" and not state.get("readOnly")
    command = " ".join(container["command"])
    config_dir = mounts["config"]["mountPath"]
    for name in re.findall(r"/config/([\w.-]+\.json)", command):
        assert (NPD / name).is_file(), name
    assert f"--config.custom-plugin-monitor={config_dir}/qwen-triage-plugin-monitor.json" in command
    plugin = json.loads((NPD / "qwen-triage-plugin-monitor.json").read_text())
    assert all(r["args"][r["args"].index("--state") + 1] == state["mountPath"] for r in plugin["rules"])


# --- Prometheus -----------------------------------------------------------------------------------------

RULES = PROM / "qwen-triage.rules.yml"
RULE_TESTS = PROM / "qwen-triage.rules.test.yml"


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool is not installed (Debian package `prometheus`)")
    return path


def test_alert_rules_cover_the_contract() -> None:
    (doc,) = load_yaml_docs(RULES)
    alerts = {r["alert"]: r for g in doc["groups"] for r in g["rules"]}
    crit = alerts["QwenTriageCriticalDiagnosis"]
    assert crit["expr"].strip() == 'qwen_triage_diagnosis{severity="critical"} == 1'
    exprs = " ".join(r["expr"] for r in alerts.values())
    for metric in ("qwen_triage_diagnosis", "qwen_triage_last_check_timestamp_seconds",
                   "qwen_triage_check_errors_total", "qwen_triage_up"):
        assert metric in exprs, metric
    # every series the rules read is one `check --textfile` writes
    from qwen_triage.fleet import textfile
    written = inspect.getsource(textfile)
    for metric in set(re.findall(r"\bqwen_triage_[a-z_]+", exprs)):
        assert metric.removeprefix("qwen_triage_") in written, metric
    tested = {t["alertname"] for case in load_yaml_docs(RULE_TESTS)[0]["tests"] for t in case["alert_rule_test"]}
    assert set(alerts) <= tested, f"alerts without a promtool unit test: {set(alerts) - tested}"


def test_promtool_check_rules() -> None:
    proc = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr


def test_promtool_test_rules() -> None:
    proc = subprocess.run([promtool(), "test", "rules", RULE_TESTS.name], capture_output=True, text=True,
                          timeout=120, cwd=PROM)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr


def test_promtool_test_rules_fails_on_a_wrong_expectation(tmp_path: Path) -> None:
    """The unit tests can fail: the same tests against a rule file whose critical alert never fires."""
    tool = promtool()
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    broken = RULES.read_text().replace('qwen_triage_diagnosis{severity="critical"} == 1',
                                       'qwen_triage_diagnosis{severity="critical"} == 2')
    (tmp_path / RULES.name).write_text(broken)
    proc = subprocess.run([tool, "test", "rules", RULE_TESTS.name], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode != 0


# --- Slurm ----------------------------------------------------------------------------------------------

WRAPPER = SLURM / "qwen-triage-healthcheck"


def slurm_conf() -> dict[str, str]:
    out = {}
    for line in (SLURM / "slurm.conf.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def test_slurm_conf_lines() -> None:
    conf = slurm_conf()
    assert Path(conf["HealthCheckProgram"]).name == WRAPPER.name
    assert 0 < int(conf["HealthCheckInterval"]) <= 3600
    assert set(conf["HealthCheckNodeState"].split(",")) <= {"ALLOC", "ANY", "CYCLE", "IDLE", "MIXED",
                                                              "NONDRAINED_IDLE"}


def fake_check(tmp_path: Path, rc: int) -> Path:
    fake = tmp_path / "fake-qwen-triage"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{tmp_path}/args"\necho "hardware.xid_fatal"\nexit {rc}\n')
    fake.chmod(0o755)
    return fake


@pytest.mark.parametrize("rc", [0, 1, 2])
def test_wrapper_runs_the_drain_check_and_always_exits_0(tmp_path: Path, rc: int) -> None:
    assert WRAPPER.stat().st_mode & stat.S_IXUSR
    defaults = tmp_path / "default-qwen-triage"  # the wrapper's /etc/default/qwen-triage, never the host's
    defaults.write_text('QWEN_TRIAGE_HOLD=77\nQWEN_TRIAGE_UNITS="nvidia-fabricmanager ollama"\n')
    log = tmp_path / "healthcheck.log"
    env = {"PATH": os.environ["PATH"], "QWEN_TRIAGE": str(fake_check(tmp_path, rc)),
           "QWEN_TRIAGE_STATE": str(tmp_path / "state"), "QWEN_TRIAGE_DEFAULTS": str(defaults),
           "QWEN_TRIAGE_LOG": str(log), "SLURMD_NODENAME": "gpu-7"}
    proc = subprocess.run(["sh", str(WRAPPER)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert "hardware.xid_fatal" in log.read_text()  # what the check said, where there is no syslog
    args = (tmp_path / "args").read_text().splitlines()
    assert args[args.index("--hold") + 1] == "77"
    assert args[:2] == ["check", "--kernel"]
    assert args[args.index("--state") + 1] == str(tmp_path / "state")
    assert "--slurm-drain" in args and "--slurm-resume" not in args
    assert args[args.index("--node-name") + 1] == "gpu-7"
    assert [args[i + 1] for i, a in enumerate(args) if a == "--journal"] == ["nvidia-fabricmanager", "ollama"]
    defaults.write_text(defaults.read_text() + "QWEN_TRIAGE_RESUME=1\n")
    env["QWEN_TRIAGE_TEXTFILE"] = str(tmp_path / "qwen_triage.prom")
    subprocess.run(["sh", str(WRAPPER)], env=env, capture_output=True, text=True, timeout=60, check=True)
    args = (tmp_path / "args").read_text().splitlines()
    assert "--slurm-resume" in args and args[args.index("--textfile") + 1].endswith(".prom")
    from qwen_triage.cli import fleet as fleet_cli
    ctx = fleet_cli.check.make_context("check", args[1:])
    assert ctx.params["slurm_drain"] and ctx.params["slurm_resume"]


def test_wrapper_sets_the_path_slurm_does_not_give(tmp_path: Path) -> None:
    """slurmd starts the program with no PATH: scontrol and journalctl must still be found."""
    fake = tmp_path / "fake-qwen-triage"
    fake.write_text(f'#!/bin/sh\necho "$PATH" > "{tmp_path}/path"\n')
    fake.chmod(0o755)
    env = {"QWEN_TRIAGE": str(fake), "QWEN_TRIAGE_DEFAULTS": os.devnull, "QWEN_TRIAGE_LOG": str(tmp_path / "log")}
    subprocess.run(["/bin/sh", str(WRAPPER)], env=env, capture_output=True, text=True, timeout=60, check=True)
    path = (tmp_path / "path").read_text().strip().split(":")
    assert {"/usr/bin", "/usr/sbin", "/bin", "/usr/local/bin"} <= set(path)
