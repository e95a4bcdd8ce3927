"""The package's imports go one way: no cycles, the layers of docs/architecture.md, click only in cli/."""

from __future__ import annotations

from tests.import_graph import PACKAGE, cycles, graph, imports_of, module_names

# Highest layer first; a module may import its own layer's package or any layer below.
LAYERS = ["cli", "runner|fleet|bugreport", "live|preflight|authoring", "engine", "inputs", "report", "rulepack",
          "leaf"]
RANK = {pkg: i for i, names in enumerate(LAYERS) for pkg in names.split("|")}


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in RANK:
        return parts[1]
    return "leaf"


def test_no_import_cycles() -> None:
    assert cycles(graph()) == []


def test_cycle_finder_sees_every_kind_of_import(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pkg = tmp_path / "demo"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from demo import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import demo.c\n")
    (pkg / "c.py").write_text("import importlib\nimportlib.import_module('demo.a')\n")
    known = module_names(pkg)
    edges = {m: imports_of(m, p, known) for m, p in known.items()}
    assert cycles(edges) == [["demo.a", "demo.b", "demo.c"]]


def test_imports_follow_the_layers() -> None:
    wrong = []
    for module, deps in graph().items():
        if module == "qwen_triage.__main__":
            continue
        for dep in deps:
            a, b = layer(module), layer(dep)
            if a != b and RANK[a] >= RANK[b]:
                wrong.append(f"{module} -> {dep}")
    assert wrong == []


def test_only_the_cli_imports_click() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "cli":
            continue
        text = path.read_text()
        if "import click" in text or "from click" in text:
            offenders.append(str(rel))
    assert offenders == []


def test_the_engine_reads_through_inputs_and_only_inputs_names_a_format() -> None:
    """Issue 30 §1: inputs/ sits below the engine (it imports nothing of it: the layers above hold that), and the
    kinds of input are named in one place, inputs/source.py; everyone else uses its constants, so a new structured
    format is one sniff there and one decoder in engine/sources.py."""
    assert RANK["engine"] < RANK["inputs"]
    named = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if '"journal-json"' in p.read_text())
    assert named == ["inputs/source.py"]
