"""Where the rules live: the bundled ones inside the installed package (or beside it in a source
checkout), and the extra rule directories."""

from __future__ import annotations

import os
from pathlib import Path

CLASSES_FILE = "classes.yaml"
CATALOGUE_DIR = "catalogue"  # generated data (the message catalogue), not rules: never loaded as rule files
CATALOGUE_MAP_FILE = "catalogue-map.yaml"  # the catalogue's module families (rulepack.catalogue_map)
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


RULES_ENV = "QWEN_TRIAGE_RULES"


def extra_rule_dirs(cli_dirs: tuple[str, ...] | list[str] = ()) -> list[Path]:
    """The rule directories beside the bundled ones: $QWEN_TRIAGE_RULES's, then the command line's. Here, not
    in rulepack.pack, so a check cut by its deadline hands its load over without importing the loader."""
    dirs = [Path(d) for d in os.environ.get(RULES_ENV, "").split(os.pathsep) if d.strip()]
    dirs += [Path(d) for d in cli_dirs]
    return dirs
