"""Building preflight findings, and turning them into the same diagnoses and observations as ``scan``.

Checks emit :class:`~qwen_triage.engine.correlate.CheckFinding` objects, built
by :func:`~qwen_triage.engine.check_finding.finding` from the check's declaration in ``rules/checks.yaml`` and the
small helpers here (:func:`ev`, :func:`act`, :func:`fix`);
:func:`to_report` hands them to the engine's one
:class:`~qwen_triage.engine.correlate.Correlator`, which groups them by class,
files info-level ones as observations, and nests a class under the class that
``explains`` it, so a missing shard and the layer count it breaks read as one
root cause.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from qwen_triage.engine.check_finding import CheckFinding
from qwen_triage.engine.correlate import Correlator
from qwen_triage.report.model import Diagnosis, Evidence, FixOut, Observation
from qwen_triage.rulepack.spec import ClassSpec


def ev(path: str | Path, text: str) -> Evidence:
    """Evidence from a probe or a file header: there is no line, so line is 0."""
    return Evidence(path=str(path), line=0, text=text)


def act(cls: type[BaseModel], **fields: Any) -> BaseModel:
    """Build an action model without repeating its ``type`` literal."""
    literal = cls.model_fields["type"].annotation.__args__[0]  # type: ignore[union-attr]
    return cls(type=literal, **fields)


def fix(step: str, action: BaseModel | None = None) -> FixOut:
    return FixOut(step=step, action=action.model_dump(mode="json") if action is not None else None)


def load_classes() -> dict[str, ClassSpec]:
    # Only the class catalogue: loading the whole rule pack would compile
    # every pattern, which preflight never uses.
    from qwen_triage.rulepack.pack import load_classes as _load
    from qwen_triage.rulepack.paths import CLASSES_FILE, bundled_rules_dir

    return _load(bundled_rules_dir() / CLASSES_FILE)


def to_report(
    findings: Iterable[CheckFinding], classes: dict[str, ClassSpec] | None = None
) -> tuple[list[Diagnosis], list[Observation]]:
    """Diagnoses (one per class, root causes first) and observations (one per rule), by the engine's correlator."""
    correlator = Correlator(load_classes() if classes is None else classes).extend(findings)
    return correlator.diagnoses(), correlator.observations()

