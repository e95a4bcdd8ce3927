"""Rule files in the working directory that the loaded pack does not hold.

A rule added to a clone's ``rules/`` is silently ignored after a plain ``pip
install .`` (the wheel carries its own copy); ``scan`` says so. Cheap on purpose:
it runs on every scan, so it reads bytes, never YAML.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qwen_triage.rulepack.pack import RulePack

_RULES_KEY = re.compile(rb"^rules\s*:", re.M)


def stray_rule_files(pack: RulePack, cwd: Path) -> list[Path]:
    """Rule files in ``cwd/rules`` (YAML with a top-level ``rules:`` key) the pack did not load.

    A file counts as loaded when the pack read it, or when the bundled rules hold
    a file of the same name with the same bytes (the wheel's copy of a clone).
    """
    from qwen_triage.rulepack.errors import RuleFileError, read_bounded
    from qwen_triage.rulepack.paths import bundled_rules_dir

    here = cwd / "rules"
    if not here.is_dir():
        return []
    try:
        bundled: Path | None = bundled_rules_dir()
    except FileNotFoundError:
        bundled = None
    if bundled is not None and here.resolve() == bundled.resolve():
        return []  # the pack's own folder (an editable install run in its clone): its every rule file was loaded
    loaded = {Path(path).resolve() for path in {lr.path for lr in pack.rules}}  # a file holds many rules
    out = []
    for f in sorted([*here.glob("*.yaml"), *here.glob("*.yml")]):
        try:
            if f.resolve() in loaded:
                continue
            data = read_bounded(str(f))
        except (OSError, RuleFileError):
            continue
        if not _RULES_KEY.search(data):
            continue
        twin = bundled / f.name if bundled is not None else None
        try:
            if twin is not None and twin.is_file() and read_bounded(str(twin)) == data:
                continue
        except RuleFileError:
            pass
        out.append(f)
    return out


def stray_rules_warning(pack: RulePack, cwd: Path) -> str | None:
    """One line for stderr when ``cwd/rules`` holds rule files this scan ignores."""
    stray = stray_rule_files(pack, cwd)
    if not stray:
        return None
    first = stray[0].relative_to(cwd).as_posix()
    more = f" and {len(stray) - 1} more" if len(stray) > 1 else ""
    return (f"qwen-triage: warning: {first}{more} in this directory is not in the loaded rule pack; "
            "pass `--rules rules/` (or install with `pip install -e .`) to use it")
