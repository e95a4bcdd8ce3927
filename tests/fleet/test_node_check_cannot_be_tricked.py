"""Issue 20: attacks on the fleet check, each replayed through the real check (or the real reader it uses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qwen_triage.fleet.slurm import apply

from .conftest import BootId, XID79, bundled_policy, run_check_cli
from .test_state import append_journal, fake_journal, journal_entry  # noqa: F401 - fixture

# (a) a program maps a file named like an Xid message and crashes: the kernel prints its name
SEGFAULT_XID = ("python3[4242]: segfault at 0 ip 00007f3a1c2b4000 sp 00007ffd2a1b3c40 error 4 in "
                "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus"
                "[7f3a1c2b4000+1000]")
# the same with a task name chosen to read as an Oops (the kernel puts the comm first)
SEGFAULT_OOPS = "Oops: 0000 [#1][4242]: segfault at 0 ip 00007f3a1c2b4000 sp 00007ffd2a1b3c40 error 4 in libc.so.6"
# (b) a user's prompt quoting an Xid and a CUDA ECC error, logged by vLLM's request logger and by Ollama
VLLM_PROMPT = ("INFO 12-01 10:00:00 [logger.py:39] Received request cmpl-7f: prompt: 'my node said NVRM: Xid "
               "(PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus and CUDA error: uncorrectable "
               "ECC error encountered, what now?', params: SamplingParams(n=1, temperature=0.7)")
OLLAMA_PROMPT = ('time=2026-12-01T10:00:00.000Z level=DEBUG source=routes.go:1500 msg="chat request" '
                 'prompt="[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off '
                 'the bus. CUDA error: uncorrectable ECC error encountered"')


def kmsg_file(path: Path, *messages: str) -> Path:
    """A file in /dev/kmsg's record format, read by the check's real kmsg reader (QWEN_TRIAGE_KMSG)."""
    path.write_text("".join(f"3,{i + 1},{(i + 1) * 1000},-;{m}\n" for i, m in enumerate(messages)))
    return path


def check_json(*args: str, env: dict[str, str] | None = None) -> dict:
    # a generous --timeout: these tests are about what is read, not how fast (a cold rule cache compiles first)
    if "--timeout" not in args:
        args = (*args, "--timeout", "120")
    cp = run_check_cli(*args, "--format", "json", env=env, timeout=300)
    assert cp.returncode in (0, 1), cp.stderr
    return json.loads(cp.stdout)


POLICY = bundled_policy()


def node_classes(result: dict) -> list[str]:
    return [d["class"] for d in result["active"] if POLICY.about_node(d["class"])]


def cli(*args: str, **kw):  # type: ignore[no-untyped-def]
    """The check as a subprocess, with a --timeout that a cold rule cache on a busy machine meets."""
    return run_check_cli(*args, "--timeout", "120", timeout=300, **kw)


class NoScontrol:
    """A stand-in for scontrol that answers `show node` and records any update: no real node is touched."""

    def __init__(self) -> None:
        self.updates: list[list[str]] = []

    def __call__(self, args):  # type: ignore[no-untyped-def]
        if list(args[:3]) == ["scontrol", "show", "node"]:
            return subprocess.CompletedProcess(args, 0, "NodeName=gpu-7 State=IDLE Reason=(null)\n", "")
        self.updates.append(list(args))
        return subprocess.CompletedProcess(args, 0, "", "")


def test_segfault_report_naming_an_xid_drains_nothing(tmp_path: Path, boot: BootId) -> None:
    kmsg = kmsg_file(tmp_path / "kmsg", SEGFAULT_XID, SEGFAULT_OOPS)
    result = check_json("--kernel", "--state", str(tmp_path / "st"), env={"QWEN_TRIAGE_KMSG": str(kmsg)})
    assert node_classes(result) == []
    assert "process.segfault" in [d["class"] for d in result["active"]]  # the kernel's own word: a crash
    from qwen_triage.fleet.state import ActiveDiagnosis

    runner = NoScontrol()
    outcome = apply([ActiveDiagnosis.model_validate(d) for d in result["active"]], "gpu-7", runner=runner, policy=POLICY)
    assert outcome.action == "none" and runner.updates == []


def test_a_real_kernel_xid_still_drains(tmp_path: Path, boot: BootId) -> None:
    kmsg = kmsg_file(tmp_path / "kmsg", XID79.split("] ", 1)[1].strip())
    result = check_json("--kernel", "--state", str(tmp_path / "st"), env={"QWEN_TRIAGE_KMSG": str(kmsg)})
    assert node_classes(result) == ["hardware.xid_fatal"]
    assert result["active"][0]["until_boot"] is True


# a server's own error line that quotes the kernel's words (not a request logger's field: issue 29 cuts those)
SERVER_QUOTES_XID = ("ERROR 12-01 10:00:00 [health.py:12] the driver said: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, "
                     "name=python3, GPU has fallen off the bus")


@pytest.mark.parametrize("line", [VLLM_PROMPT, OLLAMA_PROMPT, SERVER_QUOTES_XID],
                         ids=["vllm-request-logger", "ollama", "server-error"])
def test_a_quoted_xid_in_a_server_log_file_is_not_node_level(tmp_path: Path, boot: BootId, line: str) -> None:
    log = tmp_path / "server.log"
    log.write_text(line + "\n")
    result = check_json("--file", str(log), "--state", str(tmp_path / "st"))
    assert node_classes(result) == []
    if line is SERVER_QUOTES_XID:
        assert any("node-level classes come only from the kernel" in n for n in result["notes"])
    else:  # a request logger's client fields are cut before any rule reads them: nothing to set aside
        assert result["active"] == []


@pytest.mark.parametrize("line", [VLLM_PROMPT, OLLAMA_PROMPT], ids=["vllm-request-logger", "ollama"])
def test_a_quoted_xid_in_a_server_journal_unit_is_not_node_level(tmp_path: Path, boot: BootId, fake_journal: Path,  # noqa: F811
                                                                 line: str) -> None:
    entry = journal_entry(1, line, time.time(), transport="stdout")
    entry.update({"SYSLOG_IDENTIFIER": "ollama", "_SYSTEMD_UNIT": "ollama.service", "_PID": "812"})
    append_journal(fake_journal, entry)
    # a process that names itself "kernel" is not the kernel either
    spoof = journal_entry(2, XID79.split("] ", 1)[1].strip(), time.time(), transport="syslog")
    spoof.update({"SYSLOG_IDENTIFIER": "kernel", "_PID": "4242", "_COMM": "logger"})
    append_journal(fake_journal, spoof)
    result = check_json("--journal", "ollama", "--state", str(tmp_path / "st"))
    assert result["sources"][0]["lines"] == 2
    assert node_classes(result) == []


def test_one_xid_line_counts_once(tmp_path: Path, boot: BootId) -> None:
    log = tmp_path / "kern.log"
    log.write_text(XID79)  # two rules read it (the Xid table and "fallen off the bus"): one line of evidence
    result = check_json("--file", str(log), "--state", str(tmp_path / "st"))
    assert [(d["class"], d["count"]) for d in result["active"]] == [("hardware.xid_fatal", 1)]
    with open(log, "a") as fh:
        fh.write(XID79)
    result = check_json("--file", str(log), "--state", str(tmp_path / "st"))
    assert [(d["class"], d["count"]) for d in result["active"]] == [("hardware.xid_fatal", 2)]


# -- 2. a stranger's benign pattern ---------------------------------------------------------------------------

BACKTRACKING_BENIGN = """\
benign:
  - pattern: 'ERROR (a|aa)+$'
    why: "a site's own noise"
    examples: ["ERROR aa"]
