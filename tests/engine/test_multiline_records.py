"""Multi-line records: wrapped NVRM sentences, AER and OOM reports, Go panics, who raised a traceback, Triton's
status cells cut over table rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.multiline import FAMILIES
from qwen_triage.engine.scanner import Scanner
from qwen_triage.engine.sources import Block
from qwen_triage.inputs.source import Source
from qwen_triage.engine.scanner import scan_paths
from qwen_triage.rulepack.pack import load_pack

RULES = """\
rules:
  - id: t.gsp
    class: runtime.backend_mismatch
    title: open kernel module refuses a GPU without GSP
    severity: error
    sources: [kernel]
    match:
      any: ['is not supported by open nvidia\\.ko because it does not include the required GPU System Processor']
      multiline: true
    examples:
      match: ["NVRM: installed in this system is not supported by open nvidia.ko because it does not include the required GPU System Processor (GSP)."]
      no_match: ["NVRM: installed in this system is supported"]
  - id: t.aer-device
    class: hardware.pcie_error
    title: uncorrectable AER with its device id
    severity: error
    sources: [kernel]
    match:
      any: ['PCIe Bus Error: severity=Uncorrected \\(Fatal\\).{0,200}device \\[(?P<vendor>10de):(?P<device>[0-9a-f]{4})\\]']
      multiline: true
    extract: {vendor: str, device: str}
    examples:
      match: ["PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID) device [10de:2330] error status/mask=00040000/00000000"]
      no_match: ["PCIe Bus Error: severity=Corrected"]
  - id: t.oom-task
    class: memory.host_oom
    title: the OOM killer, with the task it chose
    severity: error
    sources: [kernel]
    match:
      any: ['invoked oom-killer: .{0,2000}oom-kill:constraint=\\w+.{0,200}task=(?P<task>[^,\\s]{1,40})']
      multiline: true
    extract: {task: str}
    examples:
      match: ["python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0 oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),task=python3,pid=4242,uid=0"]
      no_match: ["python3 invoked oom-killer: gfp_mask=0x0"]
  - id: t.vllm-raised
    class: config.bad_argument
    title: a ValueError raised inside vLLM
    severity: error
    sources: [vllm]
    match:
      any: ['^ValueError: ']
      where: {raised_by: vllm}
    examples:
      match: ["ValueError: bad"]
      no_match: ["TypeError: bad"]
  - id: t.triton-key
    class: runtime.backend_mismatch
    title: the TensorRT-LLM backend misses a key of the engine's config
    severity: error
    sources: [any]
    match:
      any: ['modelInstanceState: \\[json\\.exception\\.out_of_range\\.403\\] key ''(?P<key>\\w+)'' not found']
    extract: {key: str}
    examples:
      match: ["modelInstanceState: [json.exception.out_of_range.403] key 'num_layers' not found"]
      no_match: ["modelInstanceState: [json.exception.parse_error.101] parse error"]
  - id: t.triton-words
    class: model.file_missing
    title: a status whose words the table cut at a space
    severity: error
    sources: [any]
    match:
      any: ['UNAVAILABLE: Not found: unable to load model file (?P<file>[\\w.]+) +\\|$']
    extract: {file: str}
    examples:
      match: ["UNAVAILABLE: Not found: unable to load model file model.plan  |"]
      no_match: ["UNAVAILABLE: Not found: unable to loadmodel file model.plan"]
"""

NVRM = """\
[  12.000001] nvidia: loading out-of-tree module taints kernel.
[  12.100000] NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1eb8)
[  12.100001] NVRM: installed in this system is not supported by open
[  12.100002] NVRM: nvidia.ko because it does not include the required GPU
[  12.100003] NVRM: System Processor (GSP).
[  12.100004] NVRM: Please see the 'Open Linux Kernel Modules' and 'GSP
[  12.100005] NVRM: Firmware' sections in the driver README, available on
[  12.100006] NVRM: the Linux graphics driver download page at
[  12.100007] NVRM: www.nvidia.com.
[  12.200000] nvidia: probe of 0000:01:00.0 failed with error -1
"""

AER = """\
[ 100.1] pcieport 0000:00:03.1: AER: Multiple Uncorrected (Fatal) error received: 0000:41:00.0
[ 100.2] nvidia 0000:41:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)
[ 100.3] nvidia 0000:41:00.0:   device [10de:2330] error status/mask=00040000/00000000
[ 100.4] nvidia 0000:41:00.0:    [18] MalfTLP                (First)
[ 100.5] eth0: link up
"""

OOM = "[ 5.0] python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0\n" + "".join(
    f"[ 5.{i}] Node 0 Normal free:{i}kB min:1kB\n" for i in range(1, 30)
) + (
    "[ 5.9] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task=python3,pid=4242,uid=0\n"
    "[ 5.99] Out of memory: Killed process 4242 (python3) total-vm:100kB, anon-rss:90kB\n"
)

TRACEBACK = """\
Traceback (most recent call last):
  File "/opt/venv/lib/python3.11/site-packages/vllm/engine/arg_utils.py", line 12, in create
    raise ValueError("max_model_len is too large")
