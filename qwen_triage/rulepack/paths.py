"""Where the bundled rules live: inside the installed package, or beside it in a source checkout."""

from __future__ import annotations

from pathlib import Path

CLASSES_FILE = "classes.yaml"
CATALOGUE_DIR = "catalogue"  # generated data (the message catalogue), not rules: never loaded as rule files
CODES_DIR = "codes"  # the code tables (rulepack.codes); their bytes key the pack cache, parsed only on a miss


def code_files(rules_dir: Path) -> list[Path]:
    """The table files of a rules directory (``codes/*.yaml``), sorted; none when it has no ``codes/``.

    Here, not in rulepack.codes: a warm load keys its cache on these files without importing
    the tables' schema (pydantic), which a scan of a small log does not otherwise need."""
    d = rules_dir / CODES_DIR
    return sorted(p for p in d.glob("*.y*ml") if p.suffix in (".yaml", ".yml")) if d.is_dir() else []


def bundled_rules_dir() -> Path:
    """`rules/` inside the installed package, or beside it in a source checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "rules", package.parent / "rules"):
        if (candidate / CLASSES_FILE).is_file():
            return candidate
    raise FileNotFoundError("the bundled rules/ directory is missing from this installation")
