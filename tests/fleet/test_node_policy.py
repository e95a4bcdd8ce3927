"""Node policy is data: rules/classes.yaml says which classes drain a node and which are held until it boots.

Nothing in fleet/ names a class: a class marked `node_level` in the catalogue drains a Slurm node and sets
a node-problem-detector condition, one marked `held_until_boot` outlives the hold until the boot id
changes; unmark it and neither happens.
"""

from __future__ import annotations

import ast
from pathlib import Path

from qwen_triage.fleet import npd, slurm
from qwen_triage.fleet.check import CheckResult
from qwen_triage.fleet.policy import NodePolicy
from qwen_triage.fleet.state import ActiveDiagnosis
from qwen_triage.rulepack.pack import load_classes
from qwen_triage.rulepack.paths import CLASSES_FILE, bundled_rules_dir
from tests.import_graph import PACKAGE

from .test_node_check_cannot_be_tricked import NoScontrol


def _policy(tmp_path: Path, edit=lambda text: text) -> NodePolicy:  # type: ignore[no-untyped-def]
    path = tmp_path / CLASSES_FILE
    path.write_text(edit((bundled_rules_dir() / CLASSES_FILE).read_text()))
    return NodePolicy.of(load_classes(path))


def _unmark(cls: str):  # type: ignore[no-untyped-def]
    """The catalogue with ``cls``'s node policy lines taken out."""
    def edit(text: str) -> str:
        head, _, rest = text.partition(f"  - id: {cls}\n")
        entry, sep, tail = rest.partition("\n  - id: ")
        entry = "\n".join(line for line in entry.splitlines()
                          if line.strip() not in ("node_level: true", "held_until_boot: true"))
        return head + f"  - id: {cls}\n" + entry + sep + tail
    return edit


def test_the_catalogue_decides_what_drains_a_node(tmp_path: Path) -> None:
    pcie = ActiveDiagnosis(class_="hardware.pcie_error", rule="kernel.aer", severity="error", source="kernel",
                           first_seen=1.0, last_seen=2.0)
    for policy, drained in ((_policy(tmp_path), True), (_policy(tmp_path, _unmark("hardware.pcie_error")), False)):
        runner = NoScontrol()
        outcome = slurm.apply([pcie], "gpu-7", runner, policy=policy)
        assert (outcome.action == "drained") is drained and bool(runner.updates) is drained
        assert policy.until_boot("hardware.pcie_error") is drained
        warning = pcie.model_copy(update={"severity": "warning"})
        result = CheckResult(status="problem", checked_at=1.0, seconds=0.0, boot_id="b", active=[warning],
                             policy=policy)
        # a warning of a node-level class waits for an error before it sets the condition; of any other, not
        assert npd.npd_output(result)[0] == (0 if drained else 1)


def test_no_class_is_named_in_fleet_code() -> None:
    classes = set(load_classes(bundled_rules_dir() / CLASSES_FILE))
    named = []
    for path in sorted((PACKAGE / "fleet").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                    node.value in classes or node.value in ("hardware.", "node.")):
                named.append(f"{path.name}:{node.lineno} {node.value!r}")
    assert named == []
