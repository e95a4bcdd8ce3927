"""Code tables (rules/codes/) and raising-site rules: causes read from a code or from where an exception was raised.

A table is upstream's catalogue (validated: a bad entry is refused with its reason); a rule naming a table
classifies a code in every printed form; a `raised:` rule fires on the traceback it names and not on the same
exception raised elsewhere; both are their family's floor, under any sentence rule; the pack cache follows
the tables' contents.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from qwen_triage.engine.correlate import Correlator
from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.finding import Finding
from qwen_triage.engine.matcher import Matcher
from qwen_triage.engine.sources import Block
from qwen_triage.rulepack import pack as pack_module
from qwen_triage.rulepack.paths import code_files
from qwen_triage.rulepack.codes import load_code_table, load_code_tables
from qwen_triage.rulepack.errors import RuleFileError
from qwen_triage.rulepack.pack import load_classes, load_pack
from qwen_triage.rulepack.paths import bundled_rules_dir
from tests.conftest import ROOT

CLASSES = load_classes(bundled_rules_dir() / "classes.yaml")

TABLE_HEAD = """\
table: demo
title: A demo table
source: https://example.org/codes
version: demo 1.0
codes:
"""


def _findings(compiled: CompiledPack, text: str) -> list[Finding]:
    matcher = Matcher(compiled)
    data = text.encode() + b"\n"
    return list(matcher.feed_block(Block(data=data, first_line=1), "<test>")) + list(matcher.finish())


def _classes(compiled: CompiledPack, text: str) -> list[tuple[str, str]]:
    return [(f.rule.rule.id, f.rule.rule.class_) for f in _findings(compiled, text)]


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> CompiledPack:
    return CompiledPack.build(load_pack(), engine="literal", cache_dir=tmp_path_factory.mktemp("hs"))


# --- the tables themselves --------------------------------------------------------------------------------


def test_the_bundled_tables_load_with_their_sources() -> None:
    tables = load_code_tables(code_files(bundled_rules_dir()), CLASSES)
    assert set(tables) == {"cuda_runtime", "cuda_driver", "nccl", "nvml", "errno", "http"}
    runtime = {c.name: c for c in tables["cuda_runtime"].codes}
    assert (runtime["cudaErrorMemoryAllocation"].code, runtime["cudaErrorMemoryAllocation"].text) == (2, "out of memory")
    assert runtime["cudaErrorIllegalAddress"].text == "an illegal memory access was encountered"
    assert runtime["cudaErrorNoDevice"].class_ == "runtime.no_gpu_visible"
    assert {c.name: c.code for c in tables["nccl"].codes}["ncclRemoteError"] == 6
    assert {c.name: c.code for c in tables["errno"].codes}["EADDRINUSE"] == 98
    assert all(t.source.startswith("https://") and t.version for t in tables.values())


@pytest.mark.parametrize(("entries", "reason"), [
    ("  - {code: 1, name: AAA, class: memory.gpu_oom}\n  - {code: 1, name: BBB}\n", "'1' is listed twice"),
    ("  - {code: 1, name: AAA}\n  - {code: 2, name: aaa}\n", "'aaa' is listed twice"),
    ("  - {code: 1, name: AAA, severity: error}\n", "a severity without a class"),
    ("  - {code: 1, name: AAA, text: same, class: memory.gpu_oom}\n  - {code: 2, name: BBB, text: same}\n",
     "the text cannot tell them apart"),
    ("  - {code: 1, name: AAA, text: BBB}\n  - {code: 2, name: BBB}\n", "another code's number or name"),
    ("  - {code: 1, name: AAA, colour: red}\n", "colour"),
    ("  - {code: 1, name: AAA, class: no.such_class}\n", "unknown class 'no.such_class'"),
])
def test_a_bad_table_entry_is_refused_with_its_reason(tmp_path: Path, entries: str, reason: str) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text(TABLE_HEAD + entries)
    with pytest.raises(RuleFileError, match=reason):
        load_code_table(path, CLASSES)


def test_a_table_without_a_cited_url_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text(TABLE_HEAD.replace("https://example.org/codes", "the header") + "  - {code: 1, name: AAA}\n")
    with pytest.raises(RuleFileError, match="is not a URL"):
        load_code_table(path, CLASSES)


def test_a_rule_naming_an_unknown_table_is_refused(tmp_path: Path) -> None:
    (tmp_path / "r.yaml").write_text(CODE_RULE.replace("codes: [cuda_runtime]", "codes: [no_such_table]"))
    with pytest.raises(RuleFileError, match="unknown code table 'no_such_table'"):
        load_pack([tmp_path], bundled=False)


def test_table_files_are_not_read_as_rule_files() -> None:
    assert not any("codes" in p.parts for p in pack_module.rule_files(bundled_rules_dir()))


# --- a rule classifies a code in every printed form ---------------------------------------------------------

CODE_RULE = """\
rules:
  - id: t.cuda
    class: hardware.xid_app
    title: A CUDA call failed
    severity: error
    sources: [any]
    match:
      any:
        - 'TESTCUDA error: (?P<err>[A-Za-z0-9].{0,200})'
    extract: {err: str}
    table: {key: err, codes: [cuda_runtime], otherwise: ignore}
    examples:
      match: ["TESTCUDA error: out of memory"]
      no_match: ["TESTCUDA error: invalid argument"]
