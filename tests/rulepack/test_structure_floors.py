"""The structure floors of issue 26 §3 in rules/families.yaml: a failure read from its exception type or raising
module, whatever sentence a release gives it, and never where the same type or words mean something else."""

from __future__ import annotations

import pytest

from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.matcher import Matcher
from qwen_triage.engine.sources import Block
from qwen_triage.rulepack.pack import load_pack


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> CompiledPack:
    return CompiledPack.build(load_pack(), engine="literal", cache_dir=tmp_path_factory.mktemp("hs"))


def rules_on(compiled: CompiledPack, text: str) -> set[tuple[str, str]]:
    matcher = Matcher(compiled)
    found = [*matcher.feed_block(Block(data=text.encode() + b"\n", first_line=1), "<test>"), *matcher.finish()]
    return {(f.rule.rule.id, f.rule.rule.class_) for f in found}


def frame(path: str, func: str = "f") -> str:
    return f'  File "/usr/local/lib/python3.12/dist-packages/{path}", line 88, in {func}\n    raise X(\n'


@pytest.mark.parametrize("line", [
    "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 2.00 GiB",
    "[rank0]: torch.cuda.OutOfMemoryError: an allocator this test made up gave up",
    "OutOfMemoryError: MPS backend out of memory (MPS allocated: 17.00 GB, max allowed: 18.13 GB).",
])
def test_torchs_out_of_memory_error_is_a_gpu_oom_whatever_it_says(bundled: CompiledPack, line: str) -> None:
    assert ("families.torch-out-of-memory", "memory.gpu_oom") in rules_on(bundled, line)


@pytest.mark.parametrize("line", [
    "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
    "java.lang.OutOfMemoryError: Java heap space",
    "except torch.OutOfMemoryError as e: the test's own code",
])
def test_another_out_of_memory_error_is_not_the_gpus(bundled: CompiledPack, line: str) -> None:
    assert "families.torch-out-of-memory" not in {r for r, _ in rules_on(bundled, line)}


def test_the_sentence_rule_speaks_where_it_knows_the_line(bundled: CompiledPack) -> None:
    found = rules_on(bundled, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                              "total capacity of 23.64 GiB of which 0 bytes is free.")
    assert "families.torch-out-of-memory" not in {r for r, _ in found} and found


@pytest.mark.parametrize(("path", "exc", "rule", "cls"), [
    ("vllm/model_executor/models/registry.py", "ValueError", "families.model-registry-refused",
     "model.arch_unsupported"),
    ("sglang/srt/models/registry.py", "TypeError", "families.model-registry-refused", "model.arch_unsupported"),
    ("transformers/configuration_utils.py", "OSError", "families.transformers-checkpoint-unloadable",
     "model.format_mismatch"),
    ("transformers/tokenization_utils_base.py", "OSError", "families.transformers-checkpoint-unloadable",
     "model.format_mismatch"),
])
def test_a_raising_module_with_one_job_gives_its_class(bundled: CompiledPack, path: str, exc: str, rule: str,
                                                        cls: str) -> None:
    text = frame(path) + f"{exc}: a sentence this test made up for {path}"
    assert (rule, cls) in rules_on(bundled, text)
    elsewhere = frame(path.replace("/", "/other_", 1)) + f"{exc}: a sentence this test made up for {path}"
    assert rule not in {r for r, _ in rules_on(bundled, elsewhere)}
    other_type = frame(path) + f"RuntimeError: a sentence this test made up for {path}"
    assert rule not in {r for r, _ in rules_on(bundled, other_type)}
