"""rules/catalogue-map.yaml: the reviewed map of module families to classes, validated as the pack loads and linted."""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_triage.authoring.lint.run import lint_paths
from qwen_triage.rulepack.catalogue import TemplateEntry
from qwen_triage.rulepack.catalogue_map import CatalogueMap, load_catalogue_map, may_diagnose
from qwen_triage.rulepack.errors import RuleFileError
from qwen_triage.rulepack.paths import bundled_rules_dir
from qwen_triage.rulepack.pack import load_classes, load_pack

FAMILY = """families:
  - id: eng-config
    program: eng
    label: configuration validation
    files: ["eng/config/**", "eng/args.py"]
    kind: raise
    exceptions: [ValueError]
    class: {cls}
    severity: {sev}
    why: every error there refuses an argument
"""


def entry(file: str, *, program: str = "eng", kind: str = "raise", exception: str | None = "ValueError",
          level: str | None = None) -> TemplateEntry:
    return TemplateEntry(program=program, releases=["1.0"], file=file, kind=kind, level=level, exception=exception,
                         template="bad value {str}", regex="bad value (?:.+?)", words=["bad", "value"])


def test_the_bundled_map_loads_with_the_pack_and_names_only_known_classes() -> None:
    classes = load_classes(bundled_rules_dir() / "classes.yaml")
    families = load_catalogue_map(bundled_rules_dir() / "catalogue-map.yaml", classes)
    assert {f.id for f in families} >= {"vllm-config-validation", "deepspeed-launcher-args"}
    assert all(f.class_ in classes for f in families)
    pack = load_pack(prebuilt=False)
    assert [f["id"] for f in pack.catalogue_map] == [f.id for f in families]


def test_a_family_holds_the_files_its_globs_name_with_its_exception_only(tmp_path: Path) -> None:
    (tmp_path / "catalogue-map.yaml").write_text(FAMILY.format(cls="config.bad_argument", sev="error"))
    cmap = CatalogueMap(load_catalogue_map(tmp_path / "catalogue-map.yaml"))
    assert cmap.family_of(entry("eng/config/parallel.py")).class_ == "config.bad_argument"
    assert cmap.family_of(entry("eng/config/sub/deep.py")) is not None  # ** crosses components
    assert cmap.family_of(entry("eng/args.py")) is not None
    assert cmap.family_of(entry("eng/args.pyc")) is None  # the whole path, not a prefix
    assert cmap.family_of(entry("eng/model/loader.py")) is None
    assert cmap.family_of(entry("eng/config/parallel.py", exception="RuntimeError")) is None
    assert cmap.family_of(entry("eng/config/parallel.py", program="other")) is None
    assert cmap.family_of(entry("eng/config/parallel.py", kind="log", exception=None, level="error")) is None


def test_warnings_and_notices_never_diagnose() -> None:
    assert may_diagnose(entry("x.py"))
    assert may_diagnose(entry("x.py", kind="log", exception=None, level="error"))
    assert not may_diagnose(entry("x.py", kind="log", exception=None, level="warning"))
    assert not may_diagnose(entry("x.py", kind="printf", exception=None, level="info"))


@pytest.mark.parametrize(("cls", "sev", "says"), [
    ("config.no_such_class", "error", "unknown class 'config.no_such_class'"),
    ("config.bad_argument", "loud", "families.0.severity"),
])
def test_an_unknown_class_or_severity_stops_the_pack_and_is_a_lint_error(tmp_path: Path, cls: str, sev: str,
                                                                         says: str) -> None:
    (tmp_path / "catalogue-map.yaml").write_text(FAMILY.format(cls=cls, sev=sev))
    with pytest.raises(RuleFileError, match=says.replace(".", r"\.")):
        load_pack([tmp_path], prebuilt=False)
    (problem,) = [p for p in lint_paths([tmp_path]) if p.level == "error"]
    assert problem.check == "data-invalid" and says in str(problem)
    assert str(tmp_path / "catalogue-map.yaml") in str(problem)


