"""Memory arithmetic for one GPU of a tensor x pipeline parallel layout, the way vLLM splits it.

Tensor parallelism splits the attention heads, the MLP width and the
vocabulary across TP ranks; norms and the MoE router are replicated; when TP
exceeds the KV heads, each rank keeps one whole KV head. Pipeline stages get
whole layers (vLLM's split: the remainder goes to the stages before the last,
which also carries the LM head).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from qwen_triage.preflight.model.config import ModelConfig, QuantInfo
from qwen_triage.units import GiB

DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}

# The overhead we charge per GPU, stated so users can argue with it. Measured
# from vLLM start-up logs on 24-80 GB cards: the CUDA context and cuBLAS
# workspaces take about half a GiB, captured CUDA graphs 0.3-1 GiB, NCCL and
# the custom all-reduce buffers a few hundred MiB once there is more than one rank.
CUDA_CONTEXT_BYTES = int(0.5 * GiB)
CUDA_GRAPHS_BYTES = int(0.5 * GiB)
NCCL_BYTES = int(0.25 * GiB)
MAX_NUM_SEQS = 256  # vLLM's default; the sampler holds fp32 logits for each
BLOCK_SIZE = 16  # vLLM's KV cache block, in tokens


def default_batched_tokens(gpu_mem_bytes: int) -> int:
    # vLLM's default --max-num-batched-tokens for `vllm serve` (chunked prefill):
    # bigger on big cards.
    return 8192 if gpu_mem_bytes >= 70 * GiB else 2048


def weight_bytes_per_param(model: ModelConfig, dtype: str, quant: QuantInfo | None) -> tuple[float, float]:
    """(bytes per quantized linear weight, bytes per other weight)."""
    dense = DTYPE_BYTES.get(dtype, 2)
    if quant is None:
        return dense, dense
    if quant.method == "gguf":
        return quant.bits / 8, quant.bits / 8
    bits = quant.bits
    per_weight = bits / 8
    if quant.group_size and quant.method in ("awq", "gptq", "compressed-tensors"):
        # One fp16 scale (and a packed zero point for AWQ/GPTQ) per group.
        per_weight += (2 + bits / 8) / quant.group_size
    elif quant.method == "bitsandbytes" and bits == 4:
        per_weight += 4 / 64  # one absmax per 64 weights
    return per_weight, dense


def stage_layers(num_layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage, as vLLM's ``get_pp_indices`` splits them."""
    base = num_layers // pp
    parts = [base] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts


def kv_heads_per_rank(model: ModelConfig, tp: int) -> int:
    return max(1, model.num_kv_heads // tp)


def layer_bytes(model: ModelConfig, layer: int, tp: int, linear_b: float, dense_b: float) -> float:
    h, hd = model.hidden_size, model.head_dim
    q_out = model.num_heads * hd / tp
    kv_out = kv_heads_per_rank(model, tp) * hd
    linear = h * q_out + 2 * h * kv_out + q_out * h  # q, k, v, o
    other: float = 2 * h  # input and post-attention norms
    if model.qkv_bias:
        other += q_out + 2 * kv_out
    if model.qk_norm:
        other += 2 * hd
    if model.is_moe and layer not in model.dense_layers:
        linear += model.num_experts * 3 * h * model.moe_intermediate_size / tp
        other += h * model.num_experts  # router, replicated, never quantized
        if model.shared_expert_intermediate_size:
            linear += 3 * h * model.shared_expert_intermediate_size / tp
            other += h  # shared expert gate
    else:
        linear += 3 * h * model.intermediate_size / tp
    return linear * linear_b + other * dense_b


def stage_weight_bytes(model: ModelConfig, tp: int, pp: int, dtype: str, quant: QuantInfo | None) -> list[float]:
    """Weight bytes on one GPU of each pipeline stage."""
    linear_b, dense_b = weight_bytes_per_param(model, dtype, quant)
    embed = model.vocab_size * model.hidden_size / tp * dense_b
    out: list[float] = []
    start = 0
    parts = stage_layers(model.num_layers, pp)
    for stage, count in enumerate(parts):
        total = sum(layer_bytes(model, i, tp, linear_b, dense_b) for i in range(start, start + count))
        start += count
        if stage == 0:
            total += embed
        if stage == pp - 1:
            total += model.hidden_size * dense_b  # final norm
            # A tied LM head shares the embedding, unless it sits on another stage.
            if not model.tie_word_embeddings or pp > 1:
                total += embed
        out.append(total)
    return out


def total_params(model: ModelConfig) -> int:
    per_stage = stage_weight_bytes(model, 1, 1, "float32", None)
    return int(sum(per_stage) / 4)


def kv_bytes_per_token(model: ModelConfig, layers: int, tp: int, kv_dtype_bytes: int) -> int:
    """K and V for one token on one GPU holding ``layers`` layers."""
    return 2 * layers * kv_heads_per_rank(model, tp) * model.head_dim * kv_dtype_bytes


class Overhead(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cuda_context_gib: float
    activations_gib: float
    cuda_graphs_gib: float
    nccl_gib: float
    total_gib: float
    assumptions: list[str]


def overhead_bytes(
    model: ModelConfig,
    tp: int,
    world: int,
    act_bytes: int,
    batched_tokens: int,
    enforce_eager: bool,
) -> tuple[int, Overhead]:
    h = model.hidden_size
    if model.is_moe:
        ffn = model.experts_per_token * model.moe_intermediate_size + model.shared_expert_intermediate_size
    else:
        ffn = model.intermediate_size
    attn = (model.num_heads + 2 * kv_heads_per_rank(model, tp) * tp) * model.head_dim / tp
    per_token = (4 * h + attn + 2 * ffn / tp) * act_bytes
    # The sampler keeps fp32 logits and probabilities for every running sequence.
    sampler = MAX_NUM_SEQS * model.vocab_size * 4 * 2
    activations = int(batched_tokens * per_token + sampler)
    graphs = 0 if enforce_eager else CUDA_GRAPHS_BYTES
    nccl = NCCL_BYTES if world > 1 else 0
    total = CUDA_CONTEXT_BYTES + activations + graphs + nccl
    return total, Overhead(
        cuda_context_gib=round(CUDA_CONTEXT_BYTES / GiB, 2),
        activations_gib=round(activations / GiB, 2),
        cuda_graphs_gib=round(graphs / GiB, 2),
        nccl_gib=round(nccl / GiB, 2),
        total_gib=round(total / GiB, 2),
        assumptions=[
            f"activations: profile run of {batched_tokens} batched tokens (vLLM's default --max-num-batched-tokens "
            f"for this card size) plus fp32 sampler logits for {MAX_NUM_SEQS} sequences",
            "CUDA context and cuBLAS workspace 0.5 GiB per GPU",
            "captured CUDA graphs 0.5 GiB per GPU (0 with --enforce-eager)",
            "NCCL and custom all-reduce buffers 0.25 GiB per GPU when TP x PP > 1",
        ],
    )


def round_tokens(tokens: float) -> int:
    return max(0, int(math.floor(tokens / BLOCK_SIZE)) * BLOCK_SIZE)
