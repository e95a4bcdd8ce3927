"""Options that several commands share."""

from __future__ import annotations

import click

from qwen_triage.report.emit import FORMATS

rules_option = click.option(
    "--rules",
    "rule_dirs",
    multiple=True,
    type=click.Path(file_okay=True, dir_okay=True),
    help="Extra rule directory (repeatable); QWEN_TRIAGE_RULES adds more (os.pathsep-separated).",
)
# the report's formats: the names of report/emit's renderers (plan, check-model and doctor render the same three)
format_option = click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
engine_option = click.option(
    "--engine",
    type=click.Choice(["auto", "hyperscan", "literal"]),
    default="auto",
    show_default=True,
    help="Prefilter engine; auto uses Hyperscan where it is installed.",
)


def pack_options(command):
    """``--rules`` and ``--engine``: every command that compiles the rule pack takes both."""
    return rules_option(engine_option(command))

