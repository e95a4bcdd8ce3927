"""A model's shape: from ``config.json``, a GGUF header, or the built-in Qwen table.

The table lets ``plan`` answer for a model that is not downloaded yet. Its
numbers are the published ``config.json`` values of the Qwen2, Qwen2.5 and
Qwen3 releases (the -Instruct, -Coder and quantized variants share their
base model's shape).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from qwen_triage.preflight.model import jsontext


class ModelConfigError(ValueError):
    """The model could not be read or named; the CLI turns this into exit 2."""


class QuantInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    method: str  # awq, gptq, fp8, bitsandbytes, compressed-tensors, gguf
    bits: float
    # Weights per scale group along the input dimension; vLLM needs each TP
    # shard of a row-parallel layer to hold whole groups. None = per channel.
    group_size: int | None = None
    prequantized: bool = True  # False: vLLM quantizes a 16-bit checkpoint while loading


class ModelConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    source: str = Field(description="where the numbers came from: a config.json, a GGUF header, or the built-in table")
    path: str | None = None
    architecture: str | None = None
    model_type: str | None = None
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    dtype: str = "bfloat16"
    max_position_embeddings: int = 32768
    qkv_bias: bool = False
    qk_norm: bool = False
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    dense_layers: list[int] = Field(default_factory=list, description="layer indices with a dense MLP in an MoE model")
    quantization: QuantInfo | None = None
    weights_bytes_on_disk: int | None = None

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0


# --- the built-in table ----------------------------------------------------------


class _Shape(NamedTuple):
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    layers: int
    vocab: int
    tied: bool
    head_dim: int | None = None
    experts: int = 0
    experts_per_token: int = 0
    moe_intermediate: int = 0
    shared_intermediate: int = 0


# Family -> (architecture, model_type, max positions, qkv bias, qk norm).
_FAMILY = {
    "qwen2": ("Qwen2ForCausalLM", "qwen2", 32768, True, False),
    "qwen2.5": ("Qwen2ForCausalLM", "qwen2", 32768, True, False),
    "qwen3": ("Qwen3ForCausalLM", "qwen3", 40960, False, True),
}
_MOE_ARCH = {"qwen2": ("Qwen2MoeForCausalLM", "qwen2_moe"), "qwen3": ("Qwen3MoeForCausalLM", "qwen3_moe")}

# (family, size) -> shape. Sizes as Qwen names them ("32b", "30b-a3b").
KNOWN: dict[tuple[str, str], _Shape] = {
    ("qwen2", "0.5b"): _Shape(896, 4864, 14, 2, 24, 151936, True),
    ("qwen2", "1.5b"): _Shape(1536, 8960, 12, 2, 28, 151936, True),
    ("qwen2", "7b"): _Shape(3584, 18944, 28, 4, 28, 152064, False),
    ("qwen2", "72b"): _Shape(8192, 29568, 64, 8, 80, 152064, False),
    ("qwen2", "57b-a14b"): _Shape(3584, 18944, 28, 4, 28, 151936, False, None, 64, 8, 2560, 20480),
    ("qwen2.5", "0.5b"): _Shape(896, 4864, 14, 2, 24, 151936, True),
    ("qwen2.5", "1.5b"): _Shape(1536, 8960, 12, 2, 28, 151936, True),
    ("qwen2.5", "3b"): _Shape(2048, 11008, 16, 2, 36, 151936, True),
    ("qwen2.5", "7b"): _Shape(3584, 18944, 28, 4, 28, 152064, False),
    ("qwen2.5", "14b"): _Shape(5120, 13824, 40, 8, 48, 152064, False),
    ("qwen2.5", "32b"): _Shape(5120, 27648, 40, 8, 64, 152064, False),
    ("qwen2.5", "72b"): _Shape(8192, 29568, 64, 8, 80, 152064, False),
    # Qwen3 fixes head_dim at 128 whatever hidden/heads is (0.6B: 1024/16 = 64).
    ("qwen3", "0.6b"): _Shape(1024, 3072, 16, 8, 28, 151936, True, 128),
    ("qwen3", "1.7b"): _Shape(2048, 6144, 16, 8, 28, 151936, True, 128),
    ("qwen3", "4b"): _Shape(2560, 9728, 32, 8, 36, 151936, True, 128),
    ("qwen3", "8b"): _Shape(4096, 12288, 32, 8, 36, 151936, False, 128),
    ("qwen3", "14b"): _Shape(5120, 17408, 40, 8, 40, 151936, False, 128),
    ("qwen3", "32b"): _Shape(5120, 25600, 64, 8, 64, 151936, False, 128),
    ("qwen3", "30b-a3b"): _Shape(2048, 6144, 32, 4, 48, 151936, False, 128, 128, 8, 768),
    ("qwen3", "235b-a22b"): _Shape(4096, 12288, 64, 4, 94, 151936, False, 128, 128, 8, 1536),
}

# Qwen pads the 72B MLP from 29568 to 29696 in its AWQ/GPTQ releases so that
# the shards stay whole quantization groups under tensor parallelism.
_PADDED_QUANT_INTERMEDIATE = {("qwen2", "72b"): 29696, ("qwen2.5", "72b"): 29696}

_NAME = re.compile(
    r"^(?:.*/)?(?P<family>qwq|qwen(?:2\.5|2|3))(?P<variant>-coder|-math)?"
    r"[-_: ]?(?P<size>\d+(?:\.\d+)?b(?:-a\d+(?:\.\d+)?b)?)(?P<rest>.*)$"
)

_SUFFIX_QUANT = [
    (re.compile(r"awq"), QuantInfo(method="awq", bits=4, group_size=128)),
    (re.compile(r"gptq-int8"), QuantInfo(method="gptq", bits=8, group_size=128)),
    (re.compile(r"gptq"), QuantInfo(method="gptq", bits=4, group_size=128)),
    # Qwen's -FP8 checkpoints use 128x128 blocks.
    (re.compile(r"fp8"), QuantInfo(method="fp8", bits=8, group_size=128)),
]


def from_table(name: str) -> ModelConfig | None:
    """The built-in shape for a Qwen model name (hub id, Ollama tag or bare name)."""
    m = _NAME.match(name.strip().lower())
    if not m:
        return None
    family, size, rest = m["family"], m["size"], m["rest"]
    max_pos_override = None
    if family == "qwq":
        # QwQ-32B is a Qwen2.5-32B with a longer native context.
        family, max_pos_override = "qwen2.5", 40960
    shape = KNOWN.get((family, size))
    if shape is None:
        return None
    arch, model_type, max_pos, qkv_bias, qk_norm = _FAMILY[family]
    if shape.experts:
        arch, model_type = _MOE_ARCH["qwen3" if family == "qwen3" else "qwen2"]
    if family == "qwen3" and "2507" in rest:
        max_pos = 262144
    quant = next((q for pattern, q in _SUFFIX_QUANT if pattern.search(rest)), None)
    intermediate = shape.intermediate
    if quant and quant.method in ("awq", "gptq"):
        intermediate = _PADDED_QUANT_INTERMEDIATE.get((family, size), intermediate)
    return ModelConfig(
        name=name,
        source="built-in table",
        architecture=arch,
        model_type=model_type,
        num_layers=shape.layers,
        num_heads=shape.heads,
        num_kv_heads=shape.kv_heads,
        head_dim=shape.head_dim or shape.hidden // shape.heads,
        hidden_size=shape.hidden,
        intermediate_size=intermediate,
        vocab_size=shape.vocab,
        tie_word_embeddings=shape.tied,
        dtype="bfloat16",
        max_position_embeddings=max_pos_override or max_pos,
        qkv_bias=qkv_bias,
        qk_norm=qk_norm,
        num_experts=shape.experts,
        experts_per_token=shape.experts_per_token,
        moe_intermediate_size=shape.moe_intermediate,
        shared_expert_intermediate_size=shape.shared_intermediate,
        quantization=quant,
    )


# --- config.json -------------------------------------------------------------------


def _quant_from_config(q: dict[str, Any] | None) -> QuantInfo | None:
    if not isinstance(q, dict):
        return None
    method = str(q.get("quant_method") or q.get("quantization_method") or "").lower()
    if not method:
        return None
    if method == "fp8":
        block = q.get("weight_block_size")
        group = int(block[-1]) if isinstance(block, list) and block else None
        return QuantInfo(method="fp8", bits=8, group_size=group)
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        bits = q.get("bits") or q.get("w_bit") or 4
        group = q.get("group_size") or q.get("q_group_size") or 128
        return QuantInfo(method=method.split("_")[0], bits=float(bits), group_size=int(group) if group > 0 else None)
    if method == "bitsandbytes":
        bits = 8 if q.get("load_in_8bit") else 4
        return QuantInfo(method="bitsandbytes", bits=bits, group_size=None)
    if method == "compressed-tensors":
        for group in (q.get("config_groups") or {}).values():
            weights = (group or {}).get("weights") or {}
            bits = weights.get("num_bits")
            if bits:
                size = weights.get("group_size")
                return QuantInfo(method=method, bits=float(bits), group_size=int(size) if size else None)
        return QuantInfo(method=method, bits=8)
    return QuantInfo(method=method, bits=8)


def _dense_layers(cfg: dict[str, Any], layers: int) -> list[int]:
    only = set(cfg.get("mlp_only_layers") or [])
    step = int(cfg.get("decoder_sparse_step") or 1)
    return [i for i in range(layers) if i in only or (i + 1) % step != 0]


def from_config_dict(cfg: dict[str, Any], name: str, source: str, path: str | None = None) -> ModelConfig:
    if isinstance(cfg.get("text_config"), dict):
        # Vision-language configs nest the language model's numbers.
        cfg = {**cfg, **cfg["text_config"]}
    try:
        hidden = int(cfg["hidden_size"])
        heads = int(cfg["num_attention_heads"])
        layers = int(cfg["num_hidden_layers"])
        vocab = int(cfg["vocab_size"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelConfigError(f"{source}: missing or bad field {exc}") from None
    kv = int(cfg.get("num_key_value_heads") or heads)
    experts = int(cfg.get("num_experts") or cfg.get("num_local_experts") or 0)
    model_type = cfg.get("model_type")
    archs = cfg.get("architectures") or []
    return ModelConfig(
        name=name,
        source=source,
        path=path,
        architecture=archs[0] if archs else None,
        model_type=model_type,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=int(cfg.get("head_dim") or hidden // heads),
        hidden_size=hidden,
        intermediate_size=int(cfg.get("intermediate_size") or 0),
        vocab_size=vocab,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        dtype=str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"),
        max_position_embeddings=int(cfg.get("max_position_embeddings") or 32768),
        qkv_bias=bool(cfg.get("attention_bias", model_type in ("qwen2", "qwen2_moe"))),
        qk_norm=model_type in ("qwen3", "qwen3_moe"),
        num_experts=experts,
        experts_per_token=int(cfg.get("num_experts_per_tok") or 0),
        moe_intermediate_size=int(cfg.get("moe_intermediate_size") or 0),
        shared_expert_intermediate_size=int(cfg.get("shared_expert_intermediate_size") or 0),
        dense_layers=_dense_layers(cfg, layers) if experts else [],
        quantization=_quant_from_config(cfg.get("quantization_config")),
    )


def _disk_bytes(directory: Path) -> int | None:
    sizes = [p.stat().st_size for p in directory.glob("*.safetensors")]
    return sum(sizes) if sizes else None


def read_config_json(path: Path) -> dict[str, Any]:
    try:
        data = jsontext.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelConfigError(f"{path}: cannot read config.json: {exc}") from None
    if not isinstance(data, dict):
        raise ModelConfigError(f"{path}: config.json is not a JSON object")
    return data


# --- GGUF ----------------------------------------------------------------------------


def from_gguf(path: Path) -> ModelConfig:
    from qwen_triage.preflight.model.gguf_check import GgufDamage, read_header

    try:
        header = read_header(path)
    except GgufDamage as exc:
        raise ModelConfigError(f"{path}: {exc}") from None
    kv = header.kv
    arch = str(kv.get("general.architecture", ""))

    def get(key: str, default: Any = None) -> Any:
        return kv.get(f"{arch}.{key}", default)

    try:
        heads = int(get("attention.head_count"))
        hidden = int(get("embedding_length"))
        layers = int(get("block_count"))
    except (TypeError, ValueError):
        raise ModelConfigError(f"{path}: GGUF header lacks the {arch} block/head counts") from None
    vocab = get("vocab_size") or header.array_lengths.get("tokenizer.ggml.tokens") or 0
    names = {t.name for t in header.tensors}
    experts = int(get("expert_count") or 0)
    return ModelConfig(
        name=path.name,
        source=f"GGUF header: {path}",
        path=str(path),
        architecture=arch,
        model_type=arch,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=int(get("attention.head_count_kv") or heads),
        head_dim=int(get("attention.key_length") or hidden // heads),
        hidden_size=hidden,
        intermediate_size=int(get("feed_forward_length") or 0),
        vocab_size=int(vocab),
        tie_word_embeddings="output.weight" not in names,
        dtype="float16",
        max_position_embeddings=int(get("context_length") or 32768),
        num_experts=experts,
        experts_per_token=int(get("expert_used_count") or 0),
        moe_intermediate_size=int(get("expert_feed_forward_length") or 0),
        quantization=QuantInfo(method="gguf", bits=8 * header.tensor_bytes / max(header.tensor_elements, 1)),
        weights_bytes_on_disk=header.tensor_bytes,
    )


# --- entry point ---------------------------------------------------------------------


def load_model_config(path_or_name: str | Path) -> ModelConfig:
    """Read a model directory, a ``config.json``, a ``.gguf`` file, or a known Qwen name."""
    text = str(path_or_name)
    path = Path(text).expanduser()
    if path.is_dir():
        cfg_path = path / "config.json"
        if cfg_path.is_file():
            model = from_config_dict(read_config_json(cfg_path), text, f"config.json: {cfg_path}", str(path))
            return model.model_copy(update={"weights_bytes_on_disk": _disk_bytes(path)})
        ggufs = sorted(path.glob("*.gguf"))
        if ggufs:
            return from_gguf(ggufs[0])
        raise ModelConfigError(f"{path}: no config.json (and no .gguf) in this directory")
    if path.is_file():
        if path.suffix == ".gguf" or _is_gguf(path):
            return from_gguf(path)
        return from_config_dict(read_config_json(path), text, f"config.json: {path}", str(path.parent))
    known = from_table(text)
    if known is not None:
        return known
    raise ModelConfigError(
        f"unknown model {text!r}: not a directory with config.json, not a file, and not a Qwen2/Qwen2.5/Qwen3 "
        f"name in the built-in table (e.g. Qwen/Qwen2.5-32B-Instruct, qwen3:30b-a3b)"
    )


def _is_gguf(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(4) == b"GGUF"
