"""`rules export --to npd`: regex -> RE2 conversion, NPD's buffer semantics, the exported configs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import regex

import re2  # noqa: E402 - google-re2, in the `test` extra

from qwen_triage.fleet.npd_export import (  # noqa: E402
    JOURNALD,
    KMSG,
    NpdBuffer,
    Unexpressible,
    export_npd,
    healthy_reason,
    npd_all_patterns,
    npd_fires,
    npd_pattern,
    plugins_for,
    reason_for,
    to_re2,
)
from qwen_triage.rulepack.pack import load_pack  # noqa: E402

CAMEL = re.compile(r"^[A-Z][A-Za-z0-9]*$")
GO_DURATION = re.compile(r"^(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+$|^0$")


def re2_ok(pattern: str) -> bool:
    opts = re2.Options()
    opts.log_errors = False
    try:
        re2.compile(pattern, opts)
        return True
    except re2.error:
        return False


def assert_npd_log_config(config: dict[str, Any]) -> None:
    """The system-log-monitor contract (pkg/systemlogmonitor/config.go, types/types.go, README)."""
    assert config["plugin"] in (KMSG, JOURNALD)
    allowed = {"plugin", "pluginConfig", "logPath", "lookback", "bufferSize", "source", "metricsReporting",
               "conditions", "rules", "skipList", "delay"}
    assert set(config) <= allowed, set(config) - allowed
    assert isinstance(config["logPath"], str) and config["logPath"].startswith("/")
    assert GO_DURATION.match(config["lookback"]), config["lookback"]
    assert isinstance(config["bufferSize"], int) and config["bufferSize"] >= 1
    assert isinstance(config["source"], str) and config["source"]
    assert isinstance(config.get("metricsReporting", True), bool)
    if config["plugin"] == JOURNALD:
        # the journald watcher refuses an empty SYSLOG_IDENTIFIER
        assert isinstance(config["pluginConfig"]["source"], str) and config["pluginConfig"]["source"]
    if "pluginConfig" in config:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in config["pluginConfig"].items())
    types = set()
    for cond in config["conditions"]:
        assert set(cond) == {"type", "reason", "message"}
        assert CAMEL.match(cond["type"]) and CAMEL.match(cond["reason"]), cond
        assert isinstance(cond["message"], str) and cond["message"]
        assert cond["type"] not in types, f"condition {cond['type']} listed twice"
        types.add(cond["type"])
    assert config["rules"], "a config with no rules"
    used = set()
    for rule in config["rules"]:
        assert set(rule) <= {"type", "condition", "reason", "pattern", "patternGeneratedMessageSuffix"}, rule
        assert rule["type"] in ("temporary", "permanent")
        assert CAMEL.match(rule["reason"]), rule["reason"]
        if rule["type"] == "permanent":
            assert rule["condition"] in types, f"permanent rule on unlisted condition {rule['condition']}"
            used.add(rule["condition"])
        else:
            assert "condition" not in rule
        assert isinstance(rule["pattern"], str) and rule["pattern"]
        # as NPD compiles it: the pattern alone, then with \z appended
        assert re2_ok(rule["pattern"]) and re2_ok(rule["pattern"] + r"\z"), rule["pattern"]
    assert used == types, f"conditions no rule sets: {types - used}"


# --- naming ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls,reason",
    [
        ("hardware.xid_fatal", "HardwareXidFatal"),
        ("runtime.fabric_manager_down", "RuntimeFabricManagerDown"),
        ("node.kernel_panic", "NodeKernelPanic"),
        ("memory.gpu_oom", "MemoryGpuOom"),
    ],
)
def test_reason_is_stable_camel_case(cls: str, reason: str) -> None:
    assert reason_for(cls) == reason
    assert healthy_reason(cls) == "No" + reason


def test_every_class_gives_a_distinct_camel_case_reason() -> None:
    pack = load_pack()
    reasons = [reason_for(c) for c in pack.classes]
    assert all(CAMEL.match(r) for r in reasons)
    assert len(set(reasons)) == len(reasons)


# --- conversion -----------------------------------------------------------------------------------------

LINES = [
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.",
    "NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=x, Graphics Exception",
    "ollama.service: Failed with result 'oom-kill'.",
    "abc foo bar",
    "foo",
    "xfoo",
    "café au lait",
    "a{,3}b literal",
    "aaab",
    "FOO BAR",
    "",
]


@pytest.mark.parametrize(
    "pattern",
    [
        r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\): (?P<xid>79|48)\b",
        r"(?P<unit>[\w@.-]{1,80})\.service: Failed with result '(?P<r>[\w-]{1,30})'",
        r"(?P<s>foo)|(?P<s>bar)",  # duplicate names: fine in `regex`, rejected by Go
        r"^foo|bar",
        r"foo$",
        r"(foo|xfoo)$",
        r"a{,3}b",
        r"caf\u00e9",
        r"name=[^,]{1,20},",
        r"(?i)foo bar",
        r"\bfoo\b",
        r"\Afoo\Z",
        r"abc\s+foo",
        r"[\s,]foo",
        r"\D{3} foo",
        r"x{2}|\{,3\}",
    ],
)
def test_conversion_matches_like_regex_on_single_messages(pattern: str) -> None:
    """Differential: regex.search on the message == NPD (RE2, anchored at the end) on the same message."""
    exported = npd_pattern(pattern)
    assert re2_ok(exported), exported
    assert "(?P<" not in exported
    rx = regex.compile(pattern, regex.VERSION0)
    for line in LINES:
        assert npd_fires([exported], line) == bool(rx.search(line)), (pattern, exported, line)


@pytest.mark.parametrize(
    "pattern,why",
    [
        (r"SXid \d+, (?!Data \{)", "look-ahead"),
        (r"(?=foo)foo", "look-ahead"),
        (r"(?<=x)foo", "look-behind"),
        (r"(?<!x)foo", "look-behind"),
        (r"(a)\1", "back-reference"),
        (r"(?P<a>x)(?P=a)", "back-reference"),
        (r"a++b", "possessive"),
        (r"a{2,3}+", "possessive"),
        (r"(?>ab|a)c", "atomic"),
        (r"(?x) a b", "verbose"),
        (r"a{1,1001}", "1000"),
        (r"(a)?(?(1)b|c)", "conditional"),
        (r"\N{BULLET}", "named character"),
    ],
)
def test_what_re2_cannot_say_is_refused_with_the_reason(pattern: str, why: str) -> None:
    regex.compile(pattern, regex.VERSION0)  # a valid pattern of the pack's dialect
    with pytest.raises(Unexpressible, match=re.escape(why)):
        to_re2(pattern)


def test_top_level_alternation_is_anchored_on_every_branch() -> None:
    # NPD appends \z to the pattern as written: `foo|bar\z` would let `foo` match anywhere
    exported = npd_pattern("foo|bar")
    assert npd_fires([exported], "a foo b")
    assert npd_fires([exported], "x bar")
    wrapped, bare = NpdBuffer([exported]), NpdBuffer(["foo|bar"])
    assert wrapped.push("a foo b") == bare.push("a foo b") == [0]
    assert wrapped.push("zzz") == []
    assert bare.push("zzz") == [0]  # unwrapped, the old `foo` line fires again on every new message


def test_buffer_matches_only_to_the_end_of_the_newest_message() -> None:
    buf = NpdBuffer([npd_pattern("Xid")], size=3)
    assert buf.push("NVRM: Xid 79") == [0]
    assert buf.push("unrelated") == []  # an old line does not fire again


def test_all_rule_becomes_a_windowed_multi_line_pattern() -> None:
    pats = npd_all_patterns([r"NVRM: The NVIDIA GPU (?P<pci>\S+)\s*$", r"NVRM: fallen off the bus"], window=2)
    assert all(re2_ok(p + r"\z") for p in pats)
    near = "NVRM: The NVIDIA GPU 0000:18:00.0\n  NVRM: (PCI ID: 10de:2901) installed\nNVRM: fallen off the bus and"
    assert npd_fires(pats, near)
    assert npd_fires(pats, "NVRM: fallen off the bus\nNVRM: The NVIDIA GPU 0000:18:00.0")  # either order
    far = "NVRM: The NVIDIA GPU 0000:18:00.0\na\nb\nc\nNVRM: fallen off the bus"
    assert not npd_fires(pats, far)
    assert not npd_fires(pats, "NVRM: fallen off the bus")
    with pytest.raises(Unexpressible):
        npd_all_patterns(["a", "b", "c"], 2)


# --- the bundled pack -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pack():
    return load_pack()


@pytest.fixture(scope="module")
def exported(pack):
    return export_npd(pack)


def test_export_of_the_pack_meets_the_npd_contract(exported) -> None:
    assert set(exported.configs) == {"system-log-monitor-kmsg.json", "system-log-monitor-journald.json"}
    for config in exported.configs.values():
        assert_npd_log_config(json.loads(json.dumps(config)))
    kmsg = exported.configs["system-log-monitor-kmsg.json"]
    assert kmsg["plugin"] == "kmsg" and kmsg["logPath"] == "/dev/kmsg"
    assert any(c["type"] == "QwenTriageLogHardwareXidFatal" for c in kmsg["conditions"])
    # one monitor per condition: NPD lets each monitor re-report all of its conditions
    types = [c["type"] for cfg in exported.configs.values() for c in cfg["conditions"]]
    assert len(types) == len(set(types))


def test_no_kernel_or_journal_rule_is_dropped_silently(pack, exported) -> None:
    skipped = {(s.rule, s.plugin) for s in exported.skipped}
    for lr in pack.rules:
        for plugin in plugins_for(lr.rule):
            done = lr.rule.id in exported.exported[plugin]
            assert done != ((lr.rule.id, plugin) in skipped), f"{lr.rule.id} ({plugin})"
    assert all(s.why for s in exported.skipped)


def test_exported_patterns_still_keep_their_rules_examples(pack, exported) -> None:
    """Re-checked here, independently of the exporter: under RE2 and NPD's buffer."""
    by_suffix: dict[tuple[str, str], list[str]] = {}
    for config in exported.configs.values():
        for rule in config["rules"]:
            rule_id = rule["patternGeneratedMessageSuffix"].split()[1].rstrip(":")
            by_suffix.setdefault((config["plugin"], rule_id), []).append(rule["pattern"])
    assert by_suffix
    from qwen_triage.fleet.npd_export import table_variants

    # a table rule is exported row by row: each row with its own examples
    rules = {v.id: v for lr in pack.rules for v in table_variants(lr.rule)[0]}
    for (plugin, rule_id), patterns in by_suffix.items():
        rule = rules[rule_id]
        size = exported.configs[f"system-log-monitor-{plugin}.json"]["bufferSize"]
        for ex in rule.examples.match:
            assert npd_fires(patterns, ex, size), f"{rule_id}: {ex!r}"
        for ex in rule.examples.no_match:
            assert not npd_fires(patterns, ex, size), f"{rule_id}: {ex!r}"


