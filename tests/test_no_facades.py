"""No facades: a name is imported from the module that defines it, never from one that only passes it on.

A re-export gives a name two homes; callers drift to the wrong one (30 sites imported `CompiledPack` from
the matcher, `RuleFileError` from the YAML loader, `finding` from preflight) and a move breaks them all.
Read with `ast` over the package and the tests: for ``from qwen_triage.X import name``, X must define
``name`` (a function, class or assignment at its top level) or have it as a submodule.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from tests.import_graph import PACKAGE, module_names

ROOT = PACKAGE.parent
KNOWN = module_names()


@cache
def defined(module: str) -> frozenset[str]:
    """Names bound at the top level of ``module`` other than by ``from qwen_triage… import``."""
    tree = ast.parse(KNOWN[module].read_text())
    names: set[str] = set()
    nodes = list(tree.body)
    while nodes:
        node = nodes.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not (node.module or "").startswith("qwen_triage"):
            names.update(a.asname or a.name for a in node.names)  # the standard library, third parties
        elif isinstance(node, (ast.If, ast.Try)):
            nodes += [*node.body, *node.orelse, *getattr(node, "finalbody", []),
                      *(s for h in getattr(node, "handlers", []) for s in h.body)]
    return frozenset(names)


def test_every_name_is_imported_from_the_module_that_defines_it() -> None:
    wrong = []
    for path in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "tests").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or node.level or node.module not in KNOWN:
                continue
            for alias in node.names:
                if f"{node.module}.{alias.name}" not in KNOWN and alias.name not in defined(node.module):
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{alias.name}")
    assert wrong == []
