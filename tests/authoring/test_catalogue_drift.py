"""`rules coverage --drift`: a release that rewords a message a rule keys on shows up here, not in a report.

The committed catalogue holds each program at two pinned releases; every rule of the pack that matched
the old release's wording and matches nothing the new release prints must be reviewed in
rules/catalogue/drift-reviewed.yaml (the message is gone from the program, the rule stays for older
releases), or widened to the new wording. No network: the catalogue data is in the repository.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_triage.authoring.drift import RuleMatcher, catalogue_pair, compare, tree_pair
from qwen_triage.engine.scanner import load_compiled
from qwen_triage.rulepack.catalogue import Catalogue
from qwen_triage.rulepack.paths import CATALOGUE_DIR, bundled_rules_dir
from qwen_triage.rulepack.yamlload import load_yaml
from tests.conftest import ROOT

REVIEWED = bundled_rules_dir() / CATALOGUE_DIR / "drift-reviewed.yaml"


@pytest.fixture(scope="module")
def matcher() -> RuleMatcher:
    return RuleMatcher(load_compiled((), "auto"))


def reviewed() -> dict[str, dict[str, str]]:
    data = load_yaml(REVIEWED).data or {}
    assert isinstance(data, dict)
    return {program: dict(rules or {}) for program, rules in data.items()}


def test_no_rule_lost_its_template_between_the_pinned_releases(matcher: RuleMatcher) -> None:
    catalogue = Catalogue.load(bundled_rules_dir())
    known = reviewed()
    lost: dict[tuple[str, str], str] = {}
    for program, info in catalogue.programs().items():
        assert len(info.releases) >= 2, f"{program}: one release pinned; drift needs two"
        drift = compare(program, *catalogue_pair(catalogue, program), matcher)
        for item in drift.lost:
            now = f"; now perhaps: {item.rewording.template!r}" if item.rewording else ""
            lost[(program, item.rule)] = f"{drift.old} -> {drift.new}: was {item.old[0].template!r}{now}"
    unreviewed = [f"{p} {r}: {why}" for (p, r), why in sorted(lost.items()) if r not in known.get(p, {})]
    assert unreviewed == [], "rules that no longer match what the newest release prints (widen them, or review)"
    stale = [f"{p} {r}" for p, rules in known.items() for r in rules if (p, r) not in lost]
    assert stale == [], "reviewed in drift-reviewed.yaml but no longer lost: remove them"
    assert all(reason.strip() for rules in known.values() for reason in rules.values())


def entries_of(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


OLD = {"parallel.py": (
    "def check(heads, tp):\n"
    "    raise ValueError(f'Total number of attention heads ({heads}) must be divisible by tensor parallel size "
    "({tp}).')\n"
    "def other():\n"
    "    raise RuntimeError('the frobnicator is gone')\n")}
NEW = {"parallel.py": (
    "def check(heads, tp):\n"
    "    raise ValueError(f'Attention heads ({heads}) cannot be split over tensor parallel size ({tp}).')\n"
    "def other():\n"
    "    raise RuntimeError('the frobnicator is gone')\n")}


def test_a_reworded_message_leaves_its_rule_behind(tmp_path: Path, matcher: RuleMatcher) -> None:
    old = entries_of(tmp_path / "prog-1", OLD)
    new = entries_of(tmp_path / "prog-2", NEW)
    drift = compare("prog", *tree_pair(old, new), matcher)
    assert drift.kept == 1 and len(drift.removed) == 1 and len(drift.added) == 1
    # every rule of the heads family that read the old wording (vLLM's own, and any library-neutral one) is lost
    assert "vllm.tp-heads-indivisible" in {lost.rule for lost in drift.lost}
    for lost in drift.lost:
        assert lost.rewording is not None
        assert lost.rewording.template.startswith("Attention heads ({int}) cannot be split")
    same = compare("prog", *tree_pair(old, old), matcher)
    assert same.lost == [] and same.removed == [] and same.kept == 2


def test_the_command_on_two_trees_and_on_catalogue_releases(tmp_path: Path) -> None:
    old = entries_of(tmp_path / "prog-1", OLD)
    new = entries_of(tmp_path / "prog-2", NEW)
    run = subprocess.run([sys.executable, "-m", "qwen_triage", "rules", "coverage", "--drift", str(old), str(new),
                          "--format", "json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 1, run.stderr
    doc = json.loads(run.stdout)
    assert "vllm.tp-heads-indivisible" in {x["rule"] for x in doc["lost"]}
    assert all(x["rewording"]["template"].startswith("Attention heads") for x in doc["lost"])
    program = next(iter(Catalogue.load(bundled_rules_dir()).programs()))
    run = subprocess.run([sys.executable, "-m", "qwen_triage", "rules", "coverage", "--drift", f"{program}@",
                          f"{program}@", "--limit", "2"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode in (0, 1) and run.stdout.startswith(f"{program} "), run.stderr
    bad = subprocess.run([sys.executable, "-m", "qwen_triage", "rules", "coverage", "--drift", f"{program}@0.0.0-no",
                          f"{program}@"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert bad.returncode == 2 and "no release" in bad.stderr
