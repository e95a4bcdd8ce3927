"""`rules lint` output besides problem lines: the listing of the checks, and problems as JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence

from qwen_triage.authoring.lint.check import Check
from qwen_triage.authoring.lint.problem import Problem


def checks_text(checks: Sequence[Check]) -> str:
    """One check a line, ``id  level  summary``, in the order their problems are reported."""
    width = max((len(c.id) for c in checks), default=0)
    return "\n".join(f"{c.id:<{width}}  {c.level:<7}  {c.summary}" for c in checks)


def checks_json(checks: Sequence[Check]) -> str:
    return json.dumps({"checks": [c.as_json() for c in checks]}, indent=2, ensure_ascii=False)


def problems_json(problems: Sequence[Problem], errors: int) -> str:
    return json.dumps({"problems": [p.as_json() for p in problems], "errors": errors,
                       "warnings": len(problems) - errors}, indent=2, ensure_ascii=False)
