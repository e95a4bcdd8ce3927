"""ms-swift: the `swift` CLI (sft, infer, deploy, export) driven the way fine-tuning users run it, into the failures
they report: a model path or id that is not there, model types and templates it cannot resolve, a data set that is
not there, flag values it refuses, packages a flag needs that are not installed (DeepSpeed, vLLM, SGLang, LMDeploy,
AutoAWQ), bf16 on a machine without a GPU, a port another server holds; plus healthy LoRA runs on one and on two
CPU ranks (NPROC_PER_NODE=2: torchrun, gloo) and a healthy inference.

Every model is the tiny random Qwen2 that ``scripts/make_tiny_qwen.py`` writes inside the case (no downloads,
HF_HUB_OFFLINE=1), in a folder named like the Qwen2.5 checkpoint users download, so that ms-swift matches its model
type and template by name as it does for theirs; every data set a few rows of messages written by the case.

Release: 4.6.0, the newest on the index, with transformers 4.57.6 (it requires <5.20) and the local CPU torch wheel
(``torch==2.13.0``, as trl.py and accelerate.py use).
"""

import json

from case import MAKE_TINY, OFFLINE_ENV, PORT_HOLDER, Case, Program, Release

NEW = "4.6.0"

MODEL = "models/Qwen2.5-0.5B-Instruct"

# Build the tiny model quietly, then run the user's command: only the command's output is the case.
BUILD = ("{python} make_tiny_qwen.py {work}/" + MODEL + " >/dev/null 2>&1 || { echo 'tiny model build failed'; exit 97; }; ")

