"""OpenVINO (``pip install openvino-genai optimum-intel[openvino]``) as users run LLMs on Intel hardware: the model
exported to OpenVINO IR with ``optimum-cli export openvino`` (NNCF compressing the weights), then served by
OpenVINO GenAI's ``LLMPipeline`` or optimum-intel's ``OVModelForCausalLM``. Healthy: export and generate on the CPU.
The failures of its issue trackers: the "GPU" or "NPU" device on a host without Intel's GPU compute runtime (the
OpenCL loader) or NPU driver, a device name OpenVINO does not have ("CUDA"), the Hugging Face checkpoint handed to
the pipeline before any export, an export without the converted tokenizer, an IR whose weights file was cut short
by a copy, and the export's own refusals: an architecture it has no export config for, a local folder without
``--task``, an int4 group size the layers' channels do not divide.

The model is the tiny random Qwen2 of ``make_tiny_qwen.py`` (an OLMoE of the same size for the unsupported
architecture); every case runs offline. pip's torchvision beside the CPU torch is built for CUDA and breaks
transformers' imports; the release removes it, as the CPU hosts users run this on have none.
"""

from case import BUILD_TINY, DROP_TORCHVISION, MAKE_TINY, OFFLINE_ENV, Case, Program, Release

# The user's scripts: OpenVINO GenAI (argv: model dir, device) and optimum-intel (argv: model dir, device).
GENAI = '''\
import sys
import openvino_genai as ov_genai

pipe = ov_genai.LLMPipeline(sys.argv[1], sys.argv[2])
print(pipe.generate("The capital of France is", max_new_tokens=8))
'''

OPTIMUM = '''\
import sys
from optimum.intel import OVModelForCausalLM
from transformers import AutoTokenizer

model = OVModelForCausalLM.from_pretrained(sys.argv[1], device=sys.argv[2])
tok = AutoTokenizer.from_pretrained(sys.argv[1])
print(tok.decode(model.generate(**tok("The capital of France is", return_tensors="pt"), max_new_tokens=8)[0]))
'''

# An OLMoE as small as the tiny Qwen2 (transformers knows it, optimum-intel has no OpenVINO export config for it).
MAKE_OLMOE = '''\
import shutil, sys
from transformers import AutoConfig, AutoModelForCausalLM

cfg = AutoConfig.for_model("olmoe", vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2)
AutoModelForCausalLM.from_config(cfg).save_pretrained(sys.argv[1])
for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(f"{sys.argv[2]}/{name}", f"{sys.argv[1]}/{name}")
'''

FILES = {"make_tiny_qwen.py": MAKE_TINY, "genai.py": GENAI, "optimum_run.py": OPTIMUM, "make_olmoe.py": MAKE_OLMOE}

# The quiet export after BUILD_TINY (only the user's last command is the case; a failed step exits 97, which no
# scenario expects).
EXPORT = ("{bin}/optimum-cli export openvino --model {work}/tiny --task text-generation-with-past %s {work}/ov "
          ">/dev/null 2>&1 || { echo 'export failed'; exit 97; }; ")


def _case(id: str, expect: list[str], line: str, note: str, *, exit: str = "fail",
          releases: tuple[str, ...] | None = None) -> Case:
    return Case(id=id, expect=expect, argv=["bash", "-c", line], files=dict(FILES), env=dict(OFFLINE_ENV),
                input="transformers", note=note, exit=exit, timeout=420.0, releases=releases)


def _run(id: str, expect: list[str], script: str, model: str, device: str, note: str, *, export_args: str = "",
         prep: str = "", exit: str = "fail", releases: tuple[str, ...] | None = None) -> Case:
    """The tiny model built and exported quietly (``prep`` then damages the export), then the user's ``script``."""
    return _case(id, expect, BUILD_TINY + EXPORT % export_args + prep + f"exec {{python}} {script} {model} {device}",
                 note, exit=exit, releases=releases)


def _export(id: str, expect: list[str], args: str, note: str, *, model: str = "{work}/tiny", prep: str = "",
            exit: str = "fail") -> Case:
    """The user's ``optimum-cli export openvino`` of ``model`` with ``args``."""
    return _case(id, expect, BUILD_TINY + prep + f"exec {{bin}}/optimum-cli export openvino --model {model} {args} "
                 "{work}/out", note, exit=exit)


