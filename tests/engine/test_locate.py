"""Lines no rule explains are located in the message catalogue: `printed_by`, and a class where the map gives one."""

from __future__ import annotations

import json
from pathlib import Path

from qwen_triage.engine.scanner import Scanner
from qwen_triage.engine.unrecognised import CUT_TRACEBACK
from qwen_triage.inputs.file import open_source
from qwen_triage.report.markdown import to_markdown
from qwen_triage.report.model import Report, to_json
from qwen_triage.report.text import print_text, text_console
from qwen_triage.rulepack.catalogue import TemplateEntry, write_program
from qwen_triage.rulepack.catalogue_index import CatalogueIndex

CONFIG = TemplateEntry(
    program="vllm", releases=["0.8.5", "0.11.0"], file="vllm/config/scheduler.py", function="SchedulerConfig.verify",
    kind="raise", exception="ValueError", template="Frobnication level ({int}) exceeds the frobnicator's limit {int}.",
    regex=r"Frobnication\s+level\s+\((?:-?\d+)\)\s+exceeds\s+the\s+frobnicator's\s+limit\s+(?:-?\d+)\.",
    words=["Frobnication", "level", "exceeds", "the", "frobnicator's", "limit"])
ELSEWHERE = TemplateEntry(
    program="vllm", releases=["0.11.0"], file="vllm/worker/quux.py", function=None, kind="raise",
    exception="RuntimeError", template="Quux engine stalled in phase {str}",
    regex=r"Quux\s+engine\s+stalled\s+in\s+phase\s+(?:.+?)", words=["Quux", "engine", "stalled", "phase"])
UNREACHABLE = TemplateEntry(
    program="vllm", releases=["0.11.0"], file="vllm/config/network.py", function=None, kind="raise",
    exception="OSError", template="[Errno {int}] Network is unreachable",
    regex=r"\[Errno\s+(?:-?\d+)\]\s+Network\s+is\s+unreachable", words=["Errno", "Network", "unreachable"])
WARNED = TemplateEntry(
    program="vllm", releases=["0.11.0"], file="vllm/config/cache.py", function=None, kind="log", level="warning",
    template="Zorbling buffers are deprecated and ignored", regex=r"Zorbling\s+buffers\s+are\s+deprecated\s+and\s+ignored",
    words=["Zorbling", "buffers", "are", "deprecated", "and", "ignored"])


# wrappers: a template ending in `{any}` prefixes what another call said (its regex stops before the `{any}`)
WRAPPER = TemplateEntry(
    program="vllm", releases=["0.11.0"], file="vllm/engine/stepper.py", function=None, kind="log", level="error",
    template="Engine step failed for request {str}: {any}", regex=r"Engine\s+step\s+failed\s+for\s+request\s+(?:.+?):",
    words=["Engine", "step", "failed", "for", "request"])
WARNED_WRAPPER = TemplateEntry(
    program="vllm", releases=["0.11.0"], file="vllm/engine/stepper.py", function=None, kind="log", level="warning",
    template="Retrying the engine step after: {any}", regex=r"Retrying\s+the\s+engine\s+step\s+after:",
    words=["Retrying", "the", "engine", "step", "after"])


def index(tmp_path: Path) -> CatalogueIndex:
    (tmp_path / "rules" / "catalogue").mkdir(parents=True)
    write_program(tmp_path / "rules" / "catalogue" / "vllm.jsonl.gz",
                  [CONFIG, ELSEWHERE, WARNED, UNREACHABLE, WRAPPER, WARNED_WRAPPER])
    (tmp_path / "rules" / "catalogue" / "manifest.yaml").write_text(
        "builder: test\nbuilt: '2026-12-02'\nprograms:\n  vllm:\n    display: vLLM\n    releases:\n"
        "      - {version: 0.8.5, source: 'pypi:vllm==0.8.5'}\n      - {version: 0.11.0, source: 'pypi:vllm==0.11.0'}\n")
    return CatalogueIndex(tmp_path / "rules")


def scan(compiled, tmp_path: Path, text: str, catalogue: CatalogueIndex) -> Report:  # type: ignore[no-untyped-def]
    log = tmp_path / "x.log"
    log.write_text(text)
    scanner = Scanner(compiled, catalogue=catalogue)
    for _ in scanner.scan_source(open_source(str(log), 0)):
        pass
    return scanner.report()


HEAD = "INFO 11-29 10:00:03 [api_server.py:1043] vLLM API server version 0.8.5\n"


