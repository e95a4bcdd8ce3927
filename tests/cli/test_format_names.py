"""Output format names come from the renderer tables: one list, never written again beside them.

`--format` offers the keys of the table of renderers the command hands the one switch
(report/formats.py); a name written out by hand drifts from the table (five such lists were found).
"""

from __future__ import annotations

import ast

from qwen_triage.cli.bugreport import RENDERERS as BUGREPORT
from qwen_triage.cli.main import cli
from qwen_triage.preflight.render import RENDERERS as PREFLIGHT
from qwen_triage.report.emit import FORMATS, RENDERERS
from qwen_triage.report.formats import CHECK, JSONL, PLAIN
from tests.import_graph import PACKAGE

NAMES = {"text", "json", "markdown", JSONL}


def _choices(*path: str) -> list[str]:
    import click

    command: click.Command = cli
    ctx = click.Context(cli)
    for name in path:
        command = command.get_command(ctx, name)  # type: ignore[attr-defined]
    return list(next(p for p in command.params if p.name == "fmt").type.choices)  # type: ignore[attr-defined]


def test_each_command_offers_the_names_of_its_renderers() -> None:
    assert FORMATS == tuple(RENDERERS)
    assert tuple(PREFLIGHT) == FORMATS  # plan, check-model and doctor render a result in the report's formats
    assert _choices("scan") == [*RENDERERS, JSONL]
    for command in ("attach", "journal", "plan", "check-model", "doctor"):
        assert _choices(command) == list(RENDERERS), command
    assert _choices("rules", "list") == _choices("eval") == list(RENDERERS)
    assert _choices("report") == list(BUGREPORT)
    for listing in (("rules", "classes"), ("rules", "lint"), ("rules", "actions"), ("rules", "coverage")):
        assert _choices(*listing) == list(PLAIN), listing
    assert _choices("check") == list(CHECK)


def test_the_listing_formats_are_named_once() -> None:
    """`text`/`json` choices of the listing commands and `check`'s come from report/formats, not from a hand list."""
    found = []
    for path in sorted((PACKAGE / "cli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) >= 2 and all(
                    isinstance(e, ast.Constant) and e.value in {"text", "json", "npd"} for e in node.elts):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == []


def test_no_list_of_report_format_names_is_written_by_hand() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and len(node.elts) >= 2 and all(
                    isinstance(e, ast.Constant) and e.value in NAMES for e in node.elts) \
                    and "markdown" in {e.value for e in node.elts}:  # type: ignore[attr-defined]
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == []
