"""LLaMA-Factory (`llamafactory-cli train / chat / api`) as fine-tuning users drive it: a training YAML that names a
model, a dataset, a template, a stage or a key this release does not have, packages outside the versions it checks,
mixed precision or DeepSpeed on a machine that cannot give them, `FORCE_TORCHRUN=1` where torch sees no GPU, the API
server's port already taken; and healthy starts (LoRA SFT for two steps in one process and in two gloo CPU ranks
under torchrun, the CLI chat, the OpenAI-style API answering one request, `flash_attn: fa2` without flash-attn).

Every model is the tiny random Qwen2 that ``scripts/make_tiny_qwen.py`` writes inside the case (no downloads,
HF_HUB_OFFLINE=1); the data set is 16 alpaca-format rows registered in the case's own data/dataset_info.json.

Release: 0.9.5, the newest on the index, with the newest dependencies it accepts (transformers 4.57.6, trl 0.24.0,
peft 0.18.1, accelerate 1.11.0, datasets 4.0.0) and the local CPU torch (``torch==2.13.0``). LLaMA-Factory imports
torchaudio unconditionally (data/mm_plugin.py), and the newest torchaudio on the index (2.11.1) is built for torch
2.11: it is installed without its dependencies and without its compiled extension (torchaudio then imports as a
pure-Python package, as it does where the library is not found); the text-only cases never call it. gradio, av,
modelscope, torchvision and deepspeed are left out (no case reaches the web UI, media or DeepSpeed itself).
"""


from case import BUILD_TINY, MAKE_TINY, OFFLINE_ENV, PORT_HOLDER, Case, Program, Release

NEW = "0.9.5"



ROWS = ",\n".join(
    f'  {{"instruction": "say hello {i}", "input": "", "output": "hello world number {i}"}}' for i in range(16)
)
DATA = {
    "data/dataset_info.json": '{\n  "toy": {"file_name": "toy.json"}\n}\n',
    "data/toy.json": "[\n" + ROWS + "\n]\n",
}

# LoRA SFT on the tiny model, two steps, no checkpoint: what examples/train_lora/*_lora_sft.yaml looks like
SFT = {
    "model_name_or_path": "tiny",
    "stage": "sft",
    "do_train": "true",
    "finetuning_type": "lora",
    "lora_target": "all",
    "dataset": "toy",
    "dataset_dir": "data",
    "template": "qwen",
    "cutoff_len": "64",
    "max_samples": "16",
    "preprocessing_num_workers": "1",
    "output_dir": "saves/tiny/lora/sft",
    "logging_steps": "1",
    "max_steps": "2",
    "per_device_train_batch_size": "2",
    "report_to": "none",
    "save_strategy": '"no"',
}

INFER = "model_name_or_path: tiny\ntemplate: qwen\ninfer_backend: huggingface\nmax_new_tokens: 8\n"

# another server holds the port while the API server behind it starts
HOLD = PORT_HOLDER

# a healthy API server: wait until it answers, send one chat request, stop it
API_HEALTHY = (
    "llamafactory-cli api infer.yaml & pid=$!; "
    "for i in $(seq 90); do curl -sf http://127.0.0.1:{port}/v1/models >/dev/null && break; sleep 1; done; "
    "curl -s http://127.0.0.1:{port}/v1/chat/completions -H 'Content-Type: application/json' "
    "-d '{\"model\": \"tiny\", \"messages\": [{\"role\": \"user\", \"content\": \"hello\"}], \"max_tokens\": 8}' "
    ">/dev/null && echo; kill -INT $pid; wait $pid; exit 0"
)

# what `pip install -U peft` leaves behind, as far as the version check can see: the metadata of a release past the
# range LLaMA-Factory accepts, ahead of the venv's own on the path (the check reads only the metadata)
PEFT_NEWER = {"overlay/peft-0.21.2.dist-info/METADATA": "Metadata-Version: 2.1\nName: peft\nVersion: 0.21.2\n"}


def yaml(**over: str | None) -> str:
    """The SFT config with keys replaced (a value), added (a new key) or removed (None), in order."""
    cfg = dict(SFT)
    for key, val in over.items():
        if val is None:
            cfg.pop(key, None)
        else:
            cfg[key] = val
    return "".join(f"{k}: {v}\n" for k, v in cfg.items())


def _case(id: str, expect: list[str], *, note: str, config: str | None = None, cmd: str = "exec llamafactory-cli"
          " train train.yaml", exit: str = "fail", env: dict | None = None, extra: dict | None = None,
          timeout: float = 120.0) -> Case:
    """Build the tiny model, write the data set and ``train.yaml`` (``config``), then run ``cmd`` with bash."""
    files: dict[str, str | bytes] = {"make_tiny_qwen.py": MAKE_TINY, **DATA, "train.yaml": config or yaml(),
                                     "infer.yaml": INFER}
    files.update(extra or {})
    return Case(
        id=id,
        expect=expect,
        argv=["bash", "-c", BUILD_TINY + cmd],
        files=files,
        env={**OFFLINE_ENV, **(env or {})},
        input="transformers",
        note=note,
        exit=exit,
        timeout=timeout,
    )


TORCHRUN2 = {"FORCE_TORCHRUN": "1", "NPROC_PER_NODE": "2", "MASTER_PORT": "{port}"}

CASES = [
    # --- healthy starts with their usual warnings -----------------------------------------------------------------
    _case(
        "train-lora-sft-healthy",
        [],
        note="healthy: two LoRA SFT steps on the tiny model in one CPU process ('We recommend enable mixed precision"
        " training', the tokenizer's PAD/BOS/EOS aligned into the model config, pin_memory without an accelerator)",
        exit="ok",
    ),
    _case(
        "train-torchrun-two-cpu-ranks-healthy",
        [],
        env=TORCHRUN2,
        note="healthy: FORCE_TORCHRUN=1 NPROC_PER_NODE=2: llamafactory-cli starts torchrun with two gloo CPU ranks"
        " and trains two steps",
        exit="ok",
    ),
    _case(
        "train-flash-attn-fa2-not-installed-healthy",
        [],
        config=yaml(flash_attn="fa2"),
        note="healthy: `flash_attn: fa2` where flash-attn is not installed: LLaMA-Factory warns 'FlashAttention-2 is"
        " not installed.' and trains with the default attention",
        exit="ok",
    ),
    _case(
        "chat-cli-healthy",
        [],
        cmd="printf 'hello there\\nexit\\n' | exec llamafactory-cli chat infer.yaml",
        note="healthy: the CLI chat loads the tiny model, answers one turn (random weights: gibberish) and exits",
        exit="ok",
    ),
    _case(
        "api-one-request-healthy",
        [],
        cmd=API_HEALTHY,
        env={"API_PORT": "{port}"},
        note="healthy: the OpenAI-style API server starts, answers /v1/models and one chat completion, and is"
        " stopped with Ctrl-C",
        exit="ok",
    ),
    # --- the model ------------------------------------------------------------------------------------------------
    _case(
        "model-hub-id-offline",
        ["download.incomplete"],
        config=yaml(model_name_or_path="Qwen/Qwen2.5-0.5B-Instruct"),
        note="a hub model id that is not in the local cache on a node without hub access (HF_HUB_OFFLINE=1):"
        " transformers cannot fetch the tokenizer and LLaMA-Factory passes it on as 'Failed to load tokenizer.'",
    ),
    _case(
        "model-path-absent",
        ["config.bad_argument"],
        config=yaml(model_name_or_path="/data/models/Qwen2.5-0.5B-Instruct"),
        note="model_name_or_path names a local folder that does not exist on this node: transformers then reads it as"
        " a hub repo id and refuses its form",
    ),
    # --- data set, template, keys, stage --------------------------------------------------------------------------
    _case(
        "dataset-not-in-dataset-info",
        ["config.bad_argument"],
        config=yaml(dataset="alpaca_zh_demo"),
        note="`dataset: alpaca_zh_demo` (from the examples) with a dataset_dir whose dataset_info.json does not"
        " register it",
    ),
    _case(
        "template-unknown",
        ["config.bad_argument"],
        config=yaml(template="qwen2.5"),
        note="`template: qwen2.5` (the model's name, not a template of this release: qwen)",
    ),
    _case(
        "yaml-key-unknown",
        ["config.bad_argument"],
        config=yaml(lora_rnak="8"),
        note="a misspelt key in the training YAML (lora_rnak): HfArgumentParser refuses keys no argument class has",
    ),
    _case(
        "finetuning-type-unknown",
        ["config.bad_argument"],
        config=yaml(finetuning_type="qlora"),
        note="`finetuning_type: qlora` (QLoRA is `finetuning_type: lora` with `quantization_bit: 4`)",
    ),
    _case(
        "stage-ppo-reward-model-missing",
        ["config.bad_argument"],
        config=yaml(stage="ppo"),
        note="`stage: ppo` without `reward_model`",
    ),
    _case(
        "stage-dpo-dataset-not-ranking",
        ["config.bad_argument"],
        config=yaml(stage="dpo"),
        note="`stage: dpo` on an SFT (instruction/output) data set whose dataset_info.json entry has no `ranking: true`",
    ),
    _case(
        "output-dir-not-empty-rerun",
        ["config.bad_argument"],
        config=yaml(save_strategy=None, save_steps="2"),
        cmd="llamafactory-cli train train.yaml >/dev/null 2>&1; echo '--- run again'; exec llamafactory-cli train"
        " train.yaml",
        note="the same training YAML run a second time: output_dir holds the first run's adapter and"
        " overwrite_output_dir is not set",
    ),
    # --- the environment ------------------------------------------------------------------------------------------
    _case(
        "version-check-peft-too-new",
        ["runtime.backend_mismatch"],
        env={"PYTHONPATH": "{work}/overlay"},
        extra=PEFT_NEWER,
        note="peft upgraded past the range this release checks (peft 0.21.2 over <=0.20.0): LLaMA-Factory's version"
        " check refuses to start (the metadata of the newer release shadows the venv's own here)",
    ),
    _case(
        "deepspeed-not-installed",
        ["runtime.backend_mismatch"],
        config=yaml(deepspeed="examples/deepspeed/ds_z3_config.json"),
        env={"FORCE_TORCHRUN": "1", "NPROC_PER_NODE": "2", "MASTER_PORT": "{port}"},
        note="`deepspeed: examples/deepspeed/ds_z3_config.json` under FORCE_TORCHRUN=1 in an environment without"
        " DeepSpeed: transformers checks for the package before it reads the config",
    ),
    _case(
        "bf16-no-gpu",
        ["config.dtype_unsupported"],
        config=yaml(bf16="true"),
        note="`bf16: true` (as every example config has) on a node whose torch sees no GPU",
    ),
    _case(
        "force-torchrun-no-gpu-visible",
        ["runtime.no_gpu_visible"],
        env={"FORCE_TORCHRUN": "1", "MASTER_PORT": "{port}"},
        note="FORCE_TORCHRUN=1 without NPROC_PER_NODE on a node whose torch sees no GPU (CUDA_VISIBLE_DEVICES empty,"
        " a container without GPUs): LLaMA-Factory starts torchrun with --nproc_per_node 0",
    ),
    _case(
        "torchrun-two-ranks-dataset-undefined",
        ["config.bad_argument"],
        config=yaml(dataset="identity,alpaca_en_demo"),
        env=TORCHRUN2,
        note="two torchrun ranks (gloo) with data sets that dataset_info.json does not register: both ranks raise,"
        " torchrun reports the child failure and llamafactory-cli its CalledProcessError",
    ),
    _case(
        "api-port-in-use",
        ["server.port_in_use"],
        cmd="exec {python} hold.py {port} llamafactory-cli api infer.yaml",
        env={"API_PORT": "{port}"},
        extra={"hold.py": HOLD},
        note="`llamafactory-cli api` with API_PORT taken by another server: uvicorn cannot bind after the model loads",
    ),
]

PROGRAM = Program(
    name="llamafactory",
    dist="llamafactory",
    releases=[
        Release(
            label=NEW,
            requirements=["torch==2.13.0", "transformers==4.57.6", "trl==0.24.0", "peft==0.18.1",
                          "accelerate==1.11.0", "datasets==4.0.0", "fastapi", "uvicorn", "sse-starlette", "fire",
                          "omegaconf", "tyro<0.9.0", "pyyaml", "sentencepiece", "tiktoken", "protobuf", "pydantic",
                          "packaging", "pandas", "scipy", "einops", "safetensors", "numpy", "pillow"],
            after=[
                ["{python}", "-m", "pip", "install", "--no-deps", f"llamafactory=={NEW}", "torchaudio==2.11.1"],
                # torchaudio 2.11's extension is built for torch 2.11: without it the package imports on torch 2.13
                ["{python}", "-c", "import glob, importlib.util, os; d = os.path.dirname(importlib.util.find_spec("
                 "'torchaudio').origin); [os.remove(p) for p in glob.glob(os.path.join(d, 'lib', '*.so'))]"],
            ],
        ),
    ],
    cases=CASES,
)
