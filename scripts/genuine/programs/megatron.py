"""Megatron Core (``pip install megatron-core``) as model-parallel training code drives it on a host without a GPU:
``TransformerConfig`` / ``ModelParallelConfig`` refusing a layout or precision in ``__post_init__`` (heads or query
groups against the tensor-parallel size, uneven pipeline stages, fp16 with bf16, expert parallelism without
experts, sequence parallelism without TP, PP without a pipeline dtype), ``parallel_state.initialize_model_parallel``
under torchrun with two local gloo ranks (a TP size that does not divide the world size, a model built before the
layout is set up) and ``dist_checkpointing.load`` of a directory that is not there; plus healthy runs (the version, a
tiny config, TP=1 on two gloo ranks torn down again, a tiny ``GPTModel`` from the local layer spec) with the
warnings megatron-core prints without Transformer Engine / Apex. Nothing is downloaded.
"""

from case import OFFLINE_ENV, TORCHRUN_LOCAL, Case, Program, Release

NEW = "0.16.1"

# python cfg.py MODE: a TransformerConfig built with the tiny base values and MODE's changes
CFG = """\
import sys

import torch
from megatron.core.transformer.transformer_config import TransformerConfig

mode = sys.argv[1]
base = dict(num_layers=4, hidden_size=64, num_attention_heads=8, use_cpu_initialization=True)
changes = {
    "ok": {},
    "heads-tp": dict(num_attention_heads=6, tensor_model_parallel_size=4),
    "groups-tp": dict(num_query_groups=3, tensor_model_parallel_size=2),
    "fp16-bf16": dict(fp16=True, bf16=True),
    "ep-no-experts": dict(expert_model_parallel_size=2),
    "moe-zero": dict(num_moe_experts=0),
    "sp-no-tp": dict(sequence_parallel=True),
    "pp-no-dtype": dict(pipeline_model_parallel_size=2),
    "middle-layers": dict(num_layers=8, pipeline_model_parallel_size=4, pipeline_dtype=torch.float32,
                          num_layers_in_first_pipeline_stage=1),
}[mode]
cfg = TransformerConfig(**{**base, **changes})
print("TransformerConfig:", cfg.num_layers, "layers,", cfg.num_attention_heads, "heads, ffn", cfg.ffn_hidden_size)
"""

# torchrun ... ps.py MODE: two gloo ranks setting up (or not) Megatron's model-parallel layout
PS = """\
import sys

import torch.distributed as dist
from megatron.core import parallel_state

mode = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
if mode == "tp1":
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1)
    if rank == 0:
        print("tp", parallel_state.get_tensor_model_parallel_world_size(), "pp",
              parallel_state.get_pipeline_model_parallel_world_size(), "dp",
              parallel_state.get_data_parallel_world_size(), flush=True)
elif mode == "tp3":
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=3)
elif mode in ("gpt", "gpt-no-layout"):
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.transformer_config import TransformerConfig
    if mode == "gpt":
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=1)
    cfg = TransformerConfig(num_layers=2, hidden_size=32, num_attention_heads=4, use_cpu_initialization=True)
    model = GPTModel(config=cfg, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=128,
                     max_sequence_length=16)
    if rank == 0:
        print("GPTModel parameters", sum(p.numel() for p in model.parameters()), flush=True)
elif mode == "ckpt-missing":
    import torch
    from megatron.core import dist_checkpointing
    from megatron.core.dist_checkpointing import ShardedTensor
    sd = {"w": ShardedTensor.from_rank_offsets("w", torch.zeros(4, 4), replica_id=rank)}
    dist_checkpointing.load(sd, "checkpoints/iter_0000100")
parallel_state.destroy_model_parallel()
dist.destroy_process_group()
"""

FILES = {"cfg.py": CFG, "ps.py": PS}
ENV = dict(OFFLINE_ENV)


def _cfg(id, expect, mode, note, exit="fail"):
    """``python cfg.py MODE``: one TransformerConfig."""
    return Case(id=id, expect=expect, argv=["{python}", "cfg.py", mode], files=FILES, env=dict(ENV), note=note,
                exit=exit, timeout=90)