def test_a_line_from_a_mapped_family_becomes_a_diagnosis_because_of_the_catalogue(compiled, tmp_path: Path) -> None:
    cat = index(tmp_path)
    report = scan(compiled, tmp_path, HEAD + "ValueError: Frobnication level (7) exceeds the frobnicator's limit 3.\n",
                  cat)
    (d,) = report.diagnoses
    assert (d.class_, d.severity.value, d.because) == ("config.bad_argument", "error", "catalogue")
    assert d.rule == "catalogue.vllm-config-validation" and d.evidence[0].line == 2
    assert d.printed_by is not None and d.printed_by.file == "vllm/config/scheduler.py"
    assert d.fix and d.fix[0].step  # the class's fix
    assert report.unrecognised == []  # it is the diagnosis now, not an error no rule explains
    data = json.loads(to_json(report))
    assert data["schema_version"] == 3 and data["diagnoses"][0]["because"] == "catalogue"
    assert data["diagnoses"][0]["printed_by"]["releases"] == ["0.8.5", "0.11.0"]
    phrase = "printed by vLLM `vllm/config/scheduler.py` in `SchedulerConfig.verify` (0.8.5–0.11.0), configuration validation"
    assert phrase in to_markdown(report).replace("\\", "")
    out = tmp_path / "out.txt"
    with out.open("w") as fh:
        print_text(report, text_console(fh, terminal=False), boxed=False)
    assert phrase in out.read_text()


def test_an_unmapped_line_is_located_not_diagnosed(compiled, tmp_path: Path) -> None:
    report = scan(compiled, tmp_path, HEAD + "RuntimeError: Quux engine stalled in phase warmup\n", index(tmp_path))
    assert report.diagnoses == []
    (u,) = report.unrecognised
    assert u.printed_by is not None and (u.printed_by.program, u.printed_by.file) == ("vllm", "vllm/worker/quux.py")
    assert u.printed_by.display == "vLLM" and u.printed_by.family is None
    assert "printed by vLLM `vllm/worker/quux.py` (0.11.0)" in to_markdown(report).replace("\\", "")


def test_a_wrapper_template_passes_on_the_message_it_prefixes(compiled, tmp_path: Path) -> None:
    """The lookup finds the wrapper first (its words come first); it has no class, the message it passes on has."""
    line = ("ERROR 11-29 10:00:04 [stepper.py:80] Engine step failed for request cmpl-1: "
            "Frobnication level (7) exceeds the frobnicator's limit 3.\n")
    cat = index(tmp_path)
    report = scan(compiled, tmp_path, HEAD + line, cat)
    (d,) = report.diagnoses
    assert (d.class_, d.because, d.rule) == ("config.bad_argument", "catalogue", "catalogue.vllm-config-validation")
    assert d.printed_by is not None and d.printed_by.file == "vllm/config/scheduler.py"
    # what it wraps has no class: the wrapper is where the line was printed, nothing more
    line = "ERROR 11-29 10:00:04 [stepper.py:80] Engine step failed for request cmpl-1: Quux engine stalled in phase x\n"
    report = scan(compiled, tmp_path, HEAD + line, cat)
    assert report.diagnoses == []
    (u,) = report.unrecognised
    assert u.printed_by is not None and u.printed_by.file == "vllm/engine/stepper.py"


def test_a_warning_wrapper_passes_on_nothing(compiled, tmp_path: Path) -> None:
    line = ("ERROR 11-29 10:00:04 [stepper.py:90] Retrying the engine step after: "
            "Frobnication level (7) exceeds the frobnicator's limit 3.\n")
    report = scan(compiled, tmp_path, HEAD + line, index(tmp_path))
    assert report.diagnoses == []


def test_a_warning_template_is_never_a_diagnosis_even_in_a_mapped_file(compiled, tmp_path: Path) -> None:
    line = "ERROR 11-29 10:00:04 [cache.py:80] Zorbling buffers are deprecated and ignored\n"
    report = scan(compiled, tmp_path, HEAD + line, index(tmp_path))
    assert report.diagnoses == []
    (u,) = report.unrecognised
    assert u.printed_by is not None and u.printed_by.file == "vllm/config/cache.py"


