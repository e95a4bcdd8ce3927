"""Built-in checks are declared once, in rules/checks.yaml, and code and declarations stay in step."""

from __future__ import annotations

import io
import json
import re

import pytest

from qwen_triage.engine.check_finding import finding
from qwen_triage.preflight.findings import ev
from qwen_triage.rulepack.checks import CHECKS_FILE, bundled_checks, load_checks, problems
from qwen_triage.rulepack.errors import RuleFileError
from qwen_triage.rulepack.paths import bundled_rules_dir
from qwen_triage.rulepack.severity import Severity
from tests.rulepack.check_ids import used_in


@pytest.fixture(scope="module")
def classes():
    from qwen_triage.rulepack.paths import CLASSES_FILE
    from qwen_triage.rulepack.pack import load_classes

    return load_classes(bundled_rules_dir() / CLASSES_FILE)


def test_every_check_id_in_the_code_is_declared():
    declared = set(bundled_checks())
    literals, patterns = used_in()
    assert len(literals) > 50
    undeclared = {i: where for i, where in literals.items() if i not in declared}
    assert not undeclared, undeclared
    for pattern, where in patterns.items():
        assert any(re.match(pattern, i) for i in declared), (pattern, where)


def test_every_declared_check_is_used_by_the_code():
    literals, patterns = used_in()
    unused = [
        i for i in bundled_checks() if i not in literals and not any(re.match(p, i) for p in patterns)
    ]
    assert not unused, unused


def test_the_bundled_declarations_have_no_problem(classes):
    assert problems() == []
    checks = bundled_checks()
    assert {c for spec in checks.values() for c in spec.classes} <= set(classes)
    assert bundled_checks() is checks  # read once per process


def _write(tmp_path, body: str):
    path = tmp_path / CHECKS_FILE
    path.write_text("checks:\n" + body)
    return path


GOOD = """  - id: preflight.doctor.one
    class: runtime.no_gpu_visible
    title: one
    severity: error
"""


def test_an_unknown_class_is_refused_by_name_and_place(tmp_path, classes):
    path = _write(tmp_path, GOOD + GOOD.replace("one", "two").replace("runtime.no_gpu_visible", "runtime.nope"))
    with pytest.raises(RuleFileError) as err:
        load_checks(path, set(classes))
    assert "unknown class 'runtime.nope'" in err.value.reason and "preflight.doctor.two" in err.value.reason
    assert err.value.line == 7


def test_an_unknown_variant_class_is_refused(tmp_path, classes):
    body = GOOD + "    variants:\n      odd: {class: model.nope}\n"
    found = problems(_write(tmp_path, body), set(classes))
    wanted = "check 'preflight.doctor.one' names unknown class 'model.nope' (see classes.yaml)"
    assert [p.reason for p in found] == [wanted]


def test_a_duplicate_id_is_refused_at_the_second(tmp_path, classes):
    with pytest.raises(RuleFileError) as err:
        load_checks(_write(tmp_path, GOOD + GOOD), set(classes))
    assert err.value.reason == "duplicate check id 'preflight.doctor.one'"
    assert err.value.line == 6


@pytest.mark.parametrize(
    ("old", "new", "wanted"),
    [
        ("    severity: error\n", "    severity: fatal\n", "severity"),
        ("  - id: preflight.doctor.one\n", "  - id: doctor.one\n", "id"),
        ("    severity: error\n", "    severity: error\n    colour: red\n", "colour"),
    ],
)
def test_a_bad_field_is_refused_naming_it(tmp_path, classes, old, new, wanted):
    found = problems(_write(tmp_path, GOOD.replace(old, new)), set(classes))
    assert found and found[0].reason.split(":")[0].endswith(wanted), [p.reason for p in found]


def test_finding_takes_class_title_severity_and_fix_from_the_declaration():
    f = finding("preflight.doctor.cuda-visible-empty", "CUDA sees none.", evidence=[ev("environment", "x")])
    spec = bundled_checks()["preflight.doctor.cuda-visible-empty"]
    assert (f.class_id, f.title, f.severity) == (spec.class_, spec.title, spec.severity)
    assert [s.step for s in f.fix] == [s.step for s in spec.fix]
    assert f.fix[0].action == spec.fix[0].action.model_dump(mode="json")
    assert f.fix[0].action["name"] == "CUDA_VISIBLE_DEVICES"
    # a fix the check gives (naming what it found) replaces the declared one
    assert finding("preflight.doctor.cuda-visible-empty", "s", fix=[]).fix == []


def test_a_variant_changes_only_what_it_declares():
    own = finding("preflight.model.sha256-mismatch", "s")
    gguf = finding("preflight.model.sha256-mismatch", "s", variant="gguf")
    assert (own.class_id, gguf.class_id) == ("model.shard_corrupt", "model.gguf_corrupt")
    assert own.title == gguf.title and own.severity == gguf.severity
    assert finding("preflight.doctor.shm-small", "s", variant="one-gpu").severity is Severity.warning


def test_a_title_names_facts():
    f = finding("preflight.plan.tp-heads", "s", facts={"tp": 3, "pp": 2})
    assert f.title == "the requested layout (TP 3, PP 2) cannot work"


def test_an_undeclared_check_or_variant_is_an_error():
    with pytest.raises(KeyError, match="not declared"):
        finding("preflight.doctor.made-up", "s")
    with pytest.raises(KeyError, match="no variant 'loud'"):
        finding("preflight.doctor.shm-small", "s", variant="loud")


def test_the_checks_file_is_not_read_as_a_rule_file():
    from qwen_triage.rulepack.pack import rule_files

    assert bundled_rules_dir() / CHECKS_FILE not in rule_files(bundled_rules_dir())


def test_rules_list_shows_the_checks_in_every_format():
    """`rules list` (text, JSON, the docs' Markdown) lists each check under its classes, marked as a check."""
    from rich.console import Console

    from qwen_triage.authoring.catalog import catalog_json, catalog_markdown, print_catalog
    from qwen_triage.rulepack.pack import load_pack

    pack = load_pack([])
    checks = bundled_checks()
    entries = [r for c in json.loads(catalog_json(pack))["classes"] for r in c["rules"]]
    listed = {r["id"]: r for r in entries if r["kind"] == "check"}
    assert set(listed) == set(checks)
    assert {r["kind"] for r in entries} == {"rule", "check"}
    shm = listed["preflight.doctor.shm-small"]
    assert (shm["severity"], shm["severities"], shm["sources"]) == ("error", ["error", "warning"], ["doctor"])
    # a check that files under two classes (a variant's) is listed under both
    under = [c["id"] for c in json.loads(catalog_json(pack))["classes"]
             for r in c["rules"] if r["id"] == "preflight.model.sha256-mismatch"]
    assert sorted(under) == ["model.gguf_corrupt", "model.shard_corrupt"]

    page = catalog_markdown(pack)
    assert f"{len(checks)} built-in checks" in page
    assert "| `runner.preflight.port-in-use` | The server's port is already taken | error | `run` |" in page

    out = io.StringIO()
    print_catalog(pack, Console(file=out, highlight=False, force_terminal=False))
    rows = [line.split() for line in out.getvalue().splitlines()]
    assert ["server.port_in_use", "check", "runner.preflight.port-in-use", "error", "run"] in [r[:5] for r in rows]
