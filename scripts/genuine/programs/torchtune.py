"""torchtune (the ``tune`` CLI) as fine-tuning users drive it: ``tune run`` of the built-in single-device and
distributed recipes on the CPU, ``tune cp``, ``tune validate``, ``tune download`` (offline). A tiny Llama-2-shaped
model (random weights, saved in torchtune's own checkpoint format), a sentencepiece tokenizer trained on the spot and
an alpaca-style JSON data file are made by the case's ``prep.py``; nothing is downloaded.
"""

from case import OFFLINE_ENV, Case, Program, Release

# Makes ./ckpt/model.pt (a tiny llama2, torchtune's key names), ./tok.model (sentencepiece) and ./data.json.
PREP = """\
import json, pathlib, sys, torch
import sentencepiece as spm
from torchtune.models.llama2 import llama2
torch.manual_seed(0)
text = ["Give three tips for staying healthy.", "Eat well, sleep enough and move every day.",
        "What is the capital of France?", "The capital of France is Paris."] * 20
pathlib.Path("corpus.txt").write_text("\\n".join(text) + "\\n")
spm.SentencePieceTrainer.train(input="corpus.txt", model_prefix="tok", vocab_size=64, model_type="bpe",
                               bos_id=1, eos_id=2, unk_id=0, pad_id=-1, minloglevel=2)
m = llama2(vocab_size=64, num_layers=2, num_heads=4, num_kv_heads=2, embed_dim=32, max_seq_len=64)
pathlib.Path("ckpt").mkdir(exist_ok=True)
torch.save(m.state_dict(), "ckpt/model.pt")
rows = [{"instruction": text[i], "input": "", "output": text[i + 1]} for i in range(0, 8, 2)]
pathlib.Path("data.json").write_text(json.dumps(rows))
"""

# A complete single-device full-finetune config for the tiny model, keys both releases read.
CONFIG = """\
output_dir: {work}/out
tokenizer:
  _component_: torchtune.models.llama2.llama2_tokenizer
  path: {work}/tok.model
  max_seq_len: 64
dataset:
  _component_: torchtune.datasets.alpaca_dataset
  source: json
  data_files: {work}/data.json
seed: 0
shuffle: True
model:
  _component_: torchtune.models.llama2.llama2
  vocab_size: 64
  num_layers: 2
  num_heads: 4
  num_kv_heads: 2
  embed_dim: 32
  max_seq_len: 64
checkpointer:
  _component_: torchtune.training.FullModelTorchTuneCheckpointer
  checkpoint_dir: {work}/ckpt
  checkpoint_files: [model.pt]
  recipe_checkpoint: null
  output_dir: {work}/out
  model_type: LLAMA2
resume_from_checkpoint: False
batch_size: 2
epochs: 1
optimizer:
  _component_: torch.optim.AdamW
  lr: 1e-4
optimizer_in_bwd: False
loss:
  _component_: torchtune.modules.loss.CEWithChunkedOutputLoss
max_steps_per_epoch: 2
gradient_accumulation_steps: 1
clip_grad_norm: null
compile: False
device: cpu
enable_activation_checkpointing: False
enable_activation_offloading: False
dtype: fp32
metric_logger:
  _component_: torchtune.training.metric_logging.DiskLogger
  log_dir: {work}/out/logs
log_every_n_steps: 1
log_peak_memory_stats: False
"""

RECIPE = "full_finetune_single_device"


def _run(id, expect, tail, note, config=CONFIG, prep=True, exit="fail", argv=None, **kw):
    """`prep.py` then one `tune` command (a shell line after ``tune``)."""
    line = ("{python} prep.py && " if prep else "") + "{bin}/tune " + tail
    return Case(
        id=id,
        expect=expect,
        argv=argv or ["bash", "-c", line],
        files={"prep.py": PREP, "cfg.yaml": config} if prep else {"cfg.yaml": config},
        env=dict(OFFLINE_ENV),
        input="mixed",
        note=note,
        exit=exit,
        timeout=kw.pop("timeout", 300),
        **kw,
    )


