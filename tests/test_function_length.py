"""No function in the package is longer than 80 lines (from its `def` to its last line, docstring included).

A function that long does several things in a row; the next person has to read all of them to change one.
Split by meaning (a stage, a family of cases), not by line count: see docs/architecture.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.import_graph import PACKAGE

LIMIT = 80


def long_functions(root: Path, limit: int = LIMIT) -> list[str]:
    """``path:line name (N lines)`` of every function or method under ``root`` longer than ``limit`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    found.append(f"{path.relative_to(root).as_posix()}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_is_longer_than_80_lines() -> None:
    assert long_functions(PACKAGE) == []


def test_the_count_sees_methods_nested_and_async_functions(tmp_path: Path) -> None:
    def body(indent: str, n: int) -> str:
        return "".join(f"{indent}x{i} = {i}\n" for i in range(n))

    (tmp_path / "a.py").write_text("def ok():\n" + body("    ", LIMIT - 1))  # with its def line: the limit
    (tmp_path / "b.py").write_text("class C:\n    async def long(self):\n" + body(" " * 8, LIMIT)
                                   + "def outer():\n    def inner():\n" + body(" " * 8, LIMIT))
    assert sorted(long_functions(tmp_path)) == [
        "b.py:2 long (81 lines)", "b.py:83 outer (82 lines)", "b.py:84 inner (81 lines)"]