def test_a_scan_with_nothing_unexplained_looks_nothing_up(compiled, tmp_path: Path) -> None:
    cat = index(tmp_path)
    report = scan(compiled, tmp_path, HEAD + "INFO 11-29 10:00:05 [loader.py:458] Loading weights took 4.21 seconds\n",
                  cat)
    assert report.diagnoses == [] and report.unrecognised == []
    assert not cat.loaded and cat.lookups == 0
    # a line a rule explains is not looked up either
    tp = "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (6).\n"
    report = scan(compiled, tmp_path, HEAD + tp, cat)
    assert report.classes() == ["config.tp_indivisible"] and cat.lookups == 0


def test_a_rule_diagnosis_ranks_first_and_is_never_the_catalogue_ones_symptom(compiled, tmp_path: Path) -> None:
    tp = "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (6).\n"
    frob = "ValueError: Frobnication level (7) exceeds the frobnicator's limit 3.\n"
    report = scan(compiled, tmp_path, HEAD + frob + tp, index(tmp_path))
    assert report.classes() == ["config.tp_indivisible", "config.bad_argument"]
    assert [d.because for d in report.diagnoses] == [None, "catalogue"]


def test_a_line_a_rule_reads_and_declines_is_located_never_classed(compiled, tmp_path: Path, monkeypatch) -> None:
    # families.errno-code reads `[Errno N] …` and leaves out the codes its table does not list: the pack has
    # read the line and declined it, so a family that would class it (here: a test family over the file) does not
    from qwen_triage.engine import locate as locate_mod

    family = {"id": "test-network", "program": "vllm", "label": "network", "files": ["vllm/config/network.py"],
              "class": "config.bad_argument", "severity": "error", "exceptions": [], "kind": None, "levels": []}
    monkeypatch.setattr(compiled.pack, "catalogue_map", [*compiled.pack.catalogue_map, family])
    line = "OSError: [Errno 101] Network is unreachable"
    assert locate_mod.read_by_rule(line, compiled)
    report = scan(compiled, tmp_path, HEAD + line + "\n", index(tmp_path))
    assert report.diagnoses == []
    (u,) = report.unrecognised
    assert u.printed_by is not None and u.printed_by.family == "network"


def test_one_part_of_a_rules_all_set_has_not_read_the_line(compiled, tmp_path: Path) -> None:
    """hub.too-many-error-responses reads `Too many 429 error responses` beside a line naming the hub: the hub's
    name alone on a line is its context part, not its reading, so the catalogue still classes that line."""
    from qwen_triage.engine import locate as locate_mod

    assert locate_mod.read_by_rule("Too many 429 error responses from huggingface.co", compiled)
    line = "ValueError: Frobnication level (7) exceeds the frobnicator's limit 3. (huggingface)"
    assert not locate_mod.read_by_rule(line, compiled)
    report = scan(compiled, tmp_path, HEAD + line + "\n", index(tmp_path))
    assert [(d.class_, d.because) for d in report.diagnoses] == [("config.bad_argument", "catalogue")]


def test_a_placed_line_of_a_class_a_rule_diagnosed_is_more_evidence_of_that_diagnosis(compiled, tmp_path: Path) -> None:
    flags = "ValueError: You can only use one of `--cpu`, `--multi_gpu`, `--tpu`, `--use_deepspeed`, `--use_fsdp` at a time.\n"
    frob = "ValueError: Frobnication level (7) exceeds the frobnicator's limit 3.\n"
    report = scan(compiled, tmp_path, HEAD + flags + frob, index(tmp_path))
    (d,) = report.diagnoses  # one failure class, one diagnosis: the rule's
    assert (d.class_, d.rule, d.because, d.printed_by) == ("config.bad_argument", "accelerate.launch-flags-conflict",
                                                           None, None)
    assert [e.line for e in d.evidence] == [2, 3] and "catalogue" not in d.summary
    assert report.unrecognised == []


