"""The bundled pack validated at build time (rulepack.prebuilt): the same pack as the YAML gives, used only
while it is that of the files as they are, and only when nobody else can have written it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from qwen_triage.rulepack.pack import bundled_files, load_pack, read_all
from qwen_triage.rulepack.paths import bundled_rules_dir
from qwen_triage.rulepack.prebuild import load_prebuilt
from qwen_triage.rulepack.prebuilt import PREBUILT_ENV
from tests.rulepack.test_rule_files import GOOD_RULE


def _same(a, b) -> None:  # type: ignore[no-untyped-def]
    assert a.rules == b.rules and a.classes == b.classes and a.files == b.files
    assert a.benign == b.benign and a.stages == b.stages and a.heartbeats == b.heartbeats


def _contents() -> dict[Path, bytes]:
    contents = read_all(bundled_files(bundled_rules_dir()))
    assert contents is not None
    return contents


def _retitled(artefact: Path, tmp_path: Path) -> tuple[Path, str]:
    """A copy of the session's artefact whose first rule says another title (its key unchanged)."""
    data = json.loads(artefact.read_bytes())
    rule = data["pack"]["rules"][0]["rule"]
    rule["title"] = "retitled in the artefact"
    out = tmp_path / "retitled.json"
    out.write_text(json.dumps(data))
    os.chmod(out, 0o644)
    return out, rule["id"]


def test_the_artefact_is_the_pack_the_yaml_gives(prebuilt_now: Path) -> None:
    parsed = load_pack(prebuilt=False)  # the YAML, parsed and validated now
    prebuilt = load_prebuilt(bundled_rules_dir(), _contents(), prebuilt_now)
    assert prebuilt is not None
    _same(prebuilt, parsed)
    _same(load_pack(), parsed)  # what a load takes from it


def test_a_load_takes_the_bundled_part_from_the_artefact_and_parses_the_rest(
    prebuilt_now: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    artefact, rule_id = _retitled(prebuilt_now, tmp_path)
    extra = tmp_path / "rules"
    extra.mkdir()
    (extra / "r.yaml").write_text(GOOD_RULE)
    monkeypatch.setenv(PREBUILT_ENV, str(artefact))
    pack = load_pack([extra], cache_dir=tmp_path / "cache")
    assert pack.rule(rule_id).rule.title == "retitled in the artefact"
    assert pack.rule("x.one") is not None and pack.rules[-1].path == str((extra / "r.yaml").resolve())
    monkeypatch.setenv(PREBUILT_ENV, "off")
    assert load_pack([extra]).rule(rule_id).rule.title != "retitled in the artefact"


def test_an_artefact_of_other_contents_is_not_used(prebuilt_now: Path) -> None:
    contents = _contents()
    assert load_prebuilt(bundled_rules_dir(), contents, prebuilt_now) is not None
    edited = next(p for p in contents if p.name not in ("classes.yaml", "stages.yaml", "benign.yaml"))
    contents[edited] += b"\n# edited after the build\n"
    assert load_prebuilt(bundled_rules_dir(), contents, prebuilt_now) is None


def test_an_artefact_others_could_write_or_a_link_is_not_trusted(prebuilt_now: Path, tmp_path: Path) -> None:
    artefact, _ = _retitled(prebuilt_now, tmp_path)
    assert load_prebuilt(bundled_rules_dir(), _contents(), artefact) is not None
    link = tmp_path / "link.json"
    link.symlink_to(artefact)
    assert load_prebuilt(bundled_rules_dir(), _contents(), link) is None
    os.chmod(artefact, 0o666)
    assert load_prebuilt(bundled_rules_dir(), _contents(), artefact) is None


def test_a_broken_artefact_is_a_miss(prebuilt_now: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_bytes(prebuilt_now.read_bytes()[:1000])
    os.chmod(broken, 0o644)
    assert load_prebuilt(bundled_rules_dir(), _contents(), broken) is None


def test_the_wheel_build_hook_writes_the_artefact_where_the_package_reads_it() -> None:
    from qwen_triage.rulepack.prebuilt import ARTEFACT
    from tests.conftest import ROOT

    assert f'ARTEFACT = "{ARTEFACT.relative_to(ROOT).as_posix()}"' in (ROOT / "hatch_build.py").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert "[tool.hatch.build.targets.wheel.hooks.custom]" in pyproject
    assert ARTEFACT.relative_to(ROOT).as_posix() in (ROOT / ".gitignore").read_text()  # generated, never committed
