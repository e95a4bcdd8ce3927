"""Unsloth (``pip install unsloth``) as fine-tuning users drive it on a host where torch sees no GPU (a CPU node, a
container started without ``--gpus``, a CPU torch wheel): since 2026 it falls back to CPU training with a notice
(healthy here), raises at import when ``UNSLOTH_DISABLE_CPU_FALLBACK=1`` asks it to, and refuses on the CPU path what
needs a GPU (vLLM's ``fast_inference``, merging LoRA into the 4-bit weights it loads by default). Beside those, what
users meet on any host: LoRA target modules the model lacks, a model path that is not there, a hub id offline with
nothing cached, and the GGUF export that clones and builds llama.cpp first on a node that cannot reach GitHub.

The model is the tiny random Qwen2 of ``make_tiny_qwen.py``. pip's torchvision beside the CPU torch is built for
CUDA (its ``torchvision::nms`` does not load, which Unsloth refuses at import); the release removes it, as the
CPU-only hosts users run this on have none, so every case reaches Unsloth's own code.
"""

from case import DROP_TORCHVISION, OFFLINE_ENV, Case, Program, Release, tiny_model_case

# The user's script: load the model (argv[1]) with FastLanguageModel, then what argv[2] asks for.
TRAIN = '''\
import sys
from unsloth import FastLanguageModel

path, step = sys.argv[1], sys.argv[2]
kw = {"fast_inference": True, "gpu_memory_utilization": 0.6} if step == "fast-inference" else {}
model, tok = FastLanguageModel.from_pretrained(path, max_seq_length=64, **kw)
if step != "gguf":  # the GGUF export of the base model itself: nothing to merge first
    targets = ["w_q", "w_v"] if step == "bad-targets" else ["q_proj", "v_proj"]
    model = FastLanguageModel.get_peft_model(model, r=8, target_modules=targets, lora_alpha=16)
if step == "merge":
    model.save_pretrained_merged("merged", tok, save_method="merged_16bit")
elif step == "gguf":
    model.save_pretrained_gguf("gguf", tok, quantization_method="q4_k_m")
elif step == "train":
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer
    data = Dataset.from_dict({"text": ["hello world " * 5] * 8})
    args = SFTConfig(max_steps=2, per_device_train_batch_size=2, output_dir="out", report_to=[], logging_steps=1,
                     dataset_text_field="text", max_length=32)
    SFTTrainer(model=model, processing_class=tok, train_dataset=data, args=args).train()
'''


def _run(id: str, expect: list[str], step: str, note: str, *, model: str = "{work}/tiny", build: bool = True,
         exit: str = "fail") -> Case:
    return tiny_model_case(id, expect, "train.py", TRAIN, f"{model} {step}", note, build=build, exit=exit)


CASES = [
    Case(id="import-cpu-fallback-healthy", expect=[], argv=["{python}", "-c", "import unsloth"],
         env=dict(OFFLINE_ENV), input="transformers", exit="ok", timeout=300,
         note="healthy: `import unsloth` where torch sees no GPU falls back to CPU training with a notice"),
    Case(id="import-cpu-fallback-disabled", expect=["runtime.no_gpu_visible"], argv=["{python}", "-c", "import unsloth"],
         env=dict(OFFLINE_ENV) | {"UNSLOTH_DISABLE_CPU_FALLBACK": "1"}, input="transformers", timeout=300,
         note="UNSLOTH_DISABLE_CPU_FALLBACK=1 (a job that must not train on the CPU) where torch sees no GPU"),
    _run("sft-two-steps-healthy", [], "train", "healthy: LoRA on the tiny model, two SFTTrainer steps on the CPU",
         exit="ok"),
    _run("lora-target-modules-missing", ["config.bad_argument"], "bad-targets",
         "get_peft_model with target_modules of another architecture's naming (w_q, w_v), which Qwen2 lacks"),
    _run("model-dir-missing", ["config.bad_argument"], "train",
         "a local model path that does not exist on this node (offline, so it is no hub id either)",
         model="./models/Qwen3-0.6B-finetune", build=False),
    _run("hub-model-offline-not-cached", ["download.incomplete"], "train",
         "a hub model id with HF_HUB_OFFLINE=1 (a node without network) and nothing in the hub cache",
         model="unsloth/Qwen3-0.6B", build=False),
    _run("fast-inference-without-gpu", ["runtime.no_gpu_visible"], "fast-inference",
         "fast_inference=True (vLLM rollouts for GRPO) where torch sees no GPU: the CPU fallback refuses it"),
    _run("merge-4bit-without-gpu", ["runtime.no_gpu_visible"], "merge",
         "save_pretrained_merged after loading with the default load_in_4bit=True, on the CPU fallback"),
    _run("gguf-export-github-unreachable", ["download.incomplete"], "gguf",
         "save_pretrained_gguf of the loaded model clones llama.cpp from GitHub first, on a node that cannot resolve "
         "github.com"),
]

PROGRAM = Program(
    name="unsloth",
    releases=[
        Release(label="2026.10.9", requirements=["torch==2.13.0", "unsloth==2026.10.9"],
                after=DROP_TORCHVISION),
    ],
    cases=CASES,
    dist="unsloth",
)