def test_an_exception_no_template_holds_is_placed_by_the_frame_that_raised_it(compiled, tmp_path: Path) -> None:
    """A bare AssertionError, an OS error's words: no template, but the traceback's innermost frame is a file of a
    catalogue program; placed there, without a template, never classed. A frame in no program's file places nothing."""
    def traceback(path: str, last: str) -> str:
        return (HEAD + "Traceback (most recent call last):\n"
                f'  File "/venv/lib/python3.12/site-packages/{path}", line 12, in verify\n'
                "    assert self.level <= limit\n" + last + "\n")

    cat = index(tmp_path)
    report = scan(compiled, tmp_path, traceback("vllm/worker/quux.py", "AssertionError"), cat)
    assert report.diagnoses == []
    (u,) = report.unrecognised
    assert u.printed_by is not None and u.printed_by.template is None and u.printed_by.family is None
    assert (u.printed_by.program, u.printed_by.file, u.printed_by.releases) == ("vllm", "vllm/worker/quux.py", ["0.11.0"])
    assert "raised in vLLM `vllm/worker/quux.py` (0.11.0)" in to_markdown(report).replace("\\", "")
    # an assert of vLLM's configuration classes is a raising-site rule's (families.vllm-config-validation), not a place
    report = scan(compiled, tmp_path, traceback("vllm/config/scheduler.py", "AssertionError"), cat)
    assert [d.class_ for d in report.diagnoses] == ["config.bad_argument"] and report.unrecognised == []
    report = scan(compiled, tmp_path, traceback("quuxlib/scheduler.py", "AssertionError"), cat)
    assert [u.printed_by for u in report.unrecognised] == [None]
    # only a whole file of the program: a bare `scheduler.py` of the user's own is nobody's
    assert cat.file_of("/home/user/scheduler.py") is None


def test_a_traceback_the_log_cuts_before_its_exception_is_placed_by_its_innermost_frame(compiled, tmp_path: Path) -> None:
    """A log pasted from the middle of a traceback to the middle of it (no header, no exception): its first line of
    code stands for it, listed as a traceback the input ends inside, and the innermost frame shown is where it was
    raised; a frame outside the catalogue places nothing."""
    def cut(inner: str) -> str:
        prefix = "(EngineCore pid=86) ERROR 06-01 13:18:12 [core.py:1341] "
        lines = ['  File "/usr/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 276, in add_lora',
                 "    return self.model_executor.add_lora(lora_request)",
                 "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
                 f'  File "/usr/lib/python3.12/dist-packages/{inner}", line 282, in load',
                 "    self._check_limits(",
                 f'  File "/usr/lib/python3.12/dist-packages/{inner}", line 155, in _check_limits']
        return HEAD + "".join(prefix + line + "\n" for line in lines)

    cat = index(tmp_path)
    report = scan(compiled, tmp_path, cut("vllm/worker/quux.py"), cat)
    assert report.diagnoses == []
    (u,) = report.unrecognised
    assert u.kind == "error" and u.template == CUT_TRACEBACK and "return self.model_executor.add_lora" in u.evidence.text
    assert u.printed_by is not None and u.printed_by.template is None
    assert (u.printed_by.program, u.printed_by.file) == ("vllm", "vllm/worker/quux.py")
    report = scan(compiled, tmp_path, cut("quuxlib/loader.py"), cat)
    assert [u.printed_by for u in report.unrecognised] == [None]


def test_a_kernel_message_is_placed_by_the_function_and_module_its_drm_prefix_names(tmp_path: Path) -> None:
    """`[drm:nv_drm_load [nvidia_drm]] *ERROR* …` names the module (a folder of the driver's source) and the
    function that printed it: a short template of that module or function places the line; the same words
    without the prefix say too little to place it."""
    drm = TemplateEntry(
        program="nvidia_driver", releases=["550.54.14"], file="kernel-open/nvidia-drm/nvidia-drm-drv.c",
        function="nv_drm_frob_load", kind="printf", level="error", template="Failed to frob the KapiWidget",
        regex=r"Failed\s+to\s+frob\s+the\s+KapiWidget", words=["Failed", "frob", "the", "KapiWidget"])
    (tmp_path / "rules" / "catalogue").mkdir(parents=True)
    write_program(tmp_path / "rules" / "catalogue" / "nvidia_driver.jsonl.gz", [drm])
    cat = CatalogueIndex(tmp_path / "rules")
    from qwen_triage.engine.locate import hints_of
    from qwen_triage.engine.normalize import normalize
    from qwen_triage.engine.unrecognised import Item

    def placed(line: str) -> bool:
        rec = normalize(line)
        return cat.lookup(rec.message, hints_of(Item("t", "error", 1, rec))) is not None

    head = "[   24.530116] [drm:nv_drm_other_load [nvidia_drm]] *ERROR* [nvidia-drm] [GPU ID 0x00000700] "
    assert placed(head + "Failed to frob the KapiWidget")  # by its module
    assert placed("[drm ERROR :nv_drm_frob_load] [nvidia-drm] [GPU ID 0x00000100] Failed to frob the KapiWidget")
    assert not placed("[   24.530116] [drm:amdgpu_load [amdgpu]] *ERROR* [GPU ID 0x00000700] card 0 Failed to "
                      "frob the KapiWidget")


