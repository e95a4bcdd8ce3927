"""Fallback rules: the cause when nothing else is (``fallback: true``, docs/writing-rules.md).

Ollama's "no compatible GPUs were discovered" is printed by every CPU-only host while it serves, and is all a GPU
server shows when the runtime cannot see its cards. The rule that reads it names the failure but says
``fallback: true``: alone in a report it is the diagnosis; beside any other diagnosis it is an observation, so a
download that stalls on such a host is still diagnosed as the stalled download. A relay rule may be a fallback too:
alone it stands for its class; beside a diagnosis it is that diagnosis' relay.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT

WSL_NO_GPU = ROOT / "fixtures" / "wordings" / "windows-10" / "w10-ollama-wsl-nvidia-smi-failed-001.log"

# lines as Ollama prints them (server log): discovery finding no GPU, then a pull whose parts stall
NO_GPU = 'time=2025-03-02T10:00:01.000Z level=INFO source=gpu.go:377 msg="no compatible GPUs were discovered"'
STALLED = ("time=2025-03-02T10:02:11.000Z level=INFO source=download.go:370 msg=\"dde5aa3fc5ff part 11 stalled; "
           "retrying. If this persists, press ctrl-c to exit, then 'ollama pull' to find a faster connection.\"")


def _scan(path: Path, compiled):  # type: ignore[no-untyped-def]
    from qwen_triage.engine.scanner import scan_paths

    return scan_paths([str(path)], compiled)


def test_the_no_gpu_line_alone_is_the_diagnosis(compiled) -> None:
    """A real report (an Ollama in WSL2 whose nvidia-smi fails): the discovery warning is all the log says."""
    report = _scan(WSL_NO_GPU, compiled)
    assert report.classes() == ["runtime.no_gpu_visible"]
    assert report.diagnoses[0].rule == "ollama.no-compatible-gpus"
    assert report.observations == []


def test_beside_another_diagnosis_it_is_an_observation(compiled, tmp_path: Path) -> None:
    """The no-GPU line comes first, the stalled download after it: the download is the one diagnosis."""
    log = tmp_path / "pull.log"
    log.write_text(f"{NO_GPU}\n{STALLED}\n")
    report = _scan(log, compiled)
    assert report.classes() == ["download.incomplete"]
    assert [o.rule for o in report.observations] == ["ollama.no-compatible-gpus"]
    assert report.observations[0].severity.value == "info"  # an observation, however the rule names its failure
    assert report.observations[0].evidence[0].line == 1


def test_a_cpu_build_told_to_offload_is_no_cause_beside_its_crash(compiled) -> None:
    """A real report (TabbyML's CPU llama-server, always given -ngl 9999, then a Windows access violation): llama.cpp's
    "not compiled with GPU offload support" is an observation (a CPU build says it by design), the crash is the
    diagnosis."""
    log = ROOT / "fixtures" / "wordings" / "ds-agents-14" / "a14-tabby-windows-embedding-access-violation-015.log"
    report = _scan(log, compiled)
    assert report.classes() == ["process.segfault"]
    assert "llamacpp.cpu-build-ignores-gpu-layers" in [o.rule for o in report.observations]


def test_the_fallback_line_is_no_unexplained_error(compiled, tmp_path: Path) -> None:
    log = tmp_path / "alone.log"
    log.write_text(f"{NO_GPU}\n")
    report = _scan(log, compiled)
    assert report.classes() == ["runtime.no_gpu_visible"]
    assert report.unrecognised == []


def test_a_fallback_rule_must_name_a_failure() -> None:
    """`fallback: true` on an info rule (or a relay) says nothing: the schema refuses it."""
    from pydantic import ValidationError

    from qwen_triage.rulepack.schema import Rule

    rule = {"id": "x.alone", "class": "runtime.no_gpu_visible", "title": "alone", "severity": "info",
            "fallback": True, "sources": ["ollama"], "match": {"any": ["no GPU here"]},
            "examples": {"match": ["no GPU here"], "no_match": ["a GPU here"]}}
    with pytest.raises(ValidationError, match="fallback"):
        Rule.model_validate(rule)
    Rule.model_validate({**rule, "severity": "warning"})


def test_the_flag_survives_the_prebuilt_pack(compiled) -> None:
    """The pack cache stores rules as dicts: the flag comes back, and only on the rules that set it."""
    from qwen_triage.rulepack.spec import RuleSpec

    rules = {r.rule.id: r.rule for r in compiled.pack.rules}
    spec = rules["ollama.no-compatible-gpus"]
    assert spec.fallback and RuleSpec.from_dict(spec.to_dict()).fallback
    assert "fallback" not in rules["ollama.download-part-stalled"].shown()


# A relay that is a fallback too: llama.cpp's "failed to load model" only passes on the loader's reason, and stands
# for a GGUF this build cannot read when the log holds no reason at all.
LOAD_FAILED = "llama_model_load_from_file_impl: failed to load model"
CUDA_OOM = ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 20480.00 MiB on device 0: cudaMalloc failed: "
            "out of memory")


def test_a_fallback_relay_alone_is_the_diagnosis(compiled) -> None:
    """A real report (text-generation-webui's llama-cpp-python on a Gemma 2 GGUF newer than its build): the load
    failure is all the log says, so it stands for its class, at warning, and is neither its own relay nor an
    unexplained line; the web UI's "Failed to load the model." above the traceback is that diagnosis' relay."""
    log = ROOT / "fixtures" / "wordings" / "llamacpp-21" / "c21-textgen-llamacpp-python-gemma2-failed-load-015.log"
    report = _scan(log, compiled)
    assert report.classes() == ["model.gguf_unsupported"]
    top = report.diagnoses[0]
    assert top.rule == "llamacpp.model-load-failed"
    assert top.severity.value == "warning"
    assert [r.rule for r in top.relayed] == ["localrunners.textgen-webui-load-failed-relay"]
    assert [u for u in report.unrecognised if u.kind == "relay"] == []


def test_beside_a_diagnosis_a_fallback_relay_is_only_its_relay(compiled, tmp_path: Path) -> None:
    """The allocation failure is the cause: the load failure after it is that diagnosis' relay, and not an
    observation of a class of its own."""
    log = tmp_path / "oom.log"
    log.write_text(f"{CUDA_OOM}\n{LOAD_FAILED}\n")
    report = _scan(log, compiled)
    assert report.classes() == ["memory.gpu_oom"]
    assert [r.rule for r in report.diagnoses[0].relayed] == ["llamacpp.model-load-failed"]
    assert "llamacpp.model-load-failed" not in [o.rule for o in report.observations]


def test_a_relay_may_be_a_fallback() -> None:
    """`relay: true` with `fallback: true` keeps the relay's severity (info): the schema takes it."""
    from qwen_triage.rulepack.schema import Rule

    rule = Rule.model_validate(
        {"id": "x.load-failed", "class": "model.gguf_unsupported", "title": "load failed", "severity": "info",
         "relay": True, "fallback": True, "sources": ["llama.cpp"], "match": {"any": ["failed to load model"]},
         "examples": {"match": ["failed to load model"], "no_match": ["loaded the model"]}})
    assert rule.relay and rule.fallback