CASES = [
    # --- healthy ------------------------------------------------------------------------------------------
    _run("ls-healthy", [], "ls", "healthy: `tune ls` lists the built-in recipes and configs", prep=False, exit="ok"),
    _run("validate-ok-healthy", [], "validate cfg.yaml", "healthy: `tune validate` of a complete config",
         prep=False, exit="ok"),
    _run("full-finetune-cpu-healthy", [], f"run {RECIPE} --config cfg.yaml",
         "healthy: two steps of the single-device full-finetune recipe on the CPU, tiny model, checkpoint saved",
         exit="ok"),
    # --- CLI misuse -----------------------------------------------------------------------------------------
    _run("run-recipe-unknown", ["config.bad_argument"], "run full_finetune_singel_device --config cfg.yaml",
         "a recipe name that does not exist (typo): tune takes it for a module of the user's own", prep=False),
    _run("run-config-missing-file", ["config.bad_argument"], f"run {RECIPE} --config llama2/7B_ful.yaml",
         "--config names a file that does not exist", prep=False),
    _run("run-no-config-flag", ["config.bad_argument"], f"run {RECIPE}",
         "`tune run` without --config", prep=False),
    _run("cp-unknown-config", ["config.bad_argument"], "cp llama3_1/8B_lorra ./my.yaml",
         "`tune cp` of a config name that does not exist", prep=False),
    # --- config content -------------------------------------------------------------------------------------
    _run("model-component-unknown", ["config.bad_argument"],
         f"run {RECIPE} --config cfg.yaml model._component_=torchtune.models.llama2.llama2_tiny",
         "model._component_ names a builder torchtune does not have"),
    _run("config-key-missing", ["config.bad_argument"],
         f"run {RECIPE} --config cfg.yaml", "the config has no `checkpointer` section",
         config=CONFIG.replace("checkpointer:\n", "checkpointer_:\n")),
    _run("config-bad-arg", ["config.bad_argument"],
         f"run {RECIPE} --config cfg.yaml model.num_head=4",
         "an override with a misspelt builder argument (num_head for num_heads)"),
    _run("dtype-fp16-cpu", ["config.dtype_unsupported"], f"run {RECIPE} --config cfg.yaml dtype=fp16",
         "dtype=fp16: the full-finetune recipe refuses it (bf16 or fp32 only)"),
    _run("dtype-unknown", ["config.dtype_unsupported"], f"run {RECIPE} --config cfg.yaml dtype=fp8",
         "dtype=fp8: not a precision torchtune knows"),
    # --- checkpoints ----------------------------------------------------------------------------------------
    _run("checkpoint-file-missing", ["model.file_missing"],
         f"run {RECIPE} --config cfg.yaml checkpointer.checkpoint_files=[model-00001-of-00002.pt]",
         "checkpoint_files names a file that is not in checkpoint_dir"),
    _run("checkpoint-wrong-format", ["model.file_missing"],
         f"run {RECIPE} --config cfg.yaml checkpointer._component_=torchtune.training.FullModelHFCheckpointer",
         "a torchtune-format checkpoint read with the HF checkpointer: it looks for the HF config.json beside it"),
    _run("checkpoint-not-torch", ["model.shard_corrupt"],
         f"run {RECIPE} --config cfg.yaml checkpointer.checkpoint_files=[bad.pt]",
         "checkpoint_files names a file that is not a torch checkpoint (a download's HTML error page)",
         argv=["bash", "-c", "{python} prep.py && echo '<html>Not Found</html>' > ckpt/bad.pt && {bin}/tune run "
               f"{RECIPE} --config cfg.yaml checkpointer.checkpoint_files=[bad.pt]"]),
    # --- devices --------------------------------------------------------------------------------------------
    _run("device-cuda-on-cpu-host", ["config.insufficient_gpus"], f"run {RECIPE} --config cfg.yaml device=cuda",
         "device=cuda on a host without a GPU: the rank finds no GPU of its own (0.6.1 falls back to the CPU"
         " and trains)", releases=("0.3.1",)),
    _run("distributed-nproc-cuda", ["runtime.backend_mismatch"],
         "run --nproc_per_node 2 full_finetune_distributed --config cfg.yaml device=cuda",
         "the distributed recipe through tune's torchrun, 2 ranks asking for cuda on a host without GPUs (a CPU build of torch)"),
    # --- download -------------------------------------------------------------------------------------------
    _run("download-offline", ["download.incomplete"],
         "download meta-llama/Llama-2-7b-not-a-repo --output-dir ./m",
         "`tune download` with HF_HUB_OFFLINE=1: the hub's offline error", prep=False),
]

PROGRAM = Program(
    name="torchtune",
    releases=[
        Release(label="0.3.1", requirements=["torchtune==0.3.1", "torchao==0.5.0", "torch==2.13.0"]),
        Release(label="0.6.1", requirements=["torchtune==0.6.1", "torchao==0.10.0", "torchdata==0.11.0",
                                             "torch==2.13.0"]),
    ],
    cases=CASES,
)