"""


@pytest.fixture(scope="module")
def code_rule(tmp_path_factory: pytest.TempPathFactory) -> CompiledPack:
    d = tmp_path_factory.mktemp("code-rule")
    (d / "r.yaml").write_text(CODE_RULE)
    return CompiledPack.build(load_pack([d], bundled=False), engine="literal")


@pytest.mark.parametrize("printed", [
    "TESTCUDA error: 2",                                    # the number
    "TESTCUDA error: cudaErrorMemoryAllocation",            # the name
    "TESTCUDA error: out of memory",                        # the text
    "TESTCUDA error: OUT OF MEMORY",                        # case-folded
    "TESTCUDA error: out of memory CUDA kernel errors might be asynchronously reported",  # more after it
])
def test_a_rule_with_a_table_classifies_every_printed_form(code_rule: CompiledPack, printed: str) -> None:
    (finding,) = _findings(code_rule, printed)
    assert finding.rule.rule.class_ == "memory.gpu_oom"
    assert finding.facts["code_name"] == "cudaErrorMemoryAllocation"


def test_a_code_without_a_class_gives_no_finding(code_rule: CompiledPack) -> None:
    assert _findings(code_rule, "TESTCUDA error: invalid argument") == []
    assert _findings(code_rule, "TESTCUDA error: out of memoryless") == []  # a text is matched to a word's end


@pytest.mark.parametrize(("line", "cls", "code"), [
    ("RuntimeError: CUDA error: the launch timed out and was terminated", "hardware.xid_app", "cudaErrorLaunchTimeout"),
    ("CUDA error 702 at /tmp/llama.cpp/ggml-cuda.cu:6301: the launch timed out", "hardware.xid_app",
     "cudaErrorLaunchTimeout"),
    ("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: CUDA_ERROR_LAUNCH_TIMEOUT", "hardware.xid_app",
     "CUDA_ERROR_LAUNCH_TIMEOUT"),
    ("n1:5:9 [0] misc/cudawrap.cc:37 NCCL WARN Cuda failure 719 'unspecified launch failure'", "hardware.xid_app",
     "cudaErrorLaunchFailure"),
    ("[rank3]: ncclRemoteError: A call failed possibly due to a network error", "nccl.network", "ncclRemoteError"),
    ("OSError: [Errno 28] No space left on device", "node.storage_error", "ENOSPC"),
    # a Go program's write error (ollama pull's own partial blob has a sentence rule: download.incomplete)
    ("Error: write /var/lib/app/cache/chunk-0007.tmp: no space left on device", "node.storage_error", "ENOSPC"),
    ("pynvml.NVMLError_GpuIsLost: GPU is lost", "hardware.xid_fatal", "NVML_ERROR_GPU_IS_LOST"),
    ("requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: https://huggingface.co/o/m/resolve/main/x",
     "download.incomplete", "UNAUTHORIZED"),
])
def test_the_bundled_family_rules_classify_from_the_tables(bundled: CompiledPack, line: str, cls: str,
                                                           code: str) -> None:
    found = [f for f in _findings(bundled, line) if f.rule.rule.id.startswith("families.")]
    assert [(f.rule.rule.class_, f.facts["code_name"]) for f in found] == [(cls, code)]


def test_an_errno_no_row_lists_stays_an_error_no_rule_explains(bundled: CompiledPack) -> None:
    from qwen_triage.engine.unrecognised import Collector

    collector = Collector()
    matcher = Matcher(bundled, collector=collector)
    line = b"urllib3.exceptions.NewConnectionError: Failed to establish a new connection: [Errno 101] Network is unreachable\n"
    assert list(matcher.feed_block(Block(data=line, first_line=1), "<t>")) + list(matcher.finish()) == []
    assert [i.exception for i in collector.ordered()] == ["NewConnectionError"]


# --- the raising site ---------------------------------------------------------------------------------------

# a LLaMA-Factory run under torchrun (shared corpus-2, ft-arch-qwen3-019): transformers without qwen3
QWEN3_TRACE = (
    '[rank3]:   File "/data/user/anaconda3/envs/llama_factory/lib/python3.10/site-packages/transformers/models/auto/'
    'configuration_auto.py", line 1113, in from_pretrained\n'
    '[rank3]:     config_class = CONFIG_MAPPING[config_dict["model_type"]]\n'
    '[rank3]:   File "/data/user/anaconda3/envs/llama_factory/lib/python3.10/site-packages/transformers/models/auto/'
    'configuration_auto.py", line 815, in __getitem__\n'
    "[rank3]:     raise KeyError(key)\n"
    "[rank3]: KeyError: 'qwen3'"
)
ARG_UTILS_TRACE = (
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/engine/arg_utils.py", line 1131, in create_engine_config\n'
    "    raise ValueError(\n"
    "ValueError: an option this test made up is not supported"
)


def test_a_raising_site_rule_fires_on_a_real_traceback(bundled: CompiledPack) -> None:
    assert ("families.transformers-auto-config-model-type", "model.arch_unsupported") in _classes(bundled, QWEN3_TRACE)
    assert ("families.vllm-config-validation", "config.bad_argument") in _classes(bundled, ARG_UTILS_TRACE)


@pytest.mark.parametrize("elsewhere", [
    "site-packages/transformers/tokenization_utils_base.py",  # another module of the same library
    "site-packages/mytool/models/auto/configuration_auto.py",  # the same file name in another library
])
def test_the_same_exception_raised_elsewhere_does_not_fire_it(bundled: CompiledPack, elsewhere: str) -> None:
    trace = QWEN3_TRACE.replace("site-packages/transformers/models/auto/configuration_auto.py", elsewhere)
    assert "families.transformers-auto-config-model-type" not in {r for r, _ in _classes(bundled, trace)}


def test_a_raising_site_reads_an_exception_line_of_any_length(bundled: CompiledPack) -> None:
    """An exception whose text runs past the 400 characters the message fact keeps (lm-eval's registry lists every
    model name it has) is still that exception: its raising site is read, the fact is its first 400 characters."""
    names = ", ".join(f"model-{i}" for i in range(80))
    trace = ARG_UTILS_TRACE.replace("an option this test made up is not supported",
                                    f"an option this test made up; the ones it has: {names}")
    assert len(trace.splitlines()[-1]) > 600
    assert ("families.vllm-config-validation", "config.bad_argument") in _classes(bundled, trace)


def test_a_raising_site_needs_the_traceback(bundled: CompiledPack) -> None:
    assert _classes(bundled, "ValueError: an option this test made up is not supported") == []


def test_raised_without_patterns_needs_the_exception_classes(tmp_path: Path) -> None:
    rule = RAISED_RULES.split("  - id: t.sentence")[0].replace("        exception: [ValueError]\n", "")
    (tmp_path / "r.yaml").write_text(rule)
    with pytest.raises(RuleFileError, match="names the `exception` classes"):
        load_pack([tmp_path], bundled=False)


# --- the structure rule is the floor ------------------------------------------------------------------------

RAISED_RULES = """\
rules:
  - id: t.floor
    class: config.bad_argument
    title: The engine's configuration refused the launch
    severity: error
    sources: [any]
    match:
      raised:
        module: [testengine/config/]
        exception: [ValueError]
    examples:
      match: ["  File \\"/x/site-packages/testengine/config/a.py\\", line 1, in f\\nValueError: bad"]
      no_match: ["ValueError: bad"]
  - id: t.sentence
    class: config.tp_indivisible
    title: TP does not divide the heads
    severity: error
    sources: [any]
    match:
      any: ['TESTHEADS must be divisible by tensor parallel size']
    examples:
      match: ["ValueError: TESTHEADS must be divisible by tensor parallel size"]
      no_match: ["TESTHEADS"]
