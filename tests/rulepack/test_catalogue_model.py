"""The catalogue's data model and loader: lazy, strict about its manifest, tolerant of a bad line."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_triage.rulepack.catalogue import Catalogue, TemplateEntry, write_program
from qwen_triage.rulepack.errors import RuleFileError
from qwen_triage.rulepack.pack import rule_files
from qwen_triage.rulepack.paths import bundled_rules_dir

MANIFEST = """\
builder: scripts/catalogue/build.py 1
built: '2026-12-02'
programs:
  demo:
    display: Demo Server
    releases:
      - {version: '1.0', source: 'pypi:demo==1.0 (wheel)', sha256: abc, templates: 2}
      - {version: '2.0', source: 'github:org/demo@0123abc', commit: 0123abc, templates: 1}
    templates: 2
"""


def entry(**kw: object) -> TemplateEntry:
    base: dict[str, object] = dict(program="demo", releases=["1.0"], file="demo/config.py", function="check",
                                   kind="raise", exception="ValueError", template="tp size {int} too large",
                                   regex=r"tp\s+size\s+(?:-?\d+)\s+too\s+large", words=["size", "too", "large"])
    base.update(kw)
    return TemplateEntry.model_validate(base)


def make(tmp_path: Path, entries: list[TemplateEntry], manifest: str = MANIFEST) -> Path:
    d = tmp_path / "catalogue"
    d.mkdir()
    (d / "manifest.yaml").write_text(manifest)
    write_program(d / "demo.jsonl.gz", entries)
    return tmp_path


def test_round_trip_keeps_every_field_and_the_class_alias(tmp_path: Path) -> None:
    a = entry(**{"class": "config.bad_argument", "class_from": "rule"})
    b = entry(kind="log", level="warning", exception=None, template="slow {path}", regex=r"slow\s+(?:\S+)",
              words=["slow"], releases=["1.0", "2.0"], function=None)
    cat = Catalogue.load(make(tmp_path, [a, b]))
    got = sorted(cat.entries("demo"), key=lambda e: e.template)
    assert got == sorted([a, b], key=lambda e: e.template)
    assert got[1].class_ == "config.bad_argument" and got[1].dump()["class"] == "config.bad_argument"
    assert "class_" not in got[1].dump() and "function" not in got[0].dump()  # None left out of the file


def test_programs_come_from_the_manifest(tmp_path: Path) -> None:
    progs = Catalogue.load(make(tmp_path, [entry()])).programs()
    assert list(progs) == ["demo"]
    assert [r.version for r in progs["demo"].releases] == ["1.0", "2.0"]
    assert progs["demo"].releases[1].commit == "0123abc" and progs["demo"].display == "Demo Server"


def test_nothing_is_read_until_asked(tmp_path: Path) -> None:
    root = make(tmp_path, [entry()])
    (root / "catalogue" / "manifest.yaml").write_text("programs: [not, a, map]\n")
    cat = Catalogue.load(root)  # a broken manifest is only found when it is read
    with pytest.raises(RuleFileError):
        cat.programs()


def test_an_absent_catalogue_is_empty(tmp_path: Path) -> None:
    cat = Catalogue.load(tmp_path)
    assert cat.programs() == {} and list(cat.entries()) == []


def test_a_bad_line_is_skipped_and_counted(tmp_path: Path) -> None:
    root = make(tmp_path, [entry()])
    good = json.dumps(entry(template="other {int}", words=["other"]).dump())
    with gzip.open(root / "catalogue" / "demo.jsonl.gz", "wt") as f:
        f.write('{"program": "demo", "kind": "nonsense"}\n' + "[1, 2\n" + "\n" + good + "\n")
    cat = Catalogue.load(root)
    assert [e.template for e in cat.entries()] == ["other {int}"]
    assert cat.skipped == 2


def test_a_program_key_cannot_name_a_path(tmp_path: Path) -> None:
    root = make(tmp_path, [entry()], MANIFEST.replace("  demo:", "  ../../etc/x:"))
    with pytest.raises(RuleFileError, match="plain name"):
        Catalogue.load(root).programs()


def test_unknown_program_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(KeyError):
        list(Catalogue.load(make(tmp_path, [entry()])).entries("nope"))


def test_write_is_reproducible(tmp_path: Path) -> None:
    es = [entry(template=f"t{i} {{int}}", words=[f"word{i}"]) for i in range(5)]
    write_program(tmp_path / "a.gz", es)
    write_program(tmp_path / "b.gz", list(reversed(es)))
    assert (tmp_path / "a.gz").read_bytes() == (tmp_path / "b.gz").read_bytes()


def test_catalogue_files_are_not_rule_files(tmp_path: Path) -> None:
    root = make(tmp_path, [entry()])
    (root / "one.yaml").write_text("rules: []\n")
    assert rule_files(root) == [root / "one.yaml"]


def test_the_bundled_catalogue_loads() -> None:
    cat = Catalogue.load(bundled_rules_dir())
    programs = cat.programs()
    assert programs, "rules/catalogue/manifest.yaml is missing"
    for key, info in programs.items():
        assert info.releases, key
        first = next(cat.entries(key), None)
        assert first is not None and first.program == key and set(first.releases) <= {r.version for r in info.releases}
    assert cat.skipped == 0


def test_nothing_imports_the_catalogue_at_start_up() -> None:
    code = ("import sys, qwen_triage.cli.main, qwen_triage.engine.scanner, qwen_triage.rulepack.pack; "
            "print('qwen_triage.rulepack.catalogue' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
