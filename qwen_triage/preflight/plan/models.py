"""The data of a plan: layouts, the recommendation, the result ``plan --format json`` prints."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from qwen_triage.preflight.model.config import ModelConfig, QuantInfo
from qwen_triage.preflight.output import PreflightOutput
from qwen_triage.preflight.plan.memory import Overhead
from qwen_triage.report.model import Diagnosis, Observation


class PlanModel(ModelConfig):
    params_b: float = Field(description="parameters, billions")
    weights_gib: float = Field(description="all weights at the planned dtype/quantization")


class Layout(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tp: int
    pp: int
    dp: int
    gpus_used: int
    valid: bool = Field(description="vLLM accepts it and it fits")
    refused: bool = Field(description="vLLM rejects the shape itself")
    fits: bool | None = Field(description="weights and one max-length sequence fit; None when refused")
    reasons: list[str] = Field(default_factory=list)
    codes: list[str] = Field(default_factory=list)
    weights_gib_per_gpu: float | None = None
    kv_cache_gib_per_gpu: float | None = None
    overhead_gib_per_gpu: float | None = Field(default=None, description="context, activations, graphs, NCCL")
    kv_cache_tokens: int | None = Field(default=None, description="per replica")
    max_concurrent_seqs: int | None = Field(default=None, description="max-length sequences at once, per replica")
    total_concurrent_seqs: int | None = None
    stage_layers: list[int] = Field(default_factory=list)
    gpu_order: list[int] = Field(default_factory=list, description="CUDA_VISIBLE_DEVICES order for this layout")
    tp_crosses_slow_link: bool | None = Field(default=None, description="None when the topology is unknown")
    slow_links: list[str] = Field(default_factory=list)
    tp_link: str | None = Field(default=None, description="worst link inside a TP group")
    fits_with: str | None = Field(default=None, description="a quantization that would make it fit")
    tradeoffs: list[str] = Field(default_factory=list)


class LayoutRef(BaseModel):
    tp: int
    pp: int
    dp: int
    why: str = ""


class PlanResult(PreflightOutput):
    kind: str = "plan"
    model: PlanModel
    gpus: int
    gpu_mem_bytes: int | None = Field(description="None when GPU memory is unknown (no NVML, no --gpu-mem)")
    gpu_mem_gib: float | None
    memory_known: bool = Field(default=True, description="False: fit, KV cache and sequence counts are not judged")
    gpu_memory_utilization: float
    max_model_len: int
    dtype: str
    kv_cache_dtype: str
    quantization: str | None
    kv_bytes_per_token: int = Field(description="whole model, one token")
    overhead: Overhead = Field(description="per GPU for TP 1; each layout carries its own overhead_gib_per_gpu")
    topology_known: bool
    layouts: list[Layout]
    recommended: LayoutRef | None
    alternatives: list[LayoutRef] = Field(default_factory=list)
    command: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    diagnoses: list[Diagnosis] = Field(default_factory=list)
    observations: list[Observation] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def layout(self, tp: int, pp: int = 1, dp: int = 1) -> Layout | None:
        return next((x for x in self.layouts if (x.tp, x.pp, x.dp) == (tp, pp, dp)), None)


class Settings(BaseModel):
    """What the user asked for, resolved (dtype, KV dtype, quantization, budget)."""

    dtype: str
    kv_bytes: int
    kv_dtype: str
    quant: QuantInfo | None
    quant_name: str | None
    max_model_len: int
    util: float
    gpu_mem: int
    batched_tokens: int
    enforce_eager: bool


def label(x: Layout | LayoutRef) -> str:
    parts = [f"TP {x.tp}"]
    if x.pp > 1:
        parts.append(f"PP {x.pp}")
    if x.dp > 1:
        parts.append(f"{x.dp} replicas")
    return " x ".join(parts)
