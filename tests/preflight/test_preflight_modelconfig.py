"""The built-in table against the published Qwen configs, and reading config.json / GGUF headers."""

from __future__ import annotations

import json

import pytest

from qwen_triage.preflight.plan import memory as mem
from qwen_triage.preflight.model.config import ModelConfigError, from_config_dict, from_table, load_model_config

# Published config.json values: heads, KV heads, layers, hidden, intermediate, vocab, head_dim, tied.
PUBLISHED = {
    "Qwen/Qwen2-0.5B": (14, 2, 24, 896, 4864, 151936, 64, True),
    "Qwen/Qwen2-1.5B": (12, 2, 28, 1536, 8960, 151936, 128, True),
    "Qwen/Qwen2-7B-Instruct": (28, 4, 28, 3584, 18944, 152064, 128, False),
    "Qwen/Qwen2-72B-Instruct": (64, 8, 80, 8192, 29568, 152064, 128, False),
    "Qwen/Qwen2.5-0.5B-Instruct": (14, 2, 24, 896, 4864, 151936, 64, True),
    "Qwen/Qwen2.5-1.5B-Instruct": (12, 2, 28, 1536, 8960, 151936, 128, True),
    "Qwen/Qwen2.5-3B-Instruct": (16, 2, 36, 2048, 11008, 151936, 128, True),
    "Qwen/Qwen2.5-7B-Instruct": (28, 4, 28, 3584, 18944, 152064, 128, False),
    "Qwen/Qwen2.5-14B-Instruct": (40, 8, 48, 5120, 13824, 152064, 128, False),
    "Qwen/Qwen2.5-32B-Instruct": (40, 8, 64, 5120, 27648, 152064, 128, False),
    "Qwen/Qwen2.5-72B-Instruct": (64, 8, 80, 8192, 29568, 152064, 128, False),
    "Qwen/Qwen3-0.6B": (16, 8, 28, 1024, 3072, 151936, 128, True),
    "Qwen/Qwen3-1.7B": (16, 8, 28, 2048, 6144, 151936, 128, True),
    "Qwen/Qwen3-4B": (32, 8, 36, 2560, 9728, 151936, 128, True),
    "Qwen/Qwen3-8B": (32, 8, 36, 4096, 12288, 151936, 128, False),
    "Qwen/Qwen3-14B": (40, 8, 40, 5120, 17408, 151936, 128, False),
    "Qwen/Qwen3-32B": (64, 8, 64, 5120, 25600, 151936, 128, False),
    "Qwen/Qwen3-30B-A3B": (32, 4, 48, 2048, 6144, 151936, 128, False),
    "Qwen/Qwen3-235B-A22B": (64, 4, 94, 4096, 12288, 151936, 128, False),
}

# Parameter counts as the model cards / hub state them, in billions.
PARAMS = {
    "Qwen/Qwen2.5-0.5B-Instruct": 0.49,
    "Qwen/Qwen2.5-7B-Instruct": 7.61,
    "Qwen/Qwen2.5-14B-Instruct": 14.7,
    "Qwen/Qwen2.5-32B-Instruct": 32.8,
    "Qwen/Qwen2.5-72B-Instruct": 72.7,
    "Qwen/Qwen3-0.6B": 0.6,
    "Qwen/Qwen3-8B": 8.2,
    "Qwen/Qwen3-32B": 32.8,
    "Qwen/Qwen3-30B-A3B": 30.5,
    "Qwen/Qwen3-235B-A22B": 235.0,
    "Qwen/Qwen2-57B-A14B-Instruct": 57.4,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_table_matches_published_config(name):
    heads, kv, layers, hidden, inter, vocab, head_dim, tied = PUBLISHED[name]
    m = from_table(name)
    assert m is not None
    assert (m.num_heads, m.num_kv_heads, m.num_layers) == (heads, kv, layers)
    assert (m.hidden_size, m.intermediate_size, m.vocab_size) == (hidden, inter, vocab)
    assert m.head_dim == head_dim
    assert m.tie_word_embeddings is tied


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_parameter_count_matches_model_card(name):
    params = mem.total_params(from_table(name)) / 1e9
    assert params == pytest.approx(PARAMS[name], rel=0.012)


def test_moe_shapes():
    a3b = from_table("Qwen/Qwen3-30B-A3B")
    assert (a3b.num_experts, a3b.experts_per_token, a3b.moe_intermediate_size) == (128, 8, 768)
    assert a3b.model_type == "qwen3_moe" and a3b.architecture == "Qwen3MoeForCausalLM"
    big = from_table("Qwen/Qwen3-235B-A22B")
    assert (big.num_experts, big.experts_per_token, big.moe_intermediate_size) == (128, 8, 1536)
    q2 = from_table("Qwen/Qwen2-57B-A14B-Instruct")
    assert (q2.num_experts, q2.moe_intermediate_size, q2.shared_expert_intermediate_size) == (64, 2560, 20480)


@pytest.mark.parametrize(
    "name, expect",
    [
        ("qwen2.5:32b", ("qwen2", 40, None)),
        ("Qwen2.5-32B-Instruct", ("qwen2", 40, None)),
        ("Qwen/Qwen2.5-32B-Instruct-AWQ", ("qwen2", 40, "awq")),
        ("Qwen/Qwen2.5-72B-Instruct-GPTQ-Int8", ("qwen2", 64, "gptq")),
        ("Qwen/Qwen3-32B-FP8", ("qwen3", 64, "fp8")),
        ("qwen3:30b-a3b", ("qwen3_moe", 32, None)),
        ("Qwen/Qwen2.5-Coder-32B-Instruct", ("qwen2", 40, None)),
        ("Qwen/QwQ-32B", ("qwen2", 40, None)),
    ],
)
def test_name_forms(name, expect):
    m = from_table(name)
    assert m is not None, name
    model_type, heads, quant = expect
    assert m.model_type == model_type and m.num_heads == heads
    assert (m.quantization.method if m.quantization else None) == quant


def test_context_lengths():
    assert from_table("Qwen/Qwen2.5-32B-Instruct").max_position_embeddings == 32768
    assert from_table("Qwen/Qwen3-32B").max_position_embeddings == 40960
    assert from_table("Qwen/Qwen3-30B-A3B-Instruct-2507").max_position_embeddings == 262144
    assert from_table("Qwen/QwQ-32B").max_position_embeddings == 40960


def test_quantized_72b_uses_padded_mlp():
    assert from_table("Qwen/Qwen2.5-72B-Instruct-AWQ").intermediate_size == 29696
    assert from_table("Qwen/Qwen2.5-72B-Instruct").intermediate_size == 29568


def test_unknown_names():
    assert from_table("meta-llama/Llama-3.1-8B") is None
    assert from_table("Qwen/Qwen2.5-9B") is None
    with pytest.raises(ModelConfigError, match="unknown model"):
        load_model_config("Qwen/Qwen2.5-9B-Instruct")


def test_config_json_equals_table(tmp_path):
    # The published Qwen2.5-32B-Instruct config.json (abridged to the fields that matter).
    cfg = {
        "architectures": ["Qwen2ForCausalLM"],
        "hidden_size": 5120,
        "intermediate_size": 27648,
        "max_position_embeddings": 32768,
        "model_type": "qwen2",
        "num_attention_heads": 40,
        "num_hidden_layers": 64,
        "num_key_value_heads": 8,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "vocab_size": 152064,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    local = load_model_config(tmp_path)
    table = from_table("Qwen/Qwen2.5-32B-Instruct")
    fields = (
        "num_layers",
        "num_heads",
        "num_kv_heads",
        "head_dim",
        "hidden_size",
        "intermediate_size",
        "vocab_size",
        "tie_word_embeddings",
        "max_position_embeddings",
        "qkv_bias",
    )
    assert {f: getattr(local, f) for f in fields} == {f: getattr(table, f) for f in fields}
    assert local.source.startswith("config.json")


def test_config_json_moe_and_quant():
    cfg = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "head_dim": 128,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "num_hidden_layers": 48,
        "vocab_size": 151936,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
    }
    m = from_config_dict(cfg, "x", "config.json: x")
    assert m.is_moe and m.dense_layers == []
    assert m.quantization.method == "fp8" and m.quantization.group_size == 128


def test_gguf_header_config(build, tmp_path):
    path = build.gguf(tmp_path / "m.gguf", tokens=120)
    m = load_model_config(path)
    assert (m.num_layers, m.num_heads, m.num_kv_heads, m.hidden_size, m.vocab_size) == (2, 4, 2, 64, 120)
    assert m.quantization.method == "gguf" and not m.tie_word_embeddings
    assert m.max_position_embeddings == 4096


def test_directory_without_config(tmp_path):
    with pytest.raises(ModelConfigError, match="no config.json"):
        load_model_config(tmp_path)
