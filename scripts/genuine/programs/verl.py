"""verl (Volcano Engine RL, ``pip install verl``) as RL users drive it on a host without a GPU: the PPO / GRPO
entry point ``python -m verl.trainer.main_ppo`` with Hydra overrides that fail its config checks (batch sizes
against the GPU count and the mini / micro batches, micro-batch options set twice or not at all, a loss
aggregation mode it does not know, an override key the config does not have), and the SFT trainer under
torchrun on a CPU build of torch; plus healthy ``--help``, ``--cfg job`` and version prints. A tiny random Qwen2
(``scripts/make_tiny_qwen.py``) and small parquet files in verl's GSM8K layout are made by the case; nothing is
downloaded.

0.9.1's ``pip install verl`` lacks what its own trainer imports (transfer_queue, cachetools: the ``verl-core``
extra); the release's ``after`` step installs those, not the GPU extras (vllm / sglang / flash-attn). From 0.5 on
0.9.1 checks the config (verl/utils/config.py validate_config) before Ray starts; 0.5.0 checks it inside the Ray
TaskRunner (RayPPOTrainer._validate_config), which does not come up in time on this 2-core host, so the config
cases run on 0.9.1 only.
"""


from case import MAKE_TINY, OFFLINE_ENV, Case, Program, Release

NEW = "0.9.1"
OLD = "0.5.0"


# ./data/train.parquet, ./data/test.parquet (verl's RL prompt layout, as examples/data_preprocess/gsm8k.py writes
# it) and ./data/sft.parquet (question / answer / messages)
PREP = """\
# Writes ./data/train.parquet and ./data/test.parquet (verl's RL prompt layout) and ./data/sft.parquet (SFT).
import pathlib
import pandas as pd
D = pathlib.Path("data"); D.mkdir(exist_ok=True)
rows = []
for i in range(16):
    q = f"What is {i} plus {i}?"
    rows.append({"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": q}], "ability": "math",
                 "reward_model": {"style": "rule", "ground_truth": str(2 * i)},
                 "extra_info": {"split": "train", "index": i, "question": q, "answer": str(2 * i)}})
pd.DataFrame(rows).to_parquet(D / "train.parquet")
pd.DataFrame(rows[:4]).to_parquet(D / "test.parquet")
sft = [{"question": r["extra_info"]["question"], "answer": r["extra_info"]["answer"],
        "messages": [{"role": "user", "content": r["extra_info"]["question"]},
                     {"role": "assistant", "content": r["extra_info"]["answer"]}]} for r in rows]
pd.DataFrame(sft).to_parquet(D / "sft.parquet")
"""

BUILD = ("{python} make_tiny_qwen.py {work}/tiny >/dev/null 2>&1 && {python} prep.py "
         "|| { echo 'prep failed'; exit 97; }; ")

# the quick-start GRPO overrides, sized for the tiny model and one GPU
BASE = (
    "data.train_files={work}/data/train.parquet data.val_files={work}/data/test.parquet data.train_batch_size=4 "
    "data.max_prompt_length=64 data.max_response_length=32 actor_rollout_ref.model.path={work}/tiny "
    "actor_rollout_ref.actor.ppo_mini_batch_size=4 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 "
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2 "
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2 algorithm.adv_estimator=grpo "
    "actor_rollout_ref.rollout.n=2 trainer.logger=console trainer.val_before_train=False "
    "trainer.n_gpus_per_node=1 trainer.nnodes=1 trainer.total_epochs=1"
)

ENV = {**OFFLINE_ENV, "HF_HOME": "{work}/hf-home", "RAY_USAGE_STATS_ENABLED": "0"}


def _ppo(id, expect, overrides, note, *, base=True, prep=True, exit="fail", releases=(NEW,), timeout=170.0):
    """``python -m verl.trainer.main_ppo`` with the quick-start overrides (``base``) and the case's own."""
    line = (BUILD if prep else "") + "exec {python} -m verl.trainer.main_ppo " + (BASE + " " if base else "") + overrides
    files = {"make_tiny_qwen.py": MAKE_TINY, "prep.py": PREP} if prep else {}
    return Case(id=id, expect=expect, argv=["bash", "-c", line], files=files, env=dict(ENV), input="mixed",
                note=note, exit=exit, releases=releases, timeout=timeout)


def _sft(id, expect, module, overrides, note, releases):
    line = BUILD + "exec {bin}/torchrun --standalone --nproc_per_node=1 -m " + module + " " + overrides
    return Case(id=id, expect=expect, argv=["bash", "-c", line],
                files={"make_tiny_qwen.py": MAKE_TINY, "prep.py": PREP}, env=dict(ENV), input="mixed", note=note,
                releases=releases, timeout=170.0)