def _ranks(id, expect, mode, note, exit="fail"):
    """torchrun of two local gloo ranks running ``ps.py MODE``."""
    return Case(id=id, expect=expect, argv=["{bin}/torchrun", "--nproc-per-node", "2", *TORCHRUN_LOCAL, "ps.py", mode],
                files=FILES, env=dict(ENV), input="torchrun", note=note, exit=exit, timeout=120)


CASES = [
    # --- healthy --------------------------------------------------------------------------------------------
    Case(id="version-healthy", expect=[], argv=["{python}", "-c", "import megatron.core as m; print(m.__version__)"],
         env=dict(ENV), exit="ok", note="healthy: `import megatron.core` and its version"),
    _cfg("config-healthy", [], "ok",
         "healthy: a tiny TransformerConfig (4 layers, 8 heads) with the warnings __post_init__ prints", exit="ok"),
    _ranks("parallel-state-tp1-healthy", [], "tp1",
           "healthy: initialize_model_parallel(TP=1, PP=1) on two gloo ranks (DP=2), then destroy_model_parallel;"
           " with the 'Transformer Engine and Apex are not installed' fallback warnings", exit="ok"),
    _ranks("gpt-model-healthy", [], "gpt",
           "healthy: a tiny GPTModel from get_gpt_layer_local_spec built on CPU after initialize_model_parallel(TP=1)"
           " on two gloo ranks ('Apex is not installed. Falling back to Torch Norm')", exit="ok"),
    # --- TransformerConfig / ModelParallelConfig __post_init__ -----------------------------------------------
    _cfg("config-heads-tp-indivisible", ["config.tp_indivisible"], "heads-tp",
         "num_attention_heads=6 with tensor_model_parallel_size=4: the heads do not split over the TP ranks"),
    _cfg("config-query-groups-tp-indivisible", ["config.tp_indivisible"], "groups-tp",
         "num_query_groups=3 (GQA) with tensor_model_parallel_size=2: neither a multiple nor a divisor of TP"),
    _cfg("config-middle-stage-layers-indivisible", ["config.tp_indivisible"], "middle-layers",
         "8 layers over 4 pipeline stages with num_layers_in_first_pipeline_stage=1: the 7 left do not split over"
         " the 3 middle stages"),
    _cfg("config-fp16-and-bf16", ["config.bad_argument"], "fp16-bf16", "fp16=True and bf16=True together"),
    _cfg("config-expert-parallel-without-experts", ["config.bad_argument"], "ep-no-experts",
         "expert_model_parallel_size=2 on a dense model (num_moe_experts unset)"),
    _cfg("config-moe-experts-zero", ["config.bad_argument"], "moe-zero", "num_moe_experts=0"),
    _cfg("config-sequence-parallel-without-tp", ["config.bad_argument"], "sp-no-tp",
         "sequence_parallel=True with tensor_model_parallel_size=1 (ModelParallelConfig.__post_init__)"),
    _cfg("config-pipeline-dtype-missing", ["config.bad_argument"], "pp-no-dtype",
         "pipeline_model_parallel_size=2 without pipeline_dtype (ModelParallelConfig.__post_init__)"),
    # --- parallel_state under torchrun (two gloo ranks) ------------------------------------------------------
    _ranks("parallel-state-world-size-indivisible", ["config.insufficient_gpus"], "tp3",
           "initialize_model_parallel(tensor_model_parallel_size=3) on a world of 2 ranks: the TP x PP x CP product"
           " does not divide the world size"),
    _ranks("gpt-model-before-initialize", ["config.bad_argument"], "gpt-no-layout",
           "a GPTModel built after init_process_group but without parallel_state.initialize_model_parallel: the"
           " layers ask parallel_state for a group that was never created ('... group is not initialized')"),
    _ranks("dist-checkpoint-dir-missing", ["model.file_missing"], "ckpt-missing",
           "dist_checkpointing.load of checkpoints/iter_0000100, which does not exist (a mistyped --load / resume"
           " path)"),
]

PROGRAM = Program(
    name="megatron",
    releases=[Release(label=NEW, requirements=[f"megatron-core=={NEW}", "torch==2.13.0"])],
    cases=CASES,
)
