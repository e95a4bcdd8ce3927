"""Axolotl (the ``axolotl`` CLI) as fine-tuning users drive it: ``axolotl preprocess`` of a training YAML whose
adapter, dataset type, base model path or sequence length is wrong, a config file that does not exist, a command
name that is misspelt; and healthy runs (``--version``, ``--help``, a LoRA config whose data set preprocesses).

The model is the tiny random Qwen2 that ``scripts/make_tiny_qwen.py`` writes inside the case; the data set is 16
alpaca-format rows in the case's own ``toy.jsonl`` (no downloads: HF_HUB_OFFLINE=1, and AXOLOTL_DO_NOT_TRACK=1 so
that its telemetry does not try to reach its server from an offline host).

Release: 0.19.0, the newest on the index, with the local CPU torch (``torch==2.13.0``); pip picks the rest
(transformers 5.16.1, trl 1.9.0, peft 0.20.0, datasets 4.8.4, pydantic 2.12.5 on the day it was recorded).
Checked against that release: ``fp16: true`` with ``bf16: true`` and ``micro_batch_size: 0`` pass its schema and
``preprocess`` (no case for them).
"""

from case import BUILD_TINY, MAKE_TINY, OFFLINE_ENV, Case, Program, Release

NEW = "0.19.0"


ROWS = "".join(
    f'{{"instruction": "say hello {i}", "input": "", "output": "hello world number {i}"}}\n' for i in range(16)
)

# LoRA SFT of the tiny model on the toy rows, what examples/*/lora.yml looks like, shrunk
CONFIG = {
    "base_model": "./tiny",
    "datasets": "\n  - path: ./toy.jsonl\n    type: alpaca",
    "dataset_prepared_path": "./prepared",
    "val_set_size": "0",
    "sequence_len": "256",
    "micro_batch_size": "2",
    "gradient_accumulation_steps": "1",
    "num_epochs": "1",
    "max_steps": "2",
    "learning_rate": "0.0001",
    "optimizer": "adamw_torch",
    "lr_scheduler": "cosine",
    "output_dir": "./out",
    "adapter": "lora",
    "lora_r": "4",
    "lora_alpha": "8",
    "lora_dropout": "0.0",
    "lora_target_linear": "true",
}

ENV = {**OFFLINE_ENV, "AXOLOTL_DO_NOT_TRACK": "1"}


def yaml(**over: str) -> str:
    """The config with keys replaced or added."""
    cfg = {**CONFIG, **over}
    return "".join(f"{k}:{'' if v.startswith(chr(10)) else ' '}{v}\n" for k, v in cfg.items())


def _run(id, expect, tail, note, config=None, build=True, exit="fail", **kw):
    """The tiny model (unless ``build`` is false), then one ``axolotl`` command (a shell line after ``axolotl``)."""
    files = {"cfg.yml": config or yaml(), "toy.jsonl": ROWS}
    if build:
        files["make_tiny_qwen.py"] = MAKE_TINY
    return Case(
        id=id,
        expect=expect,
        argv=["bash", "-c", (BUILD_TINY if build else "") + "exec {bin}/axolotl " + tail],
        files=files,
        env=dict(ENV),
        input="mixed",
        note=note,
        exit=exit,
        timeout=kw.pop("timeout", 400),
        **kw,
    )


CASES = [
    # --- healthy ------------------------------------------------------------------------------------------
    _run("version-healthy", [], "--version", "healthy: `axolotl --version`", build=False, exit="ok"),
    _run("help-healthy", [], "--help", "healthy: `axolotl --help` lists its commands", build=False, exit="ok"),
    _run("preprocess-healthy", [], "preprocess cfg.yml",
         "healthy: `axolotl preprocess` of a complete LoRA config (tiny local model, 16 alpaca rows, sequence_len"
         " 256): the data set is tokenized and saved under dataset_prepared_path; its warnings (torchao's CUDA"
         " extensions, bitsandbytes' kernels offline) are no failure", exit="ok"),
    # --- CLI misuse -----------------------------------------------------------------------------------------
    _run("command-unknown", ["config.bad_argument"], "trian cfg.yml",
         "a misspelt command (`trian` for `train`): click's `No such command`", build=False),
    _run("config-file-missing", ["config.bad_argument"], "preprocess configs/lora.yml",
         "the config path names a file that does not exist: click refuses the CONFIG argument", build=False),
    # --- config content -------------------------------------------------------------------------------------
    _run("adapter-unknown", ["config.bad_argument"], "preprocess cfg.yml",
         "`adapter: lorra` (a typo for lora): its pydantic schema refuses the value",
         config=yaml(adapter="lorra")),
    _run("dataset-type-unknown", ["config.bad_argument"], "preprocess cfg.yml",
         "a dataset `type:` it has no prompt strategy for (`alpacca`): refused when the data set is loaded",
         config=yaml(datasets="\n  - path: ./toy.jsonl\n    type: alpacca")),
    _run("sequence-len-drops-all", ["config.bad_argument"], "preprocess cfg.yml",
         "sequence_len 64 below every sample's length (70 tokens): every row is dropped and the label check of the"
         " empty data set fails (`empty range for randrange()`)", config=yaml(sequence_len="64")),
    # --- model ----------------------------------------------------------------------------------------------
    _run("base-model-path-missing", ["config.bad_argument"], "preprocess cfg.yml",
         "base_model names a local folder that does not exist (./tiny-missing): taken for a hub repo id and refused",
         config=yaml(base_model="./tiny-missing")),
]

PROGRAM = Program(
    name="axolotl",
    releases=[Release(label=NEW, requirements=[f"axolotl=={NEW}", "torch==2.13.0"])],
    cases=CASES,
)