def test_xid79_line_raises_the_kernel_condition(exported) -> None:
    rules = exported.configs["system-log-monitor-kmsg.json"]["rules"]
    line = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus."
    fired = [r for r in rules if npd_fires([r["pattern"]], line)]
    assert fired and {r["reason"] for r in fired} == {"HardwareXidFatal"}
    assert fired[0]["type"] == "permanent" and fired[0]["condition"] == "QwenTriageLogHardwareXidFatal"
    assert not any(npd_fires([r["pattern"]], "NVRM: loading NVIDIA UNIX x86_64 Kernel Module") for r in rules)


def test_per_pattern_differential_on_every_example_line(pack) -> None:
    """Each exported `any` pattern alone agrees with `regex` on each one-line example of its rule."""
    checked = 0
    for lr in pack.rules:
        rule = lr.rule
        if not plugins_for(rule) or rule.match.all:
            continue
        for source in rule.match.any:
            try:
                exported = npd_pattern(source)
            except Unexpressible:
                continue
            rx = regex.compile(source, regex.VERSION0)
            for ex in rule.examples.match + rule.examples.no_match:
                if "\n" not in ex:
                    assert npd_fires([exported], ex) == bool(rx.search(ex)), (rule.id, source, ex)
                    checked += 1
    assert checked > 50


