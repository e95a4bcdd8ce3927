"""The built-in check ids the package's code names, found by reading its source (no import, no run).

A check id is a string constant shaped like one (``preflight.<command>.<name>``,
``runner.<name>``, ``runner.preflight.<name>``); an f-string shaped like one
(``f"preflight.model.header-{d.kind}"``) stands for every declared id it matches.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "qwen_triage"
CHECK_ID = re.compile(r"^(preflight\.(doctor|model|plan)|runner|runner\.preflight)\.[a-z0-9][a-z0-9-]*$")
_PREFIX = re.compile(r"^(preflight|runner)\.")


@cache
def used_in(root: Path = PACKAGE) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(literal id -> places, f-string pattern -> places) over the ``.py`` files below ``root``."""
    literals: dict[str, list[str]] = {}
    patterns: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            where = f"{path.relative_to(root.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inner:
                if CHECK_ID.match(node.value):
                    literals.setdefault(node.value, []).append(where)
            elif isinstance(node, ast.JoinedStr):
                parts = [re.escape(v.value) if isinstance(v, ast.Constant) else "[a-z0-9-]+" for v in node.values]
                head = node.values[0]
                if isinstance(head, ast.Constant) and _PREFIX.match(str(head.value)) and len(node.values) > 1:
                    patterns.setdefault("^" + "".join(parts) + "$", []).append(where)
    return literals, patterns
