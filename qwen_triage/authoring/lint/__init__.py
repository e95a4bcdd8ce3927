"""`rules lint`: named checks over a rule pack, each with an id, a level and its own tests.

One module per check family (yamllint's and ruff's layout): :mod:`.catalogue` (classes.yaml,
fix-defaults.yaml), :mod:`.data_files` (stages, benign lines), :mod:`.files` (rule files load, classes
exist, ids unique), :mod:`.patterns` (literal, backtracking, line-bound), :mod:`.templates`
(captured names), :mod:`.fixes` (actions, steps), :mod:`.example_checks` (examples through the
matcher), :mod:`.overlap` (duplicate and shadowed rules). :mod:`.registry` lists them all;
:mod:`.context` loads what they read once; :mod:`.run` runs the chosen ones; :mod:`.listing` prints
the checks (`rules lint --list-checks`) and problems as JSON.
"""

from qwen_triage.authoring.lint.catalogue import lint_fix_defaults
from qwen_triage.authoring.lint.check import Check, chosen, parse_levels, unknown_selectors
from qwen_triage.authoring.lint.context import class_cycles as _class_cycles
from qwen_triage.authoring.lint.examples import ExampleResult, pack_for_paths, test_examples
from qwen_triage.authoring.lint.listing import checks_json, checks_text, problems_json
from qwen_triage.authoring.lint.probe import probe_pattern
from qwen_triage.authoring.lint.problem import Problem
from qwen_triage.authoring.lint.registry import CHECKS
from qwen_triage.authoring.lint.run import lint_paths, lint_rule

__all__ = [
    "CHECKS", "Check", "ExampleResult", "Problem", "_class_cycles", "checks_json", "checks_text", "chosen",
    "lint_fix_defaults", "lint_paths", "lint_rule", "parse_levels", "problems_json", "pack_for_paths", "probe_pattern", "test_examples", "unknown_selectors",
]
