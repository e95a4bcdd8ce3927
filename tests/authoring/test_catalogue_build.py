"""Catalogue entries from source trees: what is kept, how it is typed and classed, how releases merge."""

from __future__ import annotations

from pathlib import Path

import regex

from qwen_triage.authoring.catalogue_build import merge_releases, tree_entries
from qwen_triage.authoring.coverage import Classifier
from qwen_triage.engine.scanner import load_compiled

PY = '''
import logging
logger = logging.getLogger(__name__)

class ParallelConfig:
    def verify(self, heads, tp, path):
        logger.info("checking %d heads", heads)
        logger.debug("debug noise %s", path)
        logger.warning("weights under %s are read twice", path)
        if heads % tp:
            raise ValueError(f"Total number of attention heads ({heads}) must be divisible by tensor parallel "
                             f"size ({tp}).")
'''
C = r'''
static int init(int rank, int i) {
  INFO(NCCL_INIT, "zorble transport selected for peer %d", i);
  WARN("Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx", rank, i, busId);
  return 0;
}
'''


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_entries_keep_failures_typed_and_classed(tmp_path: Path) -> None:
    root = tree(tmp_path / "prog", {"config/parallel.py": PY, "src/init.cc": C})
    entries = tree_entries([root], "prog", "1.0", Classifier(load_compiled((), "auto")), prefix="x/")
    by = {e.template: e for e in entries}
    assert set(by) == {
        "weights under {path} are read twice",
        "Total number of attention heads ({int}) must be divisible by tensor parallel size ({int}).",
        "Duplicate GPU detected : rank {int} and rank {int} both on CUDA device {hex}",
    }  # info and debug lines are no failure
    tp = by["Total number of attention heads ({int}) must be divisible by tensor parallel size ({int})."]
    assert (tp.kind, tp.exception, tp.level, tp.function) == ("raise", "ValueError", None, "verify")
    assert tp.file == "x/prog/config/parallel.py" and tp.releases == ["1.0"]
    assert tp.class_ is not None and tp.class_from == "rule"
    assert regex.search(tp.regex, "ValueError: Total number of attention heads (40) must be divisible by tensor "
                                  "parallel size (6).")
    warn = by["weights under {path} are read twice"]
    assert (warn.kind, warn.level, warn.class_) == ("log", "warning", None)
    dup = by["Duplicate GPU detected : rank {int} and rank {int} both on CUDA device {hex}"]
    assert (dup.kind, dup.level) == ("printf", "warning") and "Duplicate" in dup.words


def test_releases_merge_into_one_entry_per_template(tmp_path: Path) -> None:
    old = tree_entries([tree(tmp_path / "a" / "prog", {"config/parallel.py": PY})], "prog", "1.0")
    newer = PY.replace("are read twice", "are read two times")
    new = tree_entries([tree(tmp_path / "b" / "prog", {"config/parallel.py": newer})], "prog", "2.0")
    merged = {e.template: e.releases for e in merge_releases("prog", [("1.0", old), ("2.0", new)])}
    assert merged == {
        "weights under {path} are read twice": ["1.0"],
        "weights under {path} are read two times": ["2.0"],
        "Total number of attention heads ({int}) must be divisible by tensor parallel size ({int}).": ["1.0", "2.0"],
    }