"""
FRAME = '  File "/x/site-packages/testengine/config/parallel.py", line 9, in __post_init__\n'


@pytest.fixture(scope="module")
def raised_rules(tmp_path_factory: pytest.TempPathFactory) -> CompiledPack:
    d = tmp_path_factory.mktemp("raised")
    (d / "r.yaml").write_text(RAISED_RULES)
    return CompiledPack.build(load_pack([d], bundled=False), engine="literal")


def test_the_sentence_rule_wins_over_the_structure_rule_on_its_line(raised_rules: CompiledPack) -> None:
    assert _classes(raised_rules, FRAME + "ValueError: something else entirely") == [("t.floor", "config.bad_argument")]
    assert _classes(raised_rules, FRAME + "ValueError: TESTHEADS must be divisible by tensor parallel size") == [
        ("t.sentence", "config.tp_indivisible")]


@pytest.mark.parametrize("sentence_severity", ["error", "warning"])
def test_a_floor_diagnosis_ranks_after_a_sentence_diagnosis(tmp_path: Path, sentence_severity: str) -> None:
    (tmp_path / "r.yaml").write_text(RAISED_RULES.replace(
        "title: TP does not divide the heads\n    severity: error", f"title: TP does not divide the heads\n    severity: {sentence_severity}"))
    rules = CompiledPack.build(load_pack([tmp_path], bundled=False), engine="literal")
    text = FRAME + "ValueError: something else entirely\nValueError: TESTHEADS must be divisible by tensor parallel size"
    findings = _findings(rules, text)
    assert [(f.rule.rule.id, f.severity.value) for f in findings] == [("t.floor", "error"), ("t.sentence", sentence_severity)]
    diagnoses = Correlator(CLASSES).extend(findings).diagnoses()
    assert [d.class_ for d in diagnoses] == ["config.tp_indivisible", "config.bad_argument"]


# --- the pack cache follows the tables --------------------------------------------------------------------


def test_the_pack_cache_key_changes_when_a_table_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "rules"
    base.mkdir()
    for name in ("classes.yaml", "stages.yaml"):
        shutil.copy(bundled_rules_dir() / name, base / name)
    shutil.copytree(bundled_rules_dir() / "codes", base / "codes")
    (base / "r.yaml").write_text(CODE_RULE)
    monkeypatch.setattr(pack_module, "bundled_rules_dir", lambda: base)
    cache = tmp_path / "cache"

    def class_of_oom() -> str | None:
        pack = load_pack(cache_dir=cache, prebuilt=False)
        (rule,) = pack.rules
        row = rule.rule.table.row_for("out of memory") if rule.rule.table else None
        return row.class_ if row else None

    assert class_of_oom() == "memory.gpu_oom"
    assert class_of_oom() == "memory.gpu_oom"  # served from the cache
    runtime = base / "codes" / "cuda-runtime.yaml"
    runtime.write_text(runtime.read_text().replace(
        'text: "out of memory", class: memory.gpu_oom}', 'text: "out of memory", class: memory.host_oom}'))
    assert class_of_oom() == "memory.host_oom"
    assert len(list(cache.glob("pack-*.pickle"))) == 2


def test_a_raising_site_rule_is_not_exported_as_a_bare_pattern(tmp_path: Path) -> None:
    """node-problem-detector sees lines, not tracebacks: the rule would fire on every ValueError."""
    from qwen_triage.fleet.npd_export import Unexpressible, rule_patterns

    (tmp_path / "r.yaml").write_text(RAISED_RULES.replace("sources: [any]", "sources: [kernel]", 1))
    floor = load_pack([tmp_path], bundled=False).rule("t.floor")
    assert floor is not None
    with pytest.raises(Unexpressible, match="`raised`"):
        rule_patterns(floor.rule, 4096)


def test_dcgm_xid_rows_resolve_every_xid_as_the_kernel_xid_rule_does() -> None:
    """DCGM's Xid lines carry their own facts and words, so `dcgm.xid-detected` keeps its own rows; the code
    families (which Xid is fatal, application-caused, informational, NVLink) are NVIDIA's one catalogue and must
    stay the kernel's: Xid 109, which `kernel.xid` leaves to `kernel.xid-ctxsw-timeout`, resolves as that rule."""
    rules = {r.rule.id: r.rule for r in load_pack([], bundled=True).rules}

    def resolution(rule_id: str) -> dict[str, tuple[str, str]]:
        rule = rules[rule_id]
        assert rule.table is not None
        return {str(v): (row.class_ or rule.class_, (row.severity or rule.severity).value)
                for row in rule.table.rows for v in row.values}

    kernel, dcgm = resolution("kernel.xid"), resolution("dcgm.xid-detected")
    ctxsw = rules["kernel.xid-ctxsw-timeout"]
    kernel["109"] = (ctxsw.class_, ctxsw.severity.value)
    assert dcgm == kernel