def test_a_family_names_an_exception_by_its_class_whatever_module_the_catalogue_kept(tmp_path: Path) -> None:
    (tmp_path / "catalogue-map.yaml").write_text(FAMILY.format(cls="config.bad_argument", sev="error"))
    cmap = CatalogueMap(load_catalogue_map(tmp_path / "catalogue-map.yaml"))
    assert cmap.family_of(entry("eng/config/parallel.py", exception="eng.errors.ValueError")) is not None
    assert cmap.family_of(entry("eng/config/parallel.py", exception="eng.errors.ValueErrorish")) is None


# Each floor family of the bundled map (issue 26 §3), on a template the bundled catalogue holds from that part of
# the program, and one it must leave alone (another file, an exception or kind the family left out).
FLOORS = [
    ("llamacpp", "vendor/llama.cpp/common/arg.cpp", "unknown value for --flash-attn", "config.bad_argument"),
    ("llamacpp", "vendor/llama.cpp/common/arg.cpp", "Read {int} bytes from binary file", None),  # printf, no error
    ("llamacpp", "vendor/llama.cpp/ggml/src/ggml-backend-reg.cpp", "ggml_backend_init returned NULL",
     "runtime.backend_mismatch"),
    ("torch", "torch/utils/cpp_extension.py", "CUDA_HOME environment variable is not set", "runtime.backend_mismatch"),
    ("torch", "torch/utils/cpp_extension.py", "sources and objects lists must be the same length", None),
    ("peft", "peft/tuners/tuners_utils.py", "No modules were targeted for adaptation", "config.bad_argument"),
    ("transformers", "transformers/dynamic_module_utils.py", "requires the following packages that were not found",
     "runtime.backend_mismatch"),
    ("ollama", "discover/native_probe_linux.go", "cuDeviceGetCount failed", "runtime.no_gpu_visible"),
    ("ollama", "discover/cpu_linux.go", "empty file content", None),
    ("ray", "ray/_private/utils.py", "Version mismatch: The cluster was started with", "runtime.backend_mismatch"),
    ("ray", "ray/_private/utils.py", "namespace must be None or a string", None),  # another function of the file
    ("sglang", "sglang/srt/configs/model_config.py", "does not match the quantization method", "config.bad_argument"),
    ("llamacpp", "vendor/llama.cpp/src/llama-model-loader.cpp", "key not found in model", "model.gguf_unsupported"),
    ("llamacpp", "vendor/llama.cpp/src/llama-model-loader.cpp", "failed to find a compatible buffer type", None),
]


@pytest.mark.parametrize(("program", "file", "words", "cls"), FLOORS)
def test_the_bundled_floor_families_class_what_their_module_raises(program: str, file: str, words: str,
                                                                   cls: str | None) -> None:
    from qwen_triage.rulepack.catalogue import Catalogue
    from qwen_triage.rulepack.pack import load_classes

    rules = bundled_rules_dir()
    cmap = CatalogueMap(load_catalogue_map(rules / "catalogue-map.yaml", load_classes(rules / "classes.yaml")))
    found = [e for e in Catalogue.load(rules).entries(program)
             if e.file == file and words in e.template and may_diagnose(e)]  # a warning never diagnoses anyway
    assert found, f"the catalogue no longer holds {words!r} in {file}"
    for e in found:
        family = cmap.family_of(e)
        assert (family.class_ if family is not None else None) == cls, e.template


def test_a_family_can_name_the_functions_of_a_file_that_have_the_one_job(tmp_path: Path) -> None:
    (tmp_path / "catalogue-map.yaml").write_text(
        FAMILY.format(cls="config.bad_argument", sev="error").replace("    kind: raise\n",
                                                                      "    kind: raise\n    functions: [verify_*]\n"))
    cmap = CatalogueMap(load_catalogue_map(tmp_path / "catalogue-map.yaml"))
    checked = entry("eng/args.py").model_copy(update={"function": "verify_quantization"})
    assert cmap.family_of(checked) is not None
    assert cmap.family_of(checked.model_copy(update={"function": "load_weights"})) is None
    assert cmap.family_of(entry("eng/args.py")) is None  # no function known: not the family's