ValueError: max_model_len is too large
Traceback (most recent call last):
  File "/app/launch.py", line 3, in main
    raise ValueError("bad flag")
ValueError: bad flag
"""

GO_PANIC = """\
panic: runtime error: index out of range [3] with length 3

goroutine 1 [running]:
github.com/ollama/ollama/llm.(*gguf).Decode(0xc000)
	/go/src/github.com/ollama/ollama/llm/gguf.go:120 +0x1f
main.main()
"""


# Triton's model status table (server.cc) cuts a long status at its column's width, mid-word (table_printer.cc)
TRITON_TABLE = """\
I0524 03:33:13.130393 2517 server.cc:677]
+------------------+---------+----------------------------------------------+
| Model            | Version | Status                                       |
+------------------+---------+----------------------------------------------+
| postprocessing   | 1       | READY                                        |
| tensorrt_llm     | 1       | UNAVAILABLE: Internal: unexpected error when |
|                  |         |  creating modelInstanceState: [json.exceptio |
|                  |         | n.out_of_range.403] key 'num_layers' not fou |
|                  |         | nd                                           |
| tensorrt_llm_bls | 1       | READY                                        |
+------------------+---------+----------------------------------------------+
"""

# a cut that falls just after a space: the piece keeps it, the cell's own padding and border do not join in
TRITON_AT_SPACE = """\
| resnet  | 1       | UNAVAILABLE: Not found: unable to  |
|         |         | load model file model.plan         |
"""


@pytest.fixture(scope="module", params=["literal", "hyperscan"])
def pack(request, tmp_path_factory) -> CompiledPack:  # type: ignore[no-untyped-def]
    if request.param == "hyperscan":
        pytest.importorskip("hyperscan")
    d = tmp_path_factory.mktemp("rules")
    (d / "t.yaml").write_text(RULES)
    return CompiledPack.build(load_pack([d], bundled=False), engine=request.param, cache_dir=tmp_path_factory.mktemp("c"))


def scan(tmp_path: Path, pack: CompiledPack, text: str):  # type: ignore[no-untyped-def]
    p = tmp_path / "x.log"
    p.write_text(text)
    return scan_paths([str(p)], pack)


def test_a_sentence_wrapped_over_nvrm_lines(tmp_path: Path, pack: CompiledPack) -> None:
    (d,) = scan(tmp_path, pack, NVRM).diagnoses
    assert d.rule == "t.gsp"
    assert d.evidence[0].line == 3  # the line of the message the rule keys on, as read
    assert d.evidence[0].text.endswith("not supported by open")


def test_aer_report_joins_its_device_lines(tmp_path: Path, pack: CompiledPack) -> None:
    (d,) = scan(tmp_path, pack, AER).diagnoses
    assert d.facts == {"vendor": "10de", "device": "2330"}
    assert d.evidence[0].line == 2


def test_oom_report_reaches_the_task_line(tmp_path: Path, pack: CompiledPack) -> None:
    (d,) = scan(tmp_path, pack, OOM).diagnoses
    assert d.facts == {"task": "python3"}
    assert d.evidence[0].line == 31


def test_traceback_knows_which_library_raised(tmp_path: Path, pack: CompiledPack) -> None:
    report = scan(tmp_path, pack, TRACEBACK)
    (d,) = report.diagnoses
    assert d.rule == "t.vllm-raised" and d.count == 1 and d.evidence[0].line == 4
    assert [(u.raised_by, u.evidence.line) for u in report.unrecognised] == [("launch", 8)]


def test_go_panic_names_its_package(tmp_path: Path, pack: CompiledPack) -> None:
    report = scan(tmp_path, pack, GO_PANIC)
    assert [(u.raised_by, u.evidence.line) for u in report.unrecognised] == [("github.com/ollama/ollama/llm", 1)]


def test_a_triton_status_cut_mid_word_reads_as_one_message(tmp_path: Path, pack: CompiledPack) -> None:
    """No raw row holds the rule's words whole (`[json.exceptio` / `n.out_of_range`, `not fou` / `nd`): the
    rows join with nothing between, and the joined cell goes through the prefilter again."""
    (d,) = scan(tmp_path, pack, TRITON_TABLE).diagnoses
    assert d.rule == "t.triton-key" and d.facts == {"key": "num_layers"}
    assert d.evidence[0].line == 6  # the model's row, as read


def test_a_triton_cell_cut_after_a_space_keeps_it(tmp_path: Path, pack: CompiledPack) -> None:
    (d,) = scan(tmp_path, pack, TRITON_AT_SPACE).diagnoses
    assert d.rule == "t.triton-words" and d.facts == {"file": "model.plan"}


def test_a_ready_table_and_other_pipes_join_nothing(tmp_path: Path, pack: CompiledPack) -> None:
    """Rows of loaded models, nvidia-smi's table and a compose service's prefix start no record."""
    healthy = TRITON_TABLE.replace("UNAVAILABLE: Internal: unexpected error when", "READY" + " " * 39)
    smi = ("|   0  NVIDIA A100-SXM4-80GB     On  |   00000000:07:00.0 Off |                    0 |\n"
           "|                                     |                        |  key 'num_layers' not found |\n")
    for text in (healthy, smi):
        assert scan(tmp_path, pack, text).diagnoses == []


def fed_line_by_line(pack: CompiledPack, lines: list[str]) -> tuple[Scanner, Source, list]:  # type: ignore[type-arg]
    """A live scanner given ``lines`` one block each, and what it found on them."""
    scanner = Scanner(pack)
    src = Source(name="<child>", kind="live")
    scanner.add_source(src)
    found = []
    for i, line in enumerate(lines):
        found += list(scanner.feed(src, Block(data=line.encode(), first_line=i + 1, counted=1)))
    return scanner, src, found


def test_a_triton_table_fed_row_by_row_completes_when_it_ends(pack: CompiledPack) -> None:
    scanner, _, found = fed_line_by_line(pack, TRITON_TABLE.splitlines(keepends=True))
    found += list(scanner.release_held())
    assert [(f.rule.rule.id, f.facts) for f in found] == [("t.triton-key", {"key": "num_layers"})]


def test_live_record_completes_on_the_next_block_or_when_quiet(pack: CompiledPack) -> None:
    lines = NVRM.splitlines(keepends=True)
    scanner, src, found = fed_line_by_line(pack, lines[:5])  # lines 1-5 arrive one by one: the message may go on
    assert found == []
    # line 6 starts a new sentence: the record is complete
    found += list(scanner.feed(src, Block(data=lines[5].encode(), first_line=6, counted=1)))
    assert [f.rule.rule.id for f in found] == ["t.gsp"]
    # the same five lines, then silence: released when the input goes quiet
    quiet = Scanner(pack)
    quiet.add_source(src)
    for i in range(0, 5):
        assert list(quiet.feed(src, Block(data=lines[i].encode(), first_line=i + 1, counted=1))) == []
    assert [f.rule.rule.id for f in quiet.release_held()] == ["t.gsp"]
    # a record whose continuation never comes is released when the input goes quiet
    scanner2 = Scanner(pack)
    scanner2.add_source(src)
    assert list(scanner2.feed(src, Block(data=b"".join(x.encode() for x in lines[2:4]), first_line=3, counted=2))) == []
    assert list(scanner2.release_held()) == []  # incomplete sentence: no match, but nothing held back
    assert scanner2.matcher._held == {}


def test_a_brief_pause_completes_a_kernel_message_but_not_a_go_panic(pack: CompiledPack, compiled) -> None:
    """A kernel message's lines are one write of the kernel's: a brief pause after them completes the record
    (live latency, issue 31). A Go panic and a kernel OOM report are many writes and may pause inside: only the
    long quiet period completes them (here a kernel OOM report's first line, which the bundled pack reads)."""
    lines = NVRM.splitlines(keepends=True)
    src = Source(name="<child>", kind="live")
    kernel = Scanner(pack)
    kernel.add_source(src)
    for i in range(0, 5):
        assert list(kernel.feed(src, Block(data=lines[i].encode(), first_line=i + 1, counted=1))) == []
    assert [f.rule.rule.id for f in kernel.release_held(prompt_only=True)] == ["t.gsp"]
    assert kernel.matcher._held == {}
    oom = Scanner(compiled)
    oom.add_source(src)
    first = OOM.splitlines(keepends=True)[0]
    assert list(oom.feed(src, Block(data=first.encode(), first_line=1, counted=1))) == []
    assert oom.matcher._held, "its first line waits for the rest of the report"
    assert list(oom.release_held(prompt_only=True)) == [] and oom.matcher._held
    list(oom.release_held())
    assert oom.matcher._held == {}
    # (and a Python exception line with its text on the next line: the traceback is printed in one go; and Triton's
    # status table, one string written at once)
    assert [f.prompt for f in FAMILIES] == [f.name in ("nvrm", "aer", "exception_text", "triton_table")
                                            for f in FAMILIES]


BAD_READ = ("[  135.63230{i}] NVRM: GPU4 gpuHandleSanityCheckRegReadError_GH100: Possible bad register read: "
            "addr: 0x1100{i}4,  regvalue: 0xbadf2100,  error code: Unknown SYS_PRI_ERROR_CODE\n")


@pytest.mark.parametrize("lines, fires", [(10, True), (3, False)])
def test_nv_printf_lines_are_one_message_each(tmp_path: Path, compiled: CompiledPack, lines: int,
                                              fires: bool) -> None:
    """An NVRM line naming its GPU and HAL function starts a message even where the line before ends without a stop.

    NV_PRINTF's messages carry no full stop, so consecutive ones were joined as one wrapped sentence of up to nine
    lines and a storm rule counted records instead of reads: ten bad register reads are ten records (a storm), three
    are a probe of an absent register (none)."""
    report = scan(tmp_path, compiled, "".join(BAD_READ.format(i=i) for i in range(lines)))
    storms = [d for d in report.diagnoses if d.rule == "kernel.nvrm-bad-register-read-storm"]
    assert bool(storms) is fires
    if fires:
        assert storms[0].facts["gpu"] == "4"