CASES = [
    _run("genai-cpu-healthy", [], "genai.py", "{work}/ov", "CPU",
         "healthy: exported with optimum-cli, generated on the CPU with OpenVINO GenAI", exit="ok"),
    _export("export-int8-healthy", [], "--task text-generation-with-past --weight-format int8",
            "healthy: optimum-cli export with NNCF int8 weight compression", exit="ok"),
    _run("optimum-cpu-healthy", [], "optimum_run.py", "{work}/ov", "CPU",
         "healthy: the exported model loaded with optimum-intel's OVModelForCausalLM on the CPU", exit="ok"),
    _run("genai-gpu-no-opencl", ["runtime.no_gpu_visible"], "genai.py", "{work}/ov", "GPU",
         "LLMPipeline on device 'GPU' where Intel's GPU compute runtime is not installed (no libOpenCL.so.1)"),
    _run("genai-npu-no-driver", ["runtime.no_gpu_visible"], "genai.py", "{work}/ov", "NPU",
         "LLMPipeline on device 'NPU' on a host without the Intel NPU driver (its compiler library is not there); "
         "2025.2's NPUW says only that the model failed to compile for every NPU, which no line ties to the driver",
         releases=("2026.4.1",)),
    _run("optimum-gpu-no-opencl", ["runtime.no_gpu_visible"], "optimum_run.py", "{work}/ov", "GPU",
         "OVModelForCausalLM.from_pretrained(device='GPU') where Intel's GPU compute runtime is not installed"),
    _run("genai-device-cuda", ["config.bad_argument"], "genai.py", "{work}/ov", "CUDA",
         "LLMPipeline(model, 'CUDA'): a device name OpenVINO does not have (its GPU is an Intel GPU)"),
    _run("genai-hf-checkpoint-not-exported", ["model.format_mismatch"], "genai.py", "{work}/tiny", "CPU",
         "LLMPipeline given the Hugging Face checkpoint (safetensors) instead of its OpenVINO export"),
    _run("optimum-hf-checkpoint-not-exported", ["model.format_mismatch"], "optimum_run.py", "{work}/tiny", "CPU",
         "OVModelForCausalLM.from_pretrained on the Hugging Face checkpoint without export=True"),
    _run("genai-tokenizer-not-converted", ["model.format_mismatch"], "genai.py", "{work}/ov", "CPU",
         "exported with --disable-convert-tokenizer: the IR folder has no openvino_tokenizer.xml for GenAI",
         export_args="--disable-convert-tokenizer"),
    _run("genai-weights-file-truncated", ["model.shard_corrupt"], "genai.py", "{work}/ov", "CPU",
         "openvino_model.bin cut short (a copy that stopped part-way), the .xml intact",
         prep="truncate -s 20000 {work}/ov/openvino_model.bin; "),
    _export("export-arch-unsupported", ["model.arch_unsupported"], "--task text-generation-with-past",
            "an OLMoE checkpoint: transformers knows it, optimum-intel has no OpenVINO export config for it",
            model="{work}/olmoe", prep="{python} make_olmoe.py {work}/olmoe {work}/tiny >/dev/null 2>&1 || exit 97; "),
    _export("export-task-not-given", ["config.bad_argument"], "--weight-format int4",
            "optimum-cli export of a local folder without --task: the task cannot be inferred"),
    _export("export-int4-group-size", ["config.bad_argument"],
            "--task text-generation-with-past --weight-format int4 --group-size 100",
            "int4 export with --group-size 100, which the layers' channel sizes (128, 256) do not divide"),
]

PROGRAM = Program(
    name="openvino",
    releases=[
        Release(label="2025.2.0", requirements=["torch==2.13.0", "openvino-genai==2025.2.0.0",
                                                "optimum-intel[openvino]==1.24.0", "nncf==2.17.0"],
                after=DROP_TORCHVISION),
        Release(label="2026.4.1", requirements=["torch==2.13.0", "openvino-genai==2026.4.1.0",
                                                "optimum-intel[openvino]==2.2.0"],
                after=DROP_TORCHVISION),
    ],
    cases=CASES,
    dist="openvino",
)
