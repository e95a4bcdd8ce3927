"""One exit-status module: every status a command ends with is named in qwen_triage/exits.py, and only there.

Five modules used to write their own (runner/stops, cli/fleet, cli/entry's 130, `128 + N` in three
places); a status changed in one of them and not the others would make commands disagree.
"""

from __future__ import annotations

import ast

from qwen_triage import exits
from tests.import_graph import PACKAGE


def _offences(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            if any(n.startswith("EXIT_") for n in names):
                found.append(f"{node.lineno}: defines {names}")
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) and any(
                isinstance(side, ast.Constant) and side.value == 128 for side in (node.left, node.right)):
            found.append(f"{node.lineno}: 128 +/- N")
        if isinstance(node, ast.Call) and (getattr(node.func, "attr", None) == "exit"
                                           or getattr(node.func, "id", None) == "SystemExit") and any(
                isinstance(a, ast.Constant) and isinstance(a.value, int) and a.value != 0 for a in node.args):
            found.append(f"{node.lineno}: exits with a number")
    return found


def test_exit_statuses_are_defined_in_exits_only() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "exits.py" and path.parent == PACKAGE:
            continue
        found += [f"{path.relative_to(PACKAGE.parent)}:{o}" for o in _offences(ast.parse(path.read_text()))]
    assert found == []


def test_the_statuses_keep_their_numbers() -> None:
    assert (exits.EXIT_CLEAN, exits.EXIT_FOUND, exits.EXIT_ERROR) == (0, 1, 2)
    assert (exits.EXIT_READY, exits.EXIT_GAVE_UP, exits.EXIT_USAGE, exits.EXIT_MANUAL) == (0, 1, 2, 3)
    assert (exits.EXIT_OK, exits.EXIT_PROBLEM, exits.EXIT_UNKNOWN) == (0, 1, 2)
    assert exits.EXIT_INTERRUPTED == exits.killed_by(2) == 130 and exits.killed_by(9) == 137
