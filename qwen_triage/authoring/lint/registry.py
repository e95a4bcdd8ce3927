"""Every lint check, in the order their problems are reported: files first, then rules, then examples."""

from __future__ import annotations

from qwen_triage.authoring.lint.catalogue import CHECKS as CATALOGUE
from qwen_triage.authoring.lint.check import Check
from qwen_triage.authoring.lint.data_files import CHECKS as DATA_FILES
from qwen_triage.authoring.lint.example_checks import CHECKS as EXAMPLES
from qwen_triage.authoring.lint.files import CHECKS as FILES
from qwen_triage.authoring.lint.fixes import CHECKS as FIXES
from qwen_triage.authoring.lint.overlap import CHECKS as OVERLAP
from qwen_triage.authoring.lint.patterns import CHECKS as PATTERNS
from qwen_triage.authoring.lint.robustness import CHECKS as ROBUSTNESS
from qwen_triage.authoring.lint.sentences import CHECKS as SENTENCES
from qwen_triage.authoring.lint.templates import CHECKS as TEMPLATES

CHECKS: tuple[Check, ...] = (*CATALOGUE, *DATA_FILES, *FILES, *PATTERNS, *SENTENCES, *TEMPLATES, *FIXES, *EXAMPLES, *ROBUSTNESS, *OVERLAP)
RULE_CHECKS = tuple(c for c in CHECKS if c.scope == "rule")