ROWS = [
    {"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]}
    for q, a in [("hello world", "how are you today ?"), ("the quick brown fox", "jumps over the lazy dog"),
                 ("what does the server do", "it loads model weights"), ("say hi", "hi")]
] * 4
DATA = "".join(json.dumps(r) + "\n" for r in ROWS)

# another server holds the port while `swift deploy` starts behind it
HOLD = PORT_HOLDER

ENV = OFFLINE_ENV
# what a short LoRA run on the tiny model needs beyond the user's flags
SHORT = "--max_steps 2 --per_device_train_batch_size 2 --gradient_accumulation_steps 1 --output_dir out --report_to none"
SFT = "exec {bin}/swift sft --model " + MODEL + " --dataset data/train.jsonl --tuner_type lora "


def _case(id: str, expect: list[str], command: str, *, note: str, exit: str = "fail", env: dict | None = None,
          files: dict | None = None, timeout: float = 120.0) -> Case:
    """Build the tiny model, then run ``command`` (bash) in the work directory."""
    all_files: dict[str, str | bytes] = {"make_tiny_qwen.py": MAKE_TINY, "data/train.jsonl": DATA, "hold.py": HOLD}
    all_files.update(files or {})
    return Case(id=id, expect=expect, argv=["bash", "-c", BUILD + command], files=all_files,
                env={**ENV, **(env or {})}, input="mixed", note=note, exit=exit, timeout=timeout)


CASES = [
    # --- healthy runs --------------------------------------------------------------------------------------------
    _case("sft-lora-healthy", [], SFT + "--torch_dtype float32 " + SHORT, exit="ok",
          note="healthy: two LoRA steps on the tiny Qwen2 in float32 (fp16 autocast on CPU)"),
    _case("sft-lora-two-ranks-healthy", [], SFT + "--torch_dtype float32 --ddp_backend gloo " + SHORT, exit="ok",
          env={"NPROC_PER_NODE": "2", "MASTER_PORT": "{port}"},
          note="healthy: NPROC_PER_NODE=2 (torchrun under swift), two gloo CPU ranks, two LoRA steps"),
    _case("infer-transformers-healthy", [],
          "exec {bin}/swift infer --model " + MODEL + " --val_dataset data/train.jsonl --max_new_tokens 8"
          " --infer_backend transformers --result_path result.jsonl", exit="ok",
          note="healthy: batch inference over a validation file with the transformers backend"),
    # --- the model ---------------------------------------------------------------------------------------------
    _case("sft-model-path-missing", ["model.file_missing"],
          "exec {bin}/swift sft --model {work}/models/Qwen2.5-7B-Instruct --dataset data/train.jsonl"
          " --tuner_type lora --use_hf true " + SHORT,
          note="--model names a local checkpoint folder that is not there (a typo, or a mount missing in the"
          " container): with --use_hf the absolute path is taken for a Hub repo id"),
    _case("sft-model-type-ambiguous", ["model.arch_unsupported"],
          "mv " + MODEL + " models/my-finetuned && exec {bin}/swift sft --model models/my-finetuned"
          " --dataset data/train.jsonl --tuner_type lora --torch_dtype float32 " + SHORT,
          note="a checkpoint folder renamed after a fine-tune: ms-swift no longer matches it by name, and its"
          " Qwen2ForCausalLM architecture fits several model types"),
    _case("sft-model-type-unknown", ["model.arch_unsupported"],
          SFT + "--model_type qwen2.5 --torch_dtype float32 " + SHORT,
          note="--model_type spelt as the model's name (qwen2.5; ms-swift calls the type qwen2_5), or taken from a"
          " newer ms-swift's model list"),
    _case("sft-template-ambiguous", ["model.arch_unsupported"],
          "mv " + MODEL + " models/ckpt && exec {bin}/swift sft --model models/ckpt --model_type qwen2"
          " --dataset data/train.jsonl --tuner_type lora --torch_dtype float32 " + SHORT,
          note="--model_type given for a renamed checkpoint, but not --template: several chat templates fit"),
    _case("sft-template-unknown", ["model.arch_unsupported"],
          SFT + "--template qwen2.5 --torch_dtype float32 " + SHORT,
          note="--template spelt as the model's name (qwen2.5; the template is qwen2_5), or taken from a newer"
          " ms-swift's template list"),
    # --- the data set ------------------------------------------------------------------------------------------
    _case("sft-dataset-path-missing", ["config.bad_argument"],
          "exec {bin}/swift sft --model " + MODEL + " --dataset /data/train.jsonl --tuner_type lora"
          " --torch_dtype float32 " + SHORT,
          note="--dataset names a local file that is not there on this node"),
    # --- flags -------------------------------------------------------------------------------------------------
    _case("sft-train-type-renamed", ["config.bad_argument"],
          "exec {bin}/swift sft --model " + MODEL + " --dataset data/train.jsonl --train_type lora"
          " --torch_dtype float32 " + SHORT,
          note="an ms-swift 3.x script (--train_type lora) run on 4.x, which renamed the flag --tuner_type: the"
          " flag is left over after parsing"),
    _case("sft-torch-dtype-invalid", ["config.bad_argument"], SFT + "--torch_dtype fp32 " + SHORT,
          note="--torch_dtype fp32 (ms-swift wants float32 / bfloat16 / float16)"),
    _case("sft-packing-without-flash-attn", ["config.bad_argument"],
          SFT + "--torch_dtype float32 --packing true " + SHORT,
          note="--packing true without --attn_impl flash_attn"),
    _case("sft-bnb-quant-bits-invalid", ["config.bad_argument"],
          SFT + "--torch_dtype float32 --quant_method bnb --quant_bits 2 " + SHORT,
          note="QLoRA with --quant_method bnb --quant_bits 2: bitsandbytes loads 4 or 8 bits only"),
    _case("sft-default-bf16-no-gpu", ["config.dtype_unsupported"], SFT + SHORT,
          note="no --torch_dtype: ms-swift takes bfloat16 from config.json and turns bf16 on, which transformers"
          " refuses on a machine whose torch sees no GPU"),
    _case("sft-deepspeed-not-installed", ["runtime.backend_mismatch"],
          SFT + "--torch_dtype float32 --deepspeed zero2 " + SHORT,
          note="--deepspeed zero2 in an environment without DeepSpeed"),
    # --- inference and serving ---------------------------------------------------------------------------------
    _case("infer-vllm-not-installed", ["runtime.backend_mismatch"],
          "exec {bin}/swift infer --model " + MODEL + " --val_dataset data/train.jsonl --infer_backend vllm"
          " --max_new_tokens 8",
          note="--infer_backend vllm in an environment without vLLM"),
    _case("deploy-sglang-not-installed", ["runtime.backend_mismatch"],
          "exec {bin}/swift deploy --model " + MODEL + " --infer_backend sglang --port {port}",
          note="swift deploy --infer_backend sglang in an environment without SGLang"),
    _case("infer-lmdeploy-not-installed", ["runtime.backend_mismatch"],
          "exec {bin}/swift infer --model " + MODEL + " --val_dataset data/train.jsonl --infer_backend lmdeploy"
          " --max_new_tokens 8",
          note="--infer_backend lmdeploy in an environment without LMDeploy"),
    _case("deploy-port-in-use", ["server.port_in_use"],
          "exec {python} hold.py {port} {bin}/swift deploy --model " + MODEL + " --infer_backend transformers"
          " --port {port}", exit="timeout", timeout=75,
          note="swift deploy on a port another server already holds: uvicorn reports the bind error and returns,"
          " and the process stays up (its statistics thread goes on) until it is stopped"),
    _case("deploy-transformers-healthy", [],
          "exec {bin}/swift deploy --model " + MODEL + " --infer_backend transformers --port {port}", exit="timeout",
          timeout=75,
          note="healthy: swift deploy serving the tiny model with the transformers backend until it is stopped"),
    _case("infer-full-checkpoint-as-adapter", ["config.bad_argument"],
          "exec {bin}/swift infer --adapters " + MODEL + " --val_dataset data/train.jsonl --max_new_tokens 8",
          note="swift infer --adapters given a full-parameter checkpoint (no adapter_config.json): it is a model,"
          " to pass with --model"),
    _case("sft-two-ranks-master-port-in-use", ["server.port_in_use"],
          "exec {python} hold.py {port} env MASTER_PORT={port} NPROC_PER_NODE=2 " + SFT[5:]
          + "--torch_dtype float32 --ddp_backend gloo " + SHORT,
          note="NPROC_PER_NODE=2 with a MASTER_PORT another job on the node already listens on (a second training"
          " started with the same port)"),
    _case("export-awq-not-installed", ["runtime.backend_mismatch"],
          "exec {bin}/swift export --model " + MODEL + " --quant_method awq --quant_bits 4 --dataset"
          " data/train.jsonl --output_dir out-awq",
          note="swift export --quant_method awq in an environment without AutoAWQ"),
]

PROGRAM = Program(
    name="swift",
    dist="ms-swift",
    releases=[
        Release(label=NEW, requirements=[f"ms-swift=={NEW}", "torch==2.13.0", "transformers==4.57.6", "trl==0.29.1",
                                         "peft==0.20.0", "datasets==4.8.4"]),
    ],
    cases=CASES,
)