CASES = [
    # --- healthy --------------------------------------------------------------------------------------------
    Case(id="version-healthy", expect=[], argv=["{python}", "-c", "import verl; print(verl.__version__)"],
         env=dict(ENV), exit="ok", note="healthy: `import verl` and its version"),
    _ppo("ppo-help-healthy", [], "--help", "healthy: main_ppo's Hydra --help", base=False, prep=False, exit="ok",
         releases=None),
    _ppo("ppo-cfg-job-healthy", [], "--cfg job",
         "healthy: `--cfg job` prints the composed PPO config with the quick-start overrides and exits",
         prep=False, exit="ok", releases=None),
    # --- Hydra overrides ----------------------------------------------------------------------------------------
    _ppo("ppo-override-unknown-key", ["config.bad_argument"], "trainer.n_gpu=1",
         "an override of a key the config does not have (trainer.n_gpu for trainer.n_gpus_per_node): Hydra refuses"
         " it before main runs", prep=False, releases=None),
    # --- validate_config (0.9.1: before Ray) -------------------------------------------------------------------
    _ppo("ppo-micro-batch-unset", ["config.bad_argument"],
         "data.train_files={work}/data/train.parquet data.val_files={work}/data/test.parquet "
         "actor_rollout_ref.model.path={work}/tiny trainer.n_gpus_per_node=1",
         "the shipped config with only data and model set: no actor micro batch size (ppo_micro_batch_size_per_gpu"
         " is null by default)", base=False),
    _ppo("ppo-micro-batch-both", ["config.bad_argument"], "actor_rollout_ref.actor.ppo_micro_batch_size=2",
         "both the deprecated actor.ppo_micro_batch_size and ppo_micro_batch_size_per_gpu set"),
    _ppo("ppo-mini-batch-over-train", ["config.bad_argument"], "actor_rollout_ref.actor.ppo_mini_batch_size=16",
         "actor.ppo_mini_batch_size larger than data.train_batch_size"),
    _ppo("ppo-batch-indivisible-gpus", ["config.bad_argument"],
         "data.train_batch_size=6 actor_rollout_ref.actor.ppo_mini_batch_size=2 trainer.n_gpus_per_node=8",
         "train_batch_size x rollout.n (12) does not divide by the 8 GPUs of an 8-GPU example's layout"),
    _ppo("ppo-loss-agg-mode-unknown", ["config.bad_argument"], "actor_rollout_ref.actor.loss_agg_mode=token_mean",
         "actor.loss_agg_mode=token_mean (the valid spelling is token-mean)"),
    # --- SFT under torchrun on a CPU build of torch -------------------------------------------------------------
    _sft("sft-nccl-cpu-build", ["runtime.backend_mismatch"], "verl.trainer.sft_trainer",
         "model.path={work}/tiny data.train_files={work}/data/sft.parquet data.val_files=null "
         "data.micro_batch_size_per_gpu=2 data.train_batch_size=4 trainer.total_epochs=1 trainer.logger=console",
         "the SFT trainer (sft_trainer) under torchrun: it asks for a cpu:gloo,cuda:nccl process group, and this"
         " torch is a CPU build without NCCL", releases=(NEW,)),
    _sft("sft-no-device-fsdp", ["runtime.no_gpu_visible"], "verl.trainer.fsdp_sft_trainer",
         "model.partial_pretrain={work}/tiny data.train_files={work}/data/sft.parquet "
         "data.val_files={work}/data/sft.parquet data.micro_batch_size_per_gpu=2 data.train_batch_size=4 "
         "trainer.total_epochs=1 trainer.logger=[console]",
         "the FSDP SFT trainer (fsdp_sft_trainer) under torchrun on a host where torch sees no GPU: verl finds no device to"
         " give an NCCL / HCCL backend",
         releases=(OLD,)),
]

PROGRAM = Program(
    name="verl",
    releases=[
        # 0.5.0 caps numpy below 2 but takes the newest pyarrow, which needs numpy 2: pyarrow 19 (the floor verl
        # sets) is put back so that parquet files load at all
        Release(label=OLD, requirements=[f"verl=={OLD}", "torch==2.13.0", "transformers==4.57.6"],
                after=[["{python}", "-m", "pip", "install", "-q", "pyarrow==19.0.1"]]),
        Release(label=NEW, requirements=[f"verl=={NEW}", "torch==2.13.0"],
                # what the trainer imports but `pip install verl` leaves out (the verl-core extra's CPU part)
                after=[["{python}", "-m", "pip", "install", "-q", "TransferQueue>=0.1.10", "pyzmq", "msgspec",
                        "cachetools", "fastapi", "uvicorn"]]),
    ],
    cases=CASES,
)
