"""rules/fix-defaults.yaml: the runner's per-class defaults as data, schema-checked and linted."""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_triage.authoring.lint.catalogue import lint_fix_defaults
from qwen_triage.report.model import Diagnosis, validate
from qwen_triage.rulepack.fix_defaults import FIX_DEFAULTS_FILE, bundled_fix_defaults, load_fix_defaults
from qwen_triage.rulepack.paths import bundled_rules_dir
from qwen_triage.rulepack.pack import load_classes
from qwen_triage.rulepack.errors import RuleFileError
from qwen_triage.runner.fixplan import class_defaults
from qwen_triage.runner.vllm.argv import parse_vllm_argv

GOOD = """\
values:
  port: [fact.port, launch.port]
defaults:
  - classes: [server.port_in_use]
    steps:
      - step: see who holds port {port}
        action: {type: check_port, port: '{port}'}
"""


@pytest.fixture(scope="module")
def classes():
    return load_classes(bundled_rules_dir() / "classes.yaml")


def diagnosis(class_id: str, fix: list | None = None, facts: dict | None = None) -> Diagnosis:
    return validate(Diagnosis, {
        "class": class_id, "rule": "test.rule", "title": "test", "severity": "error", "summary": "",
        "facts": facts or {}, "evidence": [], "count": 1, "fix": fix or [],
    })


def test_bundled_file_is_valid_and_names_known_classes(classes):
    loaded = load_fix_defaults(bundled_rules_dir() / FIX_DEFAULTS_FILE, set(classes))
    assert loaded == bundled_fix_defaults()
    assert lint_fix_defaults(bundled_rules_dir() / FIX_DEFAULTS_FILE, classes) == []
    assert loaded.steps_for("server.port_in_use")


@pytest.mark.parametrize(
    ("text", "line", "col", "reason"),
    [
        (GOOD.replace("[server.port_in_use]", "[server.nope]"), 4, 15, "unknown class 'server.nope'"),
        (GOOD.replace("type: check_port", "type: run_shell"), 7, 17, "run_shell"),
        (GOOD.replace("port: '{port}'}", "port: '{port}', safety: safe}"), 7, 60, "safety"),
        (GOOD.replace("    steps:", "    colour: red\n    steps:"), 5, 13, "colour"),
        (GOOD.replace("holds port {port}", "holds port {pid}"), 6, 9, "undeclared value {pid}"),
        (GOOD.replace("fact.port, launch.port", "fact.port, env.PORT"), 2, 3, "unknown source 'env.PORT'"),
        (GOOD + GOOD[GOOD.index("  - classes"):], 8, 15, "has defaults twice"),
    ],
    ids=["class", "action", "safety-is-fixed", "unknown-key", "value", "source", "twice"],
)
def test_errors_have_positions(tmp_path: Path, classes, text, line, col, reason):
    path = tmp_path / FIX_DEFAULTS_FILE
    path.write_text(text)
    with pytest.raises(RuleFileError) as info:
        load_fix_defaults(path, set(classes))
    assert (info.value.line, info.value.column) == (line, col), str(info.value)
    assert reason in info.value.reason
    problems = lint_fix_defaults(path, classes)
    assert [(p.line, p.column, p.level) for p in problems] == [(line, col, "error")]


def test_defaults_fill_values_and_skip_what_the_rule_has():
    launch = parse_vllm_argv(["vllm", "serve", "/models/m", "--port", "8123"])
    port = class_defaults(diagnosis("server.port_in_use"), launch)
    assert [(s.step, s.action) for s in port] == [
        ("see who holds port 8123", {"type": "check_port", "port": "8123", "safety": "safe"}),
        ("stop the process on port 8123, or give the server (and its clients) another --port",
         {"type": "free_port", "port": "8123", "safety": "caution"}),
    ]
    # the rule already checks the port: only the other step is added
    has = diagnosis("server.port_in_use", [{"step": "look", "action": {"type": "check_port"}}], {"port": 9000})
    assert [(s.action["type"], s.action["port"]) for s in class_defaults(has, launch)] == [("free_port", "9000")]
    # a whole-field value that is unknown is null; a `when` value that is unknown drops the step
    kv = class_defaults(diagnosis("memory.kv_cache_insufficient"), launch)
    assert kv[0].action == {"type": "lower_max_model_len", "to": None, "safety": "safe"}
    kv = class_defaults(diagnosis("memory.kv_cache_insufficient", facts={"kv_tokens": 4096}), launch)
    assert kv[0].action["to"] == "4096"
    assert class_defaults(diagnosis("hardware.xid_fatal"), launch) == []
    xid = class_defaults(diagnosis("hardware.xid_fatal", facts={"pci": "0000:89:00"}), launch)
    assert xid[0].step == "leave the GPU at 0000:89:00 out" and xid[0].action["gpu"] == "0000:89:00"
    shards = class_defaults(diagnosis("model.shard_missing"), launch)
    assert [(s.action["type"], s.action["safety"]) for s in shards] == [("verify_file", "safe"), ("redownload", "destructive")]
    assert class_defaults(diagnosis("process.segfault"), launch) == []
