"""Score the rule pack on a labelled corpus (the format of shared/corpus/FORMAT.md)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.scanner import scan_paths
from qwen_triage.rulepack.yamlload import load_yaml


class Case(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str
    file: str
    input: str = "mixed"
    expect: list[str] = Field(default_factory=list)
    also: list[str] = Field(default_factory=list)
    url: str | None = None
    note: str | None = None
    evidence: str | None = None


class CaseResult(BaseModel):
    id: str
    path: str
    expect: list[str]
    got: list[str]
    correct: bool
    inferred: bool = False
    unexpected: list[str] = Field(default_factory=list, description="diagnoses neither expected nor allowed")
    unrecognised: int = Field(default=0, description="unrecognised error templates the report listed")

    @property
    def silent(self) -> bool:
        """A failing log whose report says nothing: no diagnosis and no unrecognised error."""
        return bool(self.expect) and not self.got and not self.unrecognised


class ClassScore(BaseModel):
    precision: float | None
    recall: float | None
    support: int


class EvalResult(BaseModel):
    cases: int
    correct: int
    accuracy: float
    healthy_cases: int
    healthy_with_diagnoses: int
    inferred_cases: int
    inferred_correct: int
    silent: int = Field(description="failing logs with an empty report (no diagnosis, no unrecognised error)")
    per_class: dict[str, ClassScore]
    misses: list[CaseResult]
    results: list[CaseResult]


def load_cases(root: Path) -> list[tuple[Path, Case]]:
    out = []
    for manifest in sorted(root.rglob("cases.yaml")):
        data = load_yaml(manifest).data or []
        for item in data:
            case = Case.model_validate(item)
            out.append((manifest.parent / case.file, case))
    return out


def evaluate(root: Path, compiled: CompiledPack) -> EvalResult:
    results: list[CaseResult] = []
    for path, case in load_cases(root):
        report = scan_paths([str(path)], compiled)
        got = report.classes()
        if case.expect:
            correct = bool(got) and got[0] == case.expect[0]
        else:
            correct = not got
        allowed = set(case.expect) | set(case.also)
        symptoms = {s.class_ for d in report.diagnoses for s in d.symptoms}
        results.append(
            CaseResult(
                id=case.id,
                path=str(path),
                expect=case.expect,
                got=got,
                correct=correct,
                inferred=case.evidence == "inferred",
                unexpected=[c for c in got if c not in allowed and c not in symptoms],
                unrecognised=len(report.unrecognised),
            )
        )
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    support: Counter[str] = Counter()
    for r in results:
        want = r.expect[0] if r.expect else None
        top = r.got[0] if r.got else None
        if want:
            support[want] += 1
        if want and top == want:
            tp[want] += 1
        else:
            if top:
                fp[top] += 1
            if want:
                fn[want] += 1
    per_class = {}
    for c in sorted(set(support) | set(fp)):
        p = tp[c] / (tp[c] + fp[c]) if (tp[c] + fp[c]) else None
        rcl = tp[c] / (tp[c] + fn[c]) if (tp[c] + fn[c]) else None
        per_class[c] = ClassScore(
            precision=round(p, 3) if p is not None else None,
            recall=round(rcl, 3) if rcl is not None else None,
            support=support[c],
        )
    healthy = [r for r in results if not r.expect]
    inferred = [r for r in results if r.inferred]
    right = sum(1 for r in results if r.correct)
    return EvalResult(
        cases=len(results),
        correct=right,
        accuracy=round(right / len(results), 4) if results else 0.0,
        healthy_cases=len(healthy),
        healthy_with_diagnoses=sum(1 for r in healthy if r.got),
        inferred_cases=len(inferred),
        inferred_correct=sum(1 for r in inferred if r.correct),
        silent=sum(r.silent for r in results),
        per_class=per_class,
        misses=[r for r in results if not r.correct],
        results=results,
    )


@dataclass(frozen=True)
class EvalOptions:
    """``qwen-triage eval``'s options, as the command line gives them."""

    directory: str
    """walked for ``cases.yaml`` files"""
    rule_dirs: tuple[str, ...] = ()
    engine: str = "auto"


def run(options: EvalOptions) -> EvalResult:
    """``qwen-triage eval``: score the pack (with ``rule_dirs``) on the labelled corpus under ``directory``;
    a broken ``cases.yaml`` raises :class:`~qwen_triage.exits.Failure`."""
    from qwen_triage.engine.scanner import load_compiled
    from qwen_triage.exits import Failure
    from qwen_triage.rulepack.errors import RuleFileError

    compiled = load_compiled(options.rule_dirs, options.engine)
    try:
        return evaluate(Path(options.directory), compiled)
    except RuleFileError as exc:
        raise Failure(str(exc)) from None
