"""Builders for real safetensors and GGUF files (tiny tensors) and the preflight fixtures.

Test modules reach the builders through the ``build`` fixture rather than by
importing this file, so they work under any pytest import mode.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "preflight"

# A small Qwen2-shaped model: hidden 16, 2 heads / 1 KV head, 4 layers, vocab 64.
TINY = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "num_hidden_layers": 4,
    "vocab_size": 64,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
}


def tiny_tensors(cfg: dict = TINY) -> dict[str, np.ndarray]:
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    kv = cfg["num_key_value_heads"] * h // cfg["num_attention_heads"]
    rng = np.random.default_rng(0)

    def w(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float16)

    out = {"model.embed_tokens.weight": w(v, h)}
    for n in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{n}."
        out |= {
            p + "self_attn.q_proj.weight": w(h, h),
            p + "self_attn.q_proj.bias": w(h),
            p + "self_attn.k_proj.weight": w(kv, h),
            p + "self_attn.k_proj.bias": w(kv),
            p + "self_attn.v_proj.weight": w(kv, h),
            p + "self_attn.v_proj.bias": w(kv),
            p + "self_attn.o_proj.weight": w(h, h),
            p + "mlp.gate_proj.weight": w(i, h),
            p + "mlp.up_proj.weight": w(i, h),
            p + "mlp.down_proj.weight": w(h, i),
            p + "input_layernorm.weight": w(h),
            p + "post_attention_layernorm.weight": w(h),
        }
    out["model.norm.weight"] = w(h)
    out["lm_head.weight"] = w(v, h)
    return out


def write_model(directory: Path, shards: int = 3, cfg: dict = TINY, tokenizer: bool = True) -> dict[str, str]:
    """A Hugging Face style directory: config, tokenizer, N safetensors shards and their index."""
    from safetensors.numpy import save_file

    directory.mkdir(parents=True, exist_ok=True)
    tensors = tiny_tensors(cfg)
    names = list(tensors)
    per = -(-len(names) // shards)
    weight_map = {}
    for k in range(shards):
        shard = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[k * per : (k + 1) * per]}
        save_file(part, str(directory / shard), metadata={"format": "pt"})
        weight_map |= {n: shard for n in part}
    total = sum(t.nbytes for t in tensors.values())
    (directory / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2)
    )
    (directory / "config.json").write_text(json.dumps(cfg, indent=2))
    if tokenizer:
        vocab = {f"t{i}": i for i in range(cfg["vocab_size"] - 4)}
        added = [{"id": cfg["vocab_size"] - 4 + i, "content": f"<|x{i}|>", "special": True} for i in range(4)]
        (directory / "tokenizer.json").write_text(
            json.dumps({"model": {"type": "BPE", "vocab": vocab}, "added_tokens": added})
        )
        (directory / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 2048}))
    return weight_map


def write_gguf(path: Path, *, arch: str = "qwen2", tokens: int = 100, kv: dict | None = None) -> Path:
    """A real GGUF file: F32, F16 and Q8_0 tensors and a token list long enough to be skipped over."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(2)
    w.add_context_length(4096)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"tok{i}" for i in range(tokens)])
    for key, (kind, value) in (kv or {}).items():
        getattr(w, f"add_{kind}")(key, value)
    rng = np.random.default_rng(1)
    w.add_tensor("token_embd.weight", rng.standard_normal((tokens, 64)).astype(np.float16))
    for layer in range(2):
        q = gguf.quants.quantize(rng.standard_normal((64, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor(f"blk.{layer}.attn_q.weight", q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor(f"blk.{layer}.attn_norm.weight", np.ones(64, np.float32))
    w.add_tensor("output_norm.weight", np.ones(64, np.float32))
    w.add_tensor("output.weight", rng.standard_normal((tokens, 64)).astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="session")
def classes():
    from qwen_triage.preflight.findings import load_classes

    return load_classes()


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    d = tmp_path / "tiny-qwen"
    write_model(d)
    return d


@pytest.fixture
def gguf_file(tmp_path: Path) -> Path:
    return write_gguf(tmp_path / "tiny-q8_0.gguf")


def find(diagnoses, class_id: str):
    hits = [d for d in diagnoses if d.class_ == class_id]
    assert hits, f"no {class_id} in {[(d.class_, d.summary) for d in diagnoses]}"
    return hits[0]


@pytest.fixture(scope="session")
def build() -> SimpleNamespace:
    return SimpleNamespace(
        model=write_model, gguf=write_gguf, tensors=tiny_tensors, TINY=TINY, FIXTURES=FIXTURES, find=find
    )