def test_an_exception_class_only_one_program_raises_names_that_program(tmp_path: Path) -> None:
    """`GatedRepoError: 401 Client Error. (Request ID: …)`: the line names no module, and `Client Error` is too short
    to place a line by itself; the class is raised by one program of the catalogue only, so the line is that
    program's. A builtin class (`ValueError`) names nobody."""
    def entry(exception: str) -> TemplateEntry:
        return TemplateEntry(program="hubby", releases=["1.0"], file="hubby/utils/_http.py", function="raise_for",
                             kind="raise", exception=exception, template="{int} Client Error.",
                             regex=r"(?:-?\d+)\s+Client\s+Error\.", words=["Client", "Error"])

    (tmp_path / "rules" / "catalogue").mkdir(parents=True)
    write_program(tmp_path / "rules" / "catalogue" / "hubby.jsonl.gz",
                  [entry("FrobbedRepoError"), entry("ValueError"), entry("hubby.errors.ForkedRepoError")])
    # another program re-raises hubby's class: the module that defines it still names hubby
    write_program(tmp_path / "rules" / "catalogue" / "acc.jsonl.gz", [entry("hubby.errors.ForkedRepoError").model_copy(
        update={"program": "acc", "file": "acc/utils/hub.py", "template": "{int} Client Error: acc.",
                "regex": r"(?:-?\d+)\s+Client\s+Error:\s+acc\."})])
    cat = CatalogueIndex(tmp_path / "rules")
    found = cat.lookup("FrobbedRepoError: 401 Client Error. (Request ID: Root=1-66389f5d)")
    assert found is not None and found.program == "hubby" and found.exception == "FrobbedRepoError"
    assert cat.lookup("ValueError: 401 Client Error. (Request ID: Root=1-66389f5d)") is None
    found = cat.lookup("ForkedRepoError: 401 Client Error. (Request ID: Root=1-66389f5d)")
    assert found is not None and found.program == "hubby"


def test_a_line_that_says_only_the_first_line_of_a_longer_message_is_located_never_classed(compiled, tmp_path: Path) -> None:
    """`GatedRepoError: 401 Client Error.` is the first line of several messages (gated repo, entry not found,
    revision not found) that mean different things: placed, but the class of whichever sibling answered is not the
    line's. The whole message, on one line, is classed."""
    entry = TemplateEntry(
        program="vllm", releases=["0.11.0"], file="vllm/worker/quux.py", function=None, kind="raise",
        exception="QuuxRepoError", template="{any} Quux refusal.\n\nZorble widget unfrobbed at {str}.",
        regex=r"(?:.+?)\s+Quux\s+refusal\.", words=["Quux", "refusal", "Zorble", "widget", "unfrobbed"],
        **{"class": "config.bad_argument", "class_from": "rule"})
    (tmp_path / "rules" / "catalogue").mkdir(parents=True)
    write_program(tmp_path / "rules" / "catalogue" / "vllm.jsonl.gz", [entry])
    cat = CatalogueIndex(tmp_path / "rules")
    report = scan(compiled, tmp_path, HEAD + "QuuxRepoError: 401 Quux refusal. (Request ID: Root=1-66389f5d)\n", cat)
    assert report.diagnoses == []
    (u,) = report.unrecognised
    assert u.printed_by is not None and u.printed_by.file == "vllm/worker/quux.py"
    report = scan(compiled, tmp_path, HEAD + "QuuxRepoError: 401 Quux refusal. Zorble widget unfrobbed at http://x/y.\n", cat)
    assert [(d.class_, d.because) for d in report.diagnoses] == [("config.bad_argument", "catalogue")]


