"""One correlator for both kinds of finding: a rule firing on a log line and a preflight check's finding.

A check finding before launch (``/dev/shm`` too small) and a log finding after it
(an NCCL timeout) meet in the engine's one correlator, which nests the log's
class under the check's because the class catalogue says the first `explains`
the second.
"""

from __future__ import annotations

from qwen_triage.engine.check_finding import CheckFinding
from qwen_triage.engine.scanner import Scanner
from qwen_triage.inputs.source import Source
from qwen_triage.preflight.findings import ev, load_classes, to_report
from qwen_triage.rulepack.severity import Severity

ROOT, SYMPTOM = "nccl.shm_too_small", "nccl.timeout"


def _log_line(compiled, class_id: str) -> str:
    """An example line of a bundled rule of that class, known to match it."""
    for r in compiled.rules:
        if r.rule.class_ == class_id and r.rule.examples.match and not r.rule.match.all:
            return r.rule.examples.match[0]
    raise AssertionError(f"no single-line example for {class_id}")


def _check(class_id: str = ROOT) -> CheckFinding:
    return CheckFinding(
        class_id=class_id,
        rule="preflight.doctor.shm-small",
        title="/dev/shm is small",
        severity=Severity.warning,
        summary="/dev/shm has 64 MiB.",
        evidence=[ev("/dev/shm", "64 MiB")],
    )


def _scanner_with_log(compiled, class_id: str) -> Scanner:
    scanner = Scanner(compiled)
    source = Source(name="vllm.log", kind="text")
    scanner.add_source(source)
    for _ in scanner.feed_line(source, _log_line(compiled, class_id), 1):
        pass
    for _ in scanner.flush():
        pass
    return scanner


def test_check_finding_explains_log_finding(compiled):
    assert SYMPTOM in load_classes()[ROOT].explains
    scanner = _scanner_with_log(compiled, SYMPTOM)
    assert [d.class_ for d in scanner.report().diagnoses] == [SYMPTOM]

    assert scanner.correlator.add(_check())  # a new group: the check's class
    diagnoses = scanner.correlator.diagnoses()
    assert [d.class_ for d in diagnoses] == [ROOT]  # one diagnosis, the log's class under it
    root = diagnoses[0]
    assert root.rule == "preflight.doctor.shm-small" and root.evidence[0].path == "/dev/shm"
    assert [s.class_ for s in root.symptoms] == [SYMPTOM]
    assert root.symptoms[0].evidence[0].path == "vllm.log"


def test_same_class_from_both_kinds_is_one_diagnosis(compiled):
    scanner = _scanner_with_log(compiled, ROOT)
    scanner.correlator.add(_check(ROOT))
    (d,) = scanner.correlator.diagnoses()
    assert d.class_ == ROOT and d.count == 2
    assert {e.path for e in d.evidence} == {"vllm.log", "/dev/shm"}
    assert "preflight.doctor.shm-small" in d.rules and len(d.rules) == 2
    assert "/dev/shm has 64 MiB." in d.summary  # the check's wording joins the rule's


def test_preflight_report_is_the_correlator(compiled):
    """`to_report` is a thin door to the same correlator: same tree as feeding it directly."""
    classes = load_classes()
    check_symptom = _check(SYMPTOM).model_copy(update={"rule": "preflight.doctor.nccl", "severity": Severity.error})
    diagnoses, observations = to_report([check_symptom, _check()], classes)
    assert [d.class_ for d in diagnoses] == [ROOT] and not observations
    assert diagnoses[0].symptoms[0].class_ == SYMPTOM


def test_a_floor_line_over_the_line_it_causes_is_that_lines_cause_not_its_wrapper(compiled):
    """ggml's assertion (a structure rule) right above Ollama's "runner terminated" (a sentence rule, a class the
    assertion's explains): the assertion is the root, the exit its symptom; neither is lost to the other."""
    scanner = Scanner(compiled)
    source = Source(name="ollama.log", kind="text")
    scanner.add_source(source)
    lines = ["Mar 02 10:00:01 host1 ollama[123]: ggml.c:1234: GGML_ASSERT(a->ne[2] == b->ne[0]) failed",
             'Mar 02 10:00:02 host1 ollama[123]: time=2025-03-02T10:00:02.000Z level=ERROR source=sched.go:455 '
             'msg="error loading llama server" error="llama runner process has terminated: exit status 2"']
    for n, line in enumerate(lines, 1):
        for _ in scanner.feed_line(source, line, n):
            pass
    for _ in scanner.flush():
        pass
    report = scanner.report()
    assert [(d.class_, d.rule) for d in report.diagnoses] == [("process.segfault", "families.ggml-assert")]
    assert [s.class_ for s in report.diagnoses[0].symptoms] == ["server.startup_timeout"]
