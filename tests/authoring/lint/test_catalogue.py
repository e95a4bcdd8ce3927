"""The checks of the files every pack shares (classes.yaml, fix-defaults.yaml, checks.yaml), on a copy of the bundled
catalogue broken one way: the problem names its check, and `--ignore` silences it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from qwen_triage.authoring.lint.registry import CHECKS
from qwen_triage.authoring.lint.run import lint_paths
from qwen_triage.rulepack.paths import bundled_rules_dir
from tests.authoring.lint.rulefiles import ids, rule, rules_dir

LEVEL = {c.id: c.level for c in CHECKS}
SHARED = ("classes.yaml", "fix-defaults.yaml", "checks.yaml")
GGUF_UNSUPPORTED_EXPLAINS = "explains: [process.segfault, server.startup_timeout]\n"


def _break(name: str, text: str) -> tuple[str, str]:
    if name == "catalogue-invalid":
        return "classes.yaml", "classes:\n  - id: 1\n"
    if name == "catalogue-cycle":  # model.gguf_corrupt already explains model.gguf_unsupported
        assert text.count(GGUF_UNSUPPORTED_EXPLAINS) >= 1
        cyclic = "explains: [process.segfault, server.startup_timeout, model.gguf_corrupt]\n"
        return "classes.yaml", text.replace(GGUF_UNSUPPORTED_EXPLAINS, cyclic, 1)
    if name == "checks-invalid":
        assert "    class: runtime.no_gpu_visible\n" in text
        return "checks.yaml", text.replace("    class: runtime.no_gpu_visible\n", "    class: nosuch.class\n", 1)
    return "fix-defaults.yaml", text.replace("classes: [memory.kv_cache_insufficient]", "classes: [nosuch.class]")


@pytest.mark.parametrize("check", ["catalogue-invalid", "catalogue-cycle", "fix-defaults-invalid", "checks-invalid"])
def test_a_broken_catalogue_names_the_check(tmp_path: Path, check: str) -> None:
    base = tmp_path / "base"
    base.mkdir()
    for name in SHARED:
        shutil.copy(bundled_rules_dir() / name, base / name)
    source = {"fix-defaults-invalid": "fix-defaults.yaml", "checks-invalid": "checks.yaml"}.get(check, "classes.yaml")
    name, text = _break(check, (bundled_rules_dir() / source).read_text())
    (base / name).write_text(text)
    contributed = rules_dir(tmp_path, rule())
    problems = lint_paths([contributed], base=base)
    assert ids(problems) == {check}, [str(p) for p in problems]
    assert {p.level for p in problems} == {LEVEL[check]} and all(p.path.startswith(str(base)) for p in problems)
    assert check not in ids(lint_paths([contributed], base=base, ignore=[check]))


def test_the_copied_catalogue_is_clean(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    for name in SHARED:
        shutil.copy(bundled_rules_dir() / name, base / name)
    assert lint_paths([rules_dir(tmp_path, rule())], base=base) == []
