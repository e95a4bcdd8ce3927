"""What a rule's `sources:` does (docs/writing-rules.md): enforced for the system's records, a label among applications.

A library's message is logged under its host program's wrapper: `sources: [vllm]` reads an Ollama record as
`[any]` does, while the kernel's records stay with rules that name `kernel`, and a rule naming only `kernel`
reads no application's record.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.scanner import scan_paths
from qwen_triage.rulepack.pack import load_pack

PHRASE = "Frobnication unit wedged beyond repair"
RULE = """\
  - id: x.{name}
    class: {cls}
    title: {name}
    severity: error
    sources: [{sources}]
    match:
      any: ['Frobnication unit wedged beyond repair']
    examples:
      match: ["Frobnication unit wedged beyond repair"]
      no_match: ["Frobnication unit"]
"""
LINES = {
    "ollama": f'time=2025-01-01T00:00:00.000Z level=ERROR source=server.go:1 msg="{PHRASE}"',
    "vllm": f"ERROR 11-29 08:31:57 [x.py:1] {PHRASE}",
    "kernel": f"[   12.345678] {PHRASE}",
    "plain": PHRASE,
}


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> CompiledPack:
    d = tmp_path_factory.mktemp("rules")
    (d / "r.yaml").write_text("rules:\n" + "".join(RULE.format(name=n, sources=n, cls=c) for n, c in
                                                   (("vllm", "model.shard_missing"), ("kernel", "model.shard_corrupt"),
                                                    ("any", "model.file_missing"))))
    return CompiledPack.build(load_pack([d], bundled=False), engine="literal")


@pytest.mark.parametrize("where, fired", [
    ("ollama", {"x.vllm", "x.any"}),  # an application's record: [vllm] is a label, read as [any] is
    ("vllm", {"x.vllm", "x.any"}),
    ("kernel", {"x.kernel"}),  # the system's record: only the rule that names the kernel
    ("plain", {"x.vllm", "x.any", "x.kernel"}),  # no known origin: every rule
])
def test_sources_is_enforced_for_the_system_and_a_label_among_applications(tmp_path: Path, pack: CompiledPack,
                                                                            where: str, fired: set[str]) -> None:
    log = tmp_path / "x.log"
    log.write_text(LINES[where] + "\n")
    report = scan_paths([str(log)], pack)
    rules = {d.rule for d in report.diagnoses} | {s.rule for d in report.diagnoses for s in d.symptoms}
    assert rules == fired


# -- `status:` (docs/writing-rules.md): deprecated rules read nothing, experimental ones are observations ----------

@pytest.fixture(scope="module")
def statuses(tmp_path_factory: pytest.TempPathFactory) -> CompiledPack:
    d = tmp_path_factory.mktemp("rules")
    (d / "r.yaml").write_text("rules:\n" + "".join(
        RULE.format(name=status, sources="any", cls=cls).replace("    severity: error\n",
                                                                  f"    severity: error\n    status: {status}\n")
        for status, cls in (("stable", "model.shard_missing"), ("experimental", "model.shard_corrupt"),
                            ("deprecated", "model.file_missing"))))
    return CompiledPack.build(load_pack([d], bundled=False), engine="literal")


def test_deprecated_rules_are_skipped_and_experimental_ones_are_observations(tmp_path: Path,
                                                                             statuses: CompiledPack) -> None:
    log = tmp_path / "x.log"
    log.write_text(LINES["vllm"] + "\n")
    report = scan_paths([str(log)], statuses)
    assert [d.rule for d in report.diagnoses] == ["x.stable"]  # the only cause
    assert [o.rule for o in report.observations] == ["x.experimental"]  # reported, never a cause
    assert all(d.rule != "x.deprecated" for d in report.diagnoses)


def test_a_deprecated_rules_examples_are_not_run(statuses: CompiledPack) -> None:
    from qwen_triage.authoring.lint.examples import example_runs

    ran = {run.loaded.rule.id for run in example_runs(statuses.pack, statuses)}
    assert ran == {"x.stable", "x.experimental"}