def test_an_error_whose_words_are_a_code_tables_text_is_placed_by_that_table(compiled, tmp_path: Path) -> None:
    """`RuntimeError: invalid argument`, torch's `CUDA error: driver shutting down`: the words are the CUDA runtime's
    own text for a status (rules/codes/), which no program's template holds. Placed by the table, exactly and
    with its case (strerror's `Invalid argument`, NVML's `Invalid Argument` are other libraries'), never
    classed; one word of text is not enough to say whose it is."""
    import shutil

    from qwen_triage.rulepack.paths import bundled_rules_dir

    cat = index(tmp_path)
    shutil.copytree(bundled_rules_dir() / "codes", tmp_path / "rules" / "codes")
    prefix = "(VllmWorker rank=1 pid=141) ERROR 04-22 03:11:22 [multiproc_executor.py:470] "
    report = scan(compiled, tmp_path, HEAD + prefix + "RuntimeError: CUDA error: driver shutting down\n", cat)
    assert report.diagnoses == []
    (u,) = report.unrecognised
    assert u.printed_by is not None
    assert (u.printed_by.program, u.printed_by.file, u.printed_by.template) == (
        "cuda_runtime", "cudaErrorCudartUnloading", "driver shutting down")
    assert ("printed by CUDA runtime error (cudaError_t) `cudaErrorCudartUnloading`, the library's text for code 4"
            in to_markdown(report).replace("\\", ""))
    report = scan(compiled, tmp_path, HEAD + "RuntimeError: invalid argument\n", cat)
    assert [u.printed_by.file for u in report.unrecognised if u.printed_by] == ["cudaErrorInvalidValue"]
    for other in ("RuntimeError: INVALID argument", "RuntimeError: driver shutting down soon", "RuntimeError: Timeout"):
        report = scan(compiled, tmp_path, HEAD + other + "\n", cat)
        assert [u.printed_by for u in report.unrecognised] == [None], other
    assert cat.code_of("driver shutting down") is not None and cat.code_of("Driver shutting down") is None


def test_the_code_texts_are_read_once_and_kept_in_the_cache(tmp_path: Path, monkeypatch) -> None:
    import shutil

    from qwen_triage.rulepack import codes
    from qwen_triage.rulepack.paths import bundled_rules_dir

    shutil.copytree(bundled_rules_dir() / "codes", tmp_path / "rules" / "codes")
    first = CatalogueIndex(tmp_path / "rules", cache_dir=tmp_path / "cache")
    assert first.code_of("invalid argument").name == "cudaErrorInvalidValue"
    assert [p.name[:6] for p in (tmp_path / "cache").rglob("codes-*")] == ["codes-"]

    def unread(_rules_dir: Path) -> dict:
        raise AssertionError("the tables were parsed again")

    monkeypatch.setattr(codes, "printed_codes", unread)
    second = CatalogueIndex(tmp_path / "rules", cache_dir=tmp_path / "cache")
    assert second.code_of("CUDA_ERROR_OUT_OF_MEMORY").table == "cuda_driver"
    # a changed table is another key: read again
    table = tmp_path / "rules" / "codes" / "cuda-runtime.yaml"
    table.write_text(table.read_text().replace('text: "driver shutting down"', 'text: "driver shutting down now"'))
    monkeypatch.undo()
    third = CatalogueIndex(tmp_path / "rules", cache_dir=tmp_path / "cache")
    assert third.code_of("driver shutting down") is None and third.code_of("driver shutting down now").code == 4


def test_an_exception_raised_in_code_outside_any_installed_package_is_placed_there(compiled, tmp_path: Path) -> None:
    """A traceback whose innermost frame is the user's own script (or a source checkout): no catalogue holds its
    words, and where it was raised is the answer; the file's name only, never its folders. A frame in an installed
    package no program of the catalogue is, or in Python's own library, places nothing."""
    def traceback(path: str) -> str:
        return (HEAD + "Traceback (most recent call last):\n"
                f'  File "{path}", line 273, in get_frob\n'
                "    wait_for_frobnicator()\n"
                "RuntimeError: frobnicator did not answer within 20 s\n")

    cat = index(tmp_path)
    report = scan(compiled, tmp_path, traceback("/home/alice/work/collect_frob.py"), cat)
    assert report.diagnoses == []
    (u,) = report.unrecognised
    assert u.printed_by is not None and u.printed_by.template is None
    assert (u.printed_by.program, u.printed_by.file, u.printed_by.releases) == ("script", "collect_frob.py", [])
    text = to_markdown(report).replace("\\", "")
    assert "raised in code outside any installed package `collect_frob.py`" in text and "alice" not in text
    for path in ("/venv/lib/python3.12/site-packages/quuxlib/frob.py", "/usr/lib/python3.11/json/decoder.py",
                 "C:\\Python311\\Lib\\site-packages\\quuxlib\\frob.py", "<frozen importlib._bootstrap>"):
        report = scan(compiled, tmp_path, traceback(path), cat)
        assert [u.printed_by for u in report.unrecognised] == [None], path
