"""rules/classes.yaml is the taxonomy, machine-readable: same ids, titles and fixes; no explains cycle."""

from __future__ import annotations

import re

import pytest

from qwen_triage.rulepack.paths import bundled_rules_dir
from qwen_triage.rulepack.pack import load_classes
from tests.conftest import ROOT

TAXONOMY = ROOT.parent / "shared" / "taxonomy.md"


def taxonomy_rows() -> dict[str, tuple[str, str]]:
    rows = {}
    for line in TAXONOMY.read_text().splitlines():
        m = re.match(r"\| `([a-z0-9_.]+)` \| (.*?) \| (.*?) \| (.*?) \|\s*$", line)
        if m:
            rows[m[1]] = (m[2], m[4])
    return rows


@pytest.mark.skipif(not TAXONOMY.exists(), reason="../shared/taxonomy.md is not beside this checkout")
def test_classes_match_taxonomy() -> None:
    classes = load_classes(bundled_rules_dir() / "classes.yaml")
    rows = taxonomy_rows()
    assert set(classes) == set(rows)
    for cid, (title, fix) in rows.items():
        assert classes[cid].title == title, cid
        assert classes[cid].fix == fix, cid


def test_explains_has_no_cycle_and_names_known_classes() -> None:
    from qwen_triage.authoring.lint.context import class_cycles as _class_cycles

    classes = load_classes(bundled_rules_dir() / "classes.yaml")
    assert _class_cycles(classes) == []
    # the cases the product promises
    assert "process.segfault" in classes["model.gguf_corrupt"].explains
    for cause in ("memory.gpu_oom", "hardware.xid_fatal", "nccl.shm_too_small"):
        assert "nccl.timeout" in classes[cause].explains