# --- the command ----------------------------------------------------------------------------------------

SITE_RULES = """\
rules:
  - id: site.sxid-lookahead
    class: hardware.nvlink_error
    title: A look-ahead NPD cannot run
    severity: error
    sources: [kernel]
    match:
      any:
        - 'nvidia-nvswitch\\d+: SXid \\(PCI:[0-9a-f:.]+\\): (?P<sxid>\\d+), (?!Data \\{)'
    examples:
      match: ["nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 44"]
      no_match: ["nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Data {0x0}"]
  - id: site.disk-gone
    class: node.storage_error
    title: A site rule that exports
    severity: error
    sources: [kernel]
    match:
      any: ['(?P<dev>nvme\\d+n\\d+): I/O Cmd\\(0x[0-9a-f]+\\) @ LBA \\d+, \\d+ blocks, I/O Error']
    examples:
      match: ["[ 10.1] nvme0n1: I/O Cmd(0x2) @ LBA 16, 8 blocks, I/O Error (sct 0x2 / sc 0x81) DNR"]
      no_match: ["nvme0n1: p1 p2"]
"""


def run_export(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qwen_triage", "rules", "export", "--to", "npd", *args],
        capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})},
    )


def test_cli_reports_what_it_cannot_express_and_exports_the_rest(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "site.yaml").write_text(SITE_RULES)
    out = tmp_path / "out"
    proc = run_export("--rules", str(site), "--out", str(out), "--plugin", "kmsg")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"not exported: site\.sxid-lookahead \(kmsg\): .*look-ahead", proc.stderr), proc.stderr
    config = json.loads((out / "system-log-monitor-kmsg.json").read_text())
    assert_npd_log_config(config)
    text = json.dumps(config)
    assert "site.sxid-lookahead" not in text
    site_rules = [r for r in config["rules"] if "site.disk-gone" in r["patternGeneratedMessageSuffix"]]
    assert [(r["type"], r["condition"], r["reason"]) for r in site_rules] == [
        ("permanent", "QwenTriageLogNodeStorageError", "NodeStorageError")
    ]
    assert not (out / "system-log-monitor-journald.json").exists()
    strict = run_export("--rules", str(site), "--plugin", "kmsg", "--strict")
    assert strict.returncode == 1
    assert "site.sxid-lookahead" in strict.stderr
    assert json.loads(strict.stdout)["plugin"] == "kmsg"  # one config: printed as itself


