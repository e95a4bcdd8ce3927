"""Relay lines are never a second problem (issue 26 §5).

A line that only passes on a failure printed before it — vLLM's ``WorkerProc failed to start.``, Ollama's
``panic: unable to load model: …``, torchrun's ``ChildFailedError``, DeepSpeed's ``sigkill_handler … exits with
return code = 1`` — is known to a rule marked ``relay: true``. Beside a diagnosis it is part of that diagnosis
(``relayed``), never listed among the errors no rule explains; with no diagnosis it is still listed (kind
``relay``), so a failing log whose only error lines are wrappers is never reported as if nothing were wrong.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT

LOGS = ROOT / "fixtures" / "logs"
CORPUS_4 = ROOT.parent / "shared" / "corpus-4"

# (log, a relay line's text in it, the class it relays): lines as the programs print them
RELAYS = [
    (LOGS / "vllm" / "vllm-fx-shard-missing.log", "WorkerProc failed to start.", "model.shard_missing"),
    (LOGS / "vllm" / "vllm-fx-shard-missing.log", "Engine core initialization failed", "model.shard_missing"),
    (LOGS / "ollama" / "fx-ollama-gguf-corrupt-bounds.log", "panic: unable to load model:", "model.gguf_corrupt"),
    (LOGS / "system" / "sys-fx-nccl-timeout-torchrun.log", "ChildFailedError", None),
    (LOGS / "training" / "ft-fx-ds-cuda-mismatch.log", "exits with return code = 1", None),
]


def _scan(path: Path, compiled):  # type: ignore[no-untyped-def]
    from qwen_triage.engine.scanner import scan_paths

    return scan_paths([str(path)], compiled)


@pytest.mark.parametrize(("log", "relay", "cls"), RELAYS, ids=lambda v: v.name if isinstance(v, Path) else None)
def test_a_relay_line_is_part_of_its_diagnosis_not_an_unexplained_error(compiled, log: Path, relay: str,
                                                                       cls: str | None) -> None:
    assert relay in log.read_text()
    report = _scan(log, compiled)
    assert report.diagnoses, "the fixture's cause is diagnosed"
    assert not [u.template for u in report.unrecognised if relay in u.evidence.text]
    holders = [d for d in report.diagnoses if any(relay in e.text for r in d.relayed for e in r.evidence)]
    assert holders, [d.relayed for d in report.diagnoses]
    if cls is not None:
        assert holders[0].class_ == cls
    assert not [o for o in report.observations if any(relay in e.text for e in o.evidence)]


def test_genuine_vllm_output_lists_no_relay_beside_its_diagnosis(compiled) -> None:
    """vLLM 0.32's own output for a missing shard (corpus-4): the worker's and the API server's relays are held."""
    log = CORPUS_4 / "vllm-genuine" / "real-missing-shard.log"
    if not log.exists():
        pytest.skip("../shared/corpus-4 is not beside this checkout")
    report = _scan(log, compiled)
    assert report.classes()[0] == "model.shard_missing"
    for relay in ("WorkerProc failed to start.", "Engine core initialization failed"):
        assert not [u for u in report.unrecognised if relay in u.evidence.text], relay
        assert any(relay in e.text for r in report.diagnoses[0].relayed for e in r.evidence), relay


def test_the_relayed_lines_go_to_the_diagnosis_printed_before_them(compiled, tmp_path: Path) -> None:
    """Two failures in one input: each relay goes to the diagnosis whose evidence precedes it."""
    log = tmp_path / "two.log"
    log.write_text(
        "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (6).\n"
        "(Worker pid=1) ERROR 11-29 15:18:13 [multiproc_executor.py:953] WorkerProc failed to start.\n"
        "Feb 11 09:14:22 gpubox kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
        "(Worker pid=2) ERROR 11-29 15:18:20 [multiproc_executor.py:671] WorkerProc hit an exception.\n"
    )
    report = _scan(log, compiled)
    held = {d.class_: [e.line for r in d.relayed for e in r.evidence] for d in report.diagnoses}
    assert held["config.tp_indivisible"] == [2] and held["hardware.xid_fatal"] == [4], held


def test_relay_lines_without_a_diagnosis_are_still_listed(compiled, tmp_path: Path) -> None:
    """The lines of a real log that only relay, with the cause cut away: no diagnosis, never silent."""
    source = (LOGS / "vllm" / "vllm-fx-shard-missing.log").read_text().splitlines()
    relays = [line for line in source if "WorkerProc failed to start." in line
              or "Engine core initialization failed" in line]
    assert len(relays) == 2
    log = tmp_path / "relays-only.log"
    log.write_text("\n".join(relays) + "\n")
    report = _scan(log, compiled)
    assert report.diagnoses == []
    listed = [u for u in report.unrecognised if u.kind == "relay"]
    assert [u.evidence.line for u in listed] == [1, 2]
    assert all(u.hint for u in listed)  # what the relay rule says of it: the cause is printed before it
    assert report.observations == []


def test_relays_show_under_their_diagnosis_in_text_and_markdown(compiled) -> None:
    from io import StringIO

    from rich.console import Console

    from qwen_triage.report.markdown import to_markdown
    from qwen_triage.report.text import print_text

    report = _scan(LOGS / "vllm" / "vllm-fx-shard-missing.log", compiled)
    out = StringIO()
    print_text(report, Console(file=out, width=200, color_system=None), boxed=False)
    text = out.getvalue()
    assert "relayed by" in text and "WorkerProc failed to start." in text.split("relayed by")[1]
    assert "other errors no rule explains" not in text
    markdown = to_markdown(report)
    assert "**Relayed by**" in markdown


def test_a_relay_rule_names_no_failure_of_its_own(tmp_path: Path) -> None:
    """`relay: true` with a severity above info would make a wrapper a diagnosis again: the schema refuses it."""
    from qwen_triage.rulepack.errors import RuleFileError
    from qwen_triage.rulepack.pack import load_pack

    def rule_file(severity: str) -> None:
        (tmp_path / "r.yaml").write_text(
            "rules:\n"
            "  - id: local.relay\n"
            "    class: server.startup_timeout\n"
            "    title: A wrapper line\n"
            f"    severity: {severity}\n"
            "    relay: true\n"
            "    sources: [any]\n"
            "    match: {any: ['wrapper said so']}\n"
            "    examples: {match: ['wrapper said so'], no_match: ['nothing']}\n"
        )

    tmp_path.chmod(0o755)
    rule_file("info")
    (loaded,) = load_pack([tmp_path], bundled=False).rules
    assert loaded.rule.relay is True
    rule_file("error")
    with pytest.raises(RuleFileError, match="a relay rule has severity info"):
        load_pack([tmp_path], bundled=False)
