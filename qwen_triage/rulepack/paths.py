"""Where the bundled rules live: inside the installed package, or beside it in a source checkout."""

from __future__ import annotations

from pathlib import Path

CLASSES_FILE = "classes.yaml"
CATALOGUE_DIR = "catalogue"  # generated data (the message catalogue), not rules: never loaded as rule files


def bundled_rules_dir() -> Path:
    """`rules/` inside the installed package, or beside it in a source checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "rules", package.parent / "rules"):
        if (candidate / CLASSES_FILE).is_file():
            return candidate
    raise FileNotFoundError("the bundled rules/ directory is missing from this installation")