"""


def test_a_backtracking_benign_pattern_is_disabled_not_run_for_ever(tmp_path: Path) -> None:
    from qwen_triage.engine.scanner import Scanner, compile_pack
    from qwen_triage.inputs.file import open_source

    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "benign.yaml").write_text(BACKTRACKING_BENIGN)
    log = tmp_path / "x.log"
    log.write_text("ERROR " + "a" * 45 + "!\n")  # 45 bytes of the attack: minutes of backtracking unguarded
    scanner = Scanner(compile_pack([str(tmp_path / "rules")]))
    for _ in scanner.scan_source(open_source(str(log))):
        pass
    notes = scanner.report().notes
    assert any("known-benign pattern 'ERROR (a|aa)+$' was disabled" in n for n in notes), notes


def test_lint_probes_benign_patterns(tmp_path: Path) -> None:
    (tmp_path / "benign.yaml").write_text(BACKTRACKING_BENIGN)
    cp = subprocess.run([sys.executable, "-m", "qwen_triage", "rules", "lint", str(tmp_path)], capture_output=True,
                        text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert cp.returncode != 0
    assert "benign pattern 'ERROR (a|aa)+$'" in cp.stdout + cp.stderr


# -- 3. a symlinked --state -----------------------------------------------------------------------------------

def test_a_symlinked_state_directory_is_refused_and_its_target_untouched(tmp_path: Path, boot: BootId) -> None:
    target = tmp_path / "someone-elses"
    target.mkdir(mode=0o755)
    target.chmod(0o755)
    link = tmp_path / "state"
    link.symlink_to(target)
    log = tmp_path / "x.log"
    log.write_text(XID79)
    cp = cli("--file", str(log), "--state", str(link), "--format", "npd")
    assert cp.returncode == 2
    assert "is a symlink" in cp.stderr
    assert target.stat().st_mode & 0o777 == 0o755 and list(target.iterdir()) == []
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    cp = cli("--file", str(log), "--state", str(dangling))
    assert cp.returncode == 2 and not (tmp_path / "nowhere").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_state_directory_of_another_user_is_refused(tmp_path: Path, boot: BootId) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 12345, 12345)
    log = tmp_path / "x.log"
    log.write_text(XID79)
    cp = cli("--file", str(log), "--state", str(theirs))
    assert cp.returncode == 2 and "belongs to uid 12345" in cp.stderr
    assert list(theirs.iterdir()) == []


# -- 4. a 20 MB journal entry ---------------------------------------------------------------------------------

def test_a_20mb_journal_entry_is_skipped_and_the_xid_after_it_read(tmp_path: Path, boot: BootId,
                                                                   fake_journal: Path) -> None:  # noqa: F811
    now = time.time()
    append_journal(fake_journal, journal_entry(1, "x" * (20 << 20), now),
                   journal_entry(2, XID79.split("] ", 1)[1].strip(), now))
    state = str(tmp_path / "st")
    result = check_json("--kernel", "--state", state, "--timeout", "60")
    assert node_classes(result) == ["hardware.xid_fatal"]
    assert any("more than" in n and "skipped" in n for n in result["notes"])
    again = check_json("--kernel", "--state", state, "--timeout", "60")
    assert again["sources"][0]["lines"] == 0  # the big entry is behind the cursor: never read again
    assert node_classes(again) == ["hardware.xid_fatal"]


# -- 6. crashes -----------------------------------------------------------------------------------------------

def test_a_file_path_that_is_not_utf8_is_checked_and_saved(tmp_path: Path, boot: BootId) -> None:
    name = os.fsencode(str(tmp_path)) + b"/kern-\xff\xfe.log"
    with open(name, "wb") as fh:
        fh.write(XID79.encode())
    path = os.fsdecode(name)
    state = str(tmp_path / "st")
    textfile = str(tmp_path / "qwen_triage.prom")
    for _ in range(2):
        cp = subprocess.run([sys.executable, "-m", "qwen_triage", "check", "--file", path, "--state", state,
                             "--textfile", textfile, "--format", "npd", "--timeout", "120"], capture_output=True, timeout=120,
                            stdin=subprocess.DEVNULL)
        assert cp.returncode == 1, cp.stderr
    assert b"hardware.xid_fatal" in cp.stdout
    saved = json.loads((tmp_path / "st" / "state.json").read_text())
    assert list(saved["sources"]) == [f"file:{tmp_path}/kern-\\xff\\xfe.log"]
    assert "qwen_triage_up 1" in Path(textfile).read_text()


def test_a_state_file_with_impossible_times_is_rebuilt(tmp_path: Path, boot: BootId) -> None:
    log = tmp_path / "x.log"
    log.write_text(XID79)
    state = tmp_path / "st"
    cli("--file", str(log), "--state", str(state))
    saved = json.loads((state / "state.json").read_text())
    for d in saved["active"].values():
        d["first_seen"], d["last_seen"] = 1e300, -5e18
    (state / "state.json").write_text(json.dumps(saved))
    cp = cli("--file", str(log), "--state", str(state), "--format", "text")
    assert cp.returncode in (0, 1), cp.stderr
    assert "is corrupt" in cp.stdout and "Traceback" not in cp.stderr


def nested_yaml(depth: int) -> str:
    return "rules:\n  - id: site.deep\n    class: hardware.xid_app\n    title: deep\n    extra: " + "[" * depth + "]" * depth + "\n"


@pytest.mark.parametrize("depth", [500, 5000])
def test_deeply_nested_yaml_is_a_clean_refusal(tmp_path: Path, boot: BootId, depth: int) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "deep.yaml").write_text(nested_yaml(depth))
    log = tmp_path / "x.log"
    log.write_text(XID79)
    cp = cli("--rules", str(rules), "--file", str(log), "--state", str(tmp_path / "st"))
    assert cp.returncode == 2
    assert "nested deeper than 32 levels" in cp.stderr and "Traceback" not in cp.stderr


# -- 7. bounded loading ---------------------------------------------------------------------------------------

def table_rule(rows: int) -> str:
    body = "".join(f"        - values: [{1000 + i}]\n          severity: info\n          title: \"row {i}\"\n"
                   for i in range(rows))
    return ("rules:\n  - id: site.codes\n    class: hardware.xid_app\n    title: A site table\n    severity: error\n"
            "    sources: [kernel]\n    match:\n      any: ['SITECODE (?P<code>\\d+)']\n    extract: {code: int}\n"
            "    table:\n      key: code\n      source: https://example.com/codes\n      rows:\n" + body +
            "    examples:\n      match: [\"SITECODE 1001\"]\n      no_match: [\"SITECODE\"]\n")


@pytest.mark.parametrize(("rows", "limit"), [(20_000, "more than 20000 YAML nodes"),
                                              (300, "at most 200 items")])
def test_a_huge_table_is_refused_naming_the_limit(tmp_path: Path, boot: BootId, rows: int, limit: str) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "codes.yaml").write_text(table_rule(rows))
    log = tmp_path / "x.log"
    log.write_text(XID79)
    cp = cli("--rules", str(rules), "--file", str(log), "--state", str(tmp_path / "st"))
    assert cp.returncode == 2
    assert limit in cp.stderr, cp.stderr


# -- 5. secrets the masker missed -----------------------------------------------------------------------------

SECRET_FORMS = [
    ("non-default args: {'model': 'Qwen/Qwen2.5-7B', 'api_key': ['sk-live-1a2b3c4d', 'second-key-99'], 'port': 8000}",
     ["sk-live-1a2b3c4d", "second-key-99"]),
    ("Cookie: session=9f8e7d6c5b4a; csrftoken=abc123XYZ", ["9f8e7d6c5b4a", "abc123XYZ"]),
    ("Set-Cookie: sid=31d4d96e407aad42; Path=/; Secure", ["31d4d96e407aad42"]),
    ("request headers: {'cookie': 'sessionid=abcdef1234'}", ["abcdef1234"]),
    ("ERROR login failed: password hunter2! rejected", ["hunter2!"]),
    ("ERROR aws_access_key_id AKIAIOSFODNN7EXAMPLE is not valid", ["AKIAIOSFODNN7EXAMPLE"]),
    ("key=-----BEGIN RSA PRIVATE KEY-----\\nMIIEowIBAAKCAQEAx4UbaDzY1jRg\\n-----END RSA PRIVATE KEY-----",
     ["MIIEowIBAAKCAQEAx4UbaDzY1jRg"]),
    ("MIIEowIBAAKCAQEAx4UbaDzY1jRgJ4ptdk2OT0ZJ5T7kN8g9o8r2FYe0mXqkFjvTzL0s", ["MIIEowIBAAKCAQEAx4UbaDzY1jRg"]),
]


@pytest.mark.parametrize(("text", "secrets"), SECRET_FORMS)
def test_each_secret_form_is_masked(text: str, secrets: list[str]) -> None:
    from qwen_triage.redact import redact_text

    out = redact_text(text)
    assert "***" in out and not any(s in out for s in secrets), out


@pytest.mark.parametrize("text", ["FATAL: password authentication failed for user \"x\"", "password is required",
                                  "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"])
def test_words_near_secrets_stay(text: str) -> None:
    from qwen_triage.redact import redact_text

    assert redact_text(text) == text


def test_secrets_do_not_reach_a_report(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    forms = SECRET_FORMS[:-1]  # the last is a bare PEM body line, masked only as a line of its own
    log.write_text("".join(f"ERROR 12-01 10:00:0{i} [x.py:1] {text}\n" for i, (text, _) in enumerate(forms))
                   + "RuntimeError: boom\n")
    cp = subprocess.run([sys.executable, "-m", "qwen_triage", "scan", "--format", "json", str(log)],
                        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert cp.stdout, cp.stderr
    for _, secrets in forms:
        assert not any(s in cp.stdout for s in secrets)


# -- the suite on a host configured as docs/fleet.md says ------------------------------------------------------

def test_the_suite_sees_no_site_configuration(tmp_path: Path) -> None:
    """With /etc/default/qwen-triage, QWEN_TRIAGE_RULES and a Slurm cluster on the host, a test sees none."""
    for name in ("QWEN_TRIAGE_RULES", "QWEN_TRIAGE_RESUME", "QWEN_TRIAGE_UNITS", "SLURMD_NODENAME"):
        assert name not in os.environ
    assert os.environ["QWEN_TRIAGE_DEFAULTS"] == os.devnull
    assert Path(os.environ["SLURM_CONF"]).read_bytes() == b""
    assert Path.home() != Path("/root") and not str(Path.home()).startswith("/home/")
    from qwen_triage.fleet.node_check import default_state_dir

    assert not default_state_dir().startswith("/var/lib")
    if subprocess.run(["sh", "-c", "command -v scontrol"], capture_output=True).returncode == 0:
        # a stray scontrol answers at once, from no controller
        cp = subprocess.run(["scontrol", "show", "node", "gpu-7"], capture_output=True, text=True, timeout=30,
                            stdin=subprocess.DEVNULL)
        assert cp.returncode != 0


def test_the_wrapper_run_by_a_test_reads_no_host_defaults(tmp_path: Path) -> None:
    from .test_deploy import WRAPPER, fake_check

    env = {**os.environ, "QWEN_TRIAGE": str(fake_check(tmp_path, 1)), "QWEN_TRIAGE_LOG": str(tmp_path / "log"),
           "QWEN_TRIAGE_STATE": str(tmp_path / "state")}
    subprocess.run(["sh", str(WRAPPER)], env=env, capture_output=True, text=True, timeout=60, check=True)
    args = (tmp_path / "args").read_text().splitlines()
    assert "--slurm-resume" not in args and "--journal" not in args and "--node-name" not in args
    assert args[args.index("--hold") + 1] == "3600"


# -- docs: a hardware condition clears at the next boot, or by hand after a repair ----------------------------

def test_a_held_hardware_class_clears_by_hand_and_comes_back_on_new_evidence(tmp_path: Path, boot: BootId) -> None:
    log = tmp_path / "kern.log"
    log.write_text(XID79)
    state = str(tmp_path / "st")
    assert node_classes(check_json("--file", str(log), "--state", state, "--hold", "0")) == ["hardware.xid_fatal"]
    assert node_classes(check_json("--file", str(log), "--state", state, "--hold", "0")) == ["hardware.xid_fatal"]
    cleared = check_json("--file", str(log), "--state", state, "--hold", "0", "--clear", "hardware.*")
    assert node_classes(cleared) == [] and [d["class"] for d in cleared["cleared"]] == ["hardware.xid_fatal"]
    assert node_classes(check_json("--file", str(log), "--state", state, "--hold", "0")) == []  # read already
    with open(log, "a") as fh:
        fh.write(XID79)
    assert node_classes(check_json("--file", str(log), "--state", state, "--hold", "0")) == ["hardware.xid_fatal"]
    boot.reboot()
    assert node_classes(check_json("--file", str(log), "--state", state, "--hold", "0")) == []


def test_the_timer_units_run_a_check_the_cli_accepts() -> None:
    import configparser
    import shlex

    from qwen_triage.cli import fleet as fleet_cli

    units = Path(__file__).resolve().parents[2] / "deploy" / "systemd"
    service = configparser.ConfigParser(strict=True, interpolation=None)
    service.read_string((units / "qwen-triage-check.service").read_text())
    timer = configparser.ConfigParser(strict=True, interpolation=None)
    timer.read_string((units / "qwen-triage-check.timer").read_text())
    assert service["Service"]["Type"] == "oneshot" and "1" in service["Service"]["SuccessExitStatus"].split()
    argv = shlex.split(service["Service"]["ExecStart"])
    assert argv[0].startswith("/") and argv[1] == "check"  # a full path: no PATH to rely on
    ctx = fleet_cli.check.make_context("check", argv[2:])
    assert ctx.params["kernel"] and ctx.params["textfile"].endswith(".prom")
    assert timer["Timer"]["OnUnitActiveSec"] and timer["Install"]["WantedBy"] == "timers.target"


# -- 1, in the engine: `sources:` is enforced for every rule --------------------------------------------------

def fired_rules(compiled, text: str) -> set[str]:  # type: ignore[no-untyped-def]
    import io

    from qwen_triage.engine.scanner import Scanner
    from qwen_triage.engine.sources import iter_blocks
    from qwen_triage.inputs.source import Source

    scanner = Scanner(compiled)
    fired = set()
    source = Source(name="x.log", stream=io.BytesIO(text.encode()))
    scanner.add_source(source)
    for block in iter_blocks(source):
        fired |= {f.rule.rule.id for f in scanner.matcher.feed_block(block, source.name, source.index)}
    fired |= {f.rule.rule.id for f in scanner.matcher.finish()}
    return fired


@pytest.mark.parametrize("line", [VLLM_PROMPT, OLLAMA_PROMPT, "[ 12.345678] " + SEGFAULT_XID,
                                  "Dec  1 10:00:00 gpu-7 ollama[812]: [ 1234.567890] " + XID79.split("] ", 1)[1].strip()],
                         ids=["vllm", "ollama", "segfault", "syslog-app-tag"])
def test_kernel_rules_never_fire_on_text_the_kernel_did_not_put_there(compiled, line: str) -> None:  # type: ignore[no-untyped-def]
    assert not {"kernel.xid", "kernel.gpu-fallen-off-bus"} & fired_rules(compiled, line + "\n")


@pytest.mark.parametrize("line", [XID79, XID79.split("] ", 1)[1], "Dec  1 10:00:00 gpu-7 kernel: " + XID79.split("] ", 1)[1]],
                         ids=["dmesg", "bare", "syslog"])
def test_kernel_rules_still_fire_on_the_kernel_s_own_lines(compiled, line: str) -> None:  # type: ignore[no-untyped-def]
    assert "kernel.xid" in fired_rules(compiled, line)


def test_a_journal_entry_claiming_to_be_the_kernel_is_not(compiled, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    message = XID79.split("] ", 1)[1].strip()
    spoof = {"__CURSOR": "s=1", "MESSAGE": message, "SYSLOG_IDENTIFIER": "kernel", "_TRANSPORT": "syslog",
             "_PID": "4242", "_COMM": "logger"}
    real = {**spoof, "__CURSOR": "s=2", "_TRANSPORT": "kernel"}
    assert "kernel.xid" not in fired_rules(compiled, json.dumps(spoof) + "\n")
    assert "kernel.xid" in fired_rules(compiled, json.dumps(real) + "\n")


def test_clear_rewrites_the_textfile_so_the_alert_stops_now(tmp_path: Path, boot: BootId) -> None:
    """Issue 29 §3: `--clear` with `--textfile` rewrites the metrics at once (with the sources or alone), so the
    Prometheus alert does not keep firing until the next scheduled check."""
    log = tmp_path / "kern.log"
    log.write_text(XID79)
    state, prom = str(tmp_path / "st"), tmp_path / "qwen_triage.prom"
    check_json("--file", str(log), "--state", state, "--textfile", str(prom))
    assert 'class="hardware.xid_fatal"' in prom.read_text()
    cleared = check_json("--state", state, "--textfile", str(prom), "--clear", "hardware.*")
    assert cleared["status"] == "ok" and [d["class"] for d in cleared["cleared"]] == ["hardware.xid_fatal"]
    text = prom.read_text()
    assert 'class="hardware.xid_fatal"' not in text and "qwen_triage_up 1" in text
    # the timer's next run (with its sources) does not raise it again: the line was read already
    assert node_classes(check_json("--file", str(log), "--state", state, "--textfile", str(prom))) == []
