"""Hardening (issue 10, items 13, 15, 19): rough edges a new user hits.

13: a rule added to the clone's `rules/` after `pip install .` was silently
ignored; `scan` now warns. 15: `rules list` in a pipe cut rule ids to the
terminal width. 19: the README did not say the first command exits 1 on
purpose, and pointed `eval` at a corpus a clone does not have.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from qwen_triage.rulepack.stray import stray_rule_files, stray_rules_warning
from qwen_triage.cli.main import cli
from qwen_triage.rulepack.pack import load_pack
from qwen_triage.rulepack.paths import bundled_rules_dir

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "fixtures" / "logs" / "examples" / "qwen32b-tp6-vllm.log"
NEW_RULE = "rules:\n  - id: mine.new-rule\n    class: process.segfault\n"


def test_item13_scan_warns_about_rule_files_it_does_not_load(tmp_path, monkeypatch) -> None:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "mine.yaml").write_text(NEW_RULE)
    (tmp_path / "rules" / "notes.yaml").write_text("just: data\n")  # no `rules:` key: not a rule file
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["scan", "--format", "json", str(LOG)])
    warnings = [ln for ln in result.stderr.splitlines() if "not in the loaded rule pack" in ln]
    assert len(warnings) == 1 and "rules/mine.yaml" in warnings[0] and "--rules rules/" in warnings[0]


def test_item13_no_warning_for_the_installed_copy_or_a_loaded_dir(tmp_path) -> None:
    pack = load_pack([])
    (tmp_path / "rules").mkdir()
    for f in sorted(bundled_rules_dir().glob("*.yaml"))[:3]:
        shutil.copy(f, tmp_path / "rules" / f.name)  # a clone with the same rules as the wheel
    assert stray_rule_files(pack, tmp_path) == []
    assert stray_rule_files(pack, ROOT) == []  # this checkout: its rules/ is the loaded pack
    (tmp_path / "rules" / "mine.yaml").write_text(NEW_RULE)
    assert [p.name for p in stray_rule_files(pack, tmp_path)] == ["mine.yaml"]
    assert stray_rules_warning(pack, tmp_path / "nowhere") is None


def test_item15_rules_list_in_a_pipe_prints_ids_whole() -> None:
    result = CliRunner().invoke(cli, ["rules", "list"], env={"COLUMNS": "40"})
    assert result.exit_code == 0
    out = result.stdout
    for lr in load_pack([]).rules:
        assert f" {lr.rule.id} " in out, lr.rule.id
    assert "…" not in out


def test_item19_readme_says_exit_1_on_purpose_and_evals_fixtures() -> None:
    readme = (ROOT / "README.md").read_text()
    head = readme.split("## ", 1)[0]
    assert "exits with status 1 on purpose" in head
    assert "qwen-triage eval fixtures/logs" in readme
    assert (ROOT / "fixtures" / "logs").is_dir()


def test_item19_the_first_command_exits_1() -> None:
    result = CliRunner().invoke(cli, ["scan", str(LOG)])
    assert result.exit_code == 1