def test_a_table_rule_exports_one_npd_rule_per_row(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from qwen_triage.fleet.npd_export import export_npd
    from tests.rulepack.test_rule_tables import TABLE_RULES

    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "t.yaml").write_text(TABLE_RULES.replace("OTHERWISE", "rule"))
    result = export_npd(load_pack([rules], bundled=False), plugins=["kmsg"])
    exported = [r for r in result.configs["system-log-monitor-kmsg.json"]["rules"] if "t.xid" in r["patternGeneratedMessageSuffix"]]
    assert [(r["reason"], r["type"]) for r in exported] == [("HardwareXidFatal", "permanent"), ("HardwareNvlinkError", "permanent")]
    fatal = re2.compile(exported[0]["pattern"])
    assert fatal.search("TESTXID Xid (0000:3b:00): 79, GPU has fallen off the bus")
    assert not fatal.search("TESTXID Xid (0000:3b:00): 74, link")  # another row's code
    assert [s.rule for s in result.skipped if s.rule == "t.xid"] == ["t.xid"]  # the codes no row lists, said on stderr


def test_a_table_rule_pattern_without_the_key_is_left_out_of_its_rows_and_said(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A table rule may also match a line that carries no code (kernel.rm-init-adapter-failed's 'rm_init_adapter
    failed, device minor number N'): no row can own it, so the row rules export only the keyed patterns and the
    rest is named on stderr rather than failing the whole export."""
    from qwen_triage.fleet.npd_export import export_npd
    from tests.rulepack.test_rule_tables import TABLE_RULES

    keyed = next(line for line in TABLE_RULES.splitlines() if "any: ['TESTXID Xid" in line)
    rules = tmp_path / "rules"
    rules.mkdir()
    both = keyed.replace("']", "', 'TESTXID GPU lost without a code']")
    (rules / "t.yaml").write_text(TABLE_RULES.replace("OTHERWISE", "rule").replace(keyed, both))
    result = export_npd(load_pack([rules], bundled=False), plugins=["kmsg"])
    exported = [r for r in result.configs["system-log-monitor-kmsg.json"]["rules"] if "t.xid" in r["patternGeneratedMessageSuffix"]]
    assert len(exported) == 2 and not any(re2.compile(r["pattern"]).search("TESTXID GPU lost without a code") for r in exported)
    assert [s.why for s in result.skipped if s.rule == "t.xid"] == [
        "codes no row of its table lists keep the rule's own class; RE2 cannot say 'none of these codes'; "
        "its patterns without the xid group are not exported"
    ]


TEXT_KEYED_TABLE = """rules:
  - id: t.status
    class: hardware.xid_fatal
    title: A driver status names the GPU's state
    severity: error
    sources: [kernel]
    match:
      any: ['TESTNV status \\[(?P<status>NV_ERR_[A-Z_]{3,40})\\]']
    extract: {status: str}
    explain: "status {status}"
    table:
      key: status
      source: https://github.com/NVIDIA/open-gpu-kernel-modules/blob/main/src/common/sdk/nvidia/inc/nvstatuscodes.h
      otherwise: ignore
      rows:
        - values: [NV_ERR_RESET_REQUIRED]
          class: hardware.xid_fatal
    examples:
      match: ['TESTNV status [NV_ERR_RESET_REQUIRED]']
      no_match: ['TESTNV status [NV_ERR_NOT_SUPPORTED]']
"""


def test_a_text_keyed_table_row_exports_the_logs_own_spelling(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Text values of a table compare case-folded (the row holds them folded): the exported RE2 pattern must still
    find the upper-case code the log prints, and still refuse a code no row lists."""
    from qwen_triage.fleet.npd_export import export_npd

    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "t.yaml").write_text(TEXT_KEYED_TABLE)
    result = export_npd(load_pack([rules], bundled=False), plugins=["kmsg"])
    exported = [r for r in result.configs["system-log-monitor-kmsg.json"]["rules"] if "t.status" in r["patternGeneratedMessageSuffix"]]
    assert len(exported) == 1, result.skipped
    row = re2.compile(exported[0]["pattern"])
    assert row.search("TESTNV status [NV_ERR_RESET_REQUIRED]")
    assert not row.search("TESTNV status [NV_ERR_NOT_SUPPORTED]")


def test_a_kernel_relay_rule_is_not_exported() -> None:
    """A relay names no failure of its own (EDAC's header before each decoded memory error, corrected ones too): an
    NPD rule reads one message, so a relay there would report every corrected error as the class it is filed under."""
    pack = load_pack()
    relays = [lr.rule for lr in pack.rules if lr.rule.relay and "kernel" in lr.rule.sources]
    assert relays, "the bundled pack has a kernel relay rule (node.edac-mce-memory-header-relay)"
    assert all(plugins_for(rule) == [] for rule in relays)
    exported = json.dumps(export_npd(pack, plugins=["kmsg"]).configs)
    assert not any(rule.id in exported for rule in relays)
    assert "node.fatal-hardware-error" in exported  # the failure's own rule still is
