"""Layouts against the published Qwen shapes: what vLLM refuses, what fits, what to launch."""

from __future__ import annotations

import json

import pytest

from qwen_triage.rulepack.actions import Action
from qwen_triage.preflight.plan import memory as mem
from qwen_triage.preflight.model.config import from_table
from qwen_triage.preflight.machine.nvml import ReplayProbe
from qwen_triage.preflight.plan.layouts import plan_layouts
from qwen_triage.preflight.machine.topology import place
from qwen_triage.units import GiB, parse_size

CARD_24 = 24564 * 2**20  # what NVML reports for a "24 GB" RTX 4090
CARD_80 = 81559 * 2**20  # H100 80GB HBM3


def plan(name, gpus, mem_bytes=CARD_24, classes=None, **kw):
    return plan_layouts(from_table(name), gpus, mem_bytes, classes=classes, **kw)


# --- the example: Qwen2.5-32B on six 24 GB cards -------------------------------------------


def test_qwen25_32b_on_six_24gb_cards(classes):
    r = plan("Qwen/Qwen2.5-32B-Instruct", 6, classes=classes)
    tp6 = r.layout(6)
    assert tp6.refused and not tp6.valid
    assert any("40 attention heads" in reason for reason in tp6.reasons)
    assert "tp-heads" in tp6.codes
    assert any("TP 6 on all 6 GPUs is impossible" in n for n in r.notes)

    tp2pp3, tp4, tp2x3 = r.layout(2, 3), r.layout(4), r.layout(2, 1, 3)
    assert tp2pp3.valid and tp4.valid
    assert tp4.gpus_used == 4 and any("leaves 2 of 6 GPUs free" in t for t in tp4.tradeoffs)
    # Three bf16 replicas need 30.5 GiB per card: offered, with what it would take.
    assert not tp2x3.valid and not tp2x3.refused and tp2x3.codes == ["weights-fit"]
    assert tp2x3.weights_gib_per_gpu == pytest.approx(30.5, abs=0.1)
    assert tp2x3.fits_with and "AWQ" in tp2x3.fits_with

    assert (r.recommended.tp, r.recommended.pp, r.recommended.dp) == (2, 3, 1)
    assert "TP 6 is refused" in r.recommended.why
    offered = {(a.tp, a.pp, a.dp) for a in r.alternatives}
    assert {(4, 1, 1), (2, 1, 3)} <= offered
    assert r.command[:3] == ["vllm", "serve", "Qwen/Qwen2.5-32B-Instruct"]
    assert r.command[3:7] == ["--tensor-parallel-size", "2", "--pipeline-parallel-size", "3"]
    assert r.diagnoses == []

    # Weights per GPU: 61.0 GiB of bf16 over 4 cards; KV cache 256 KiB per token over the whole model.
    assert tp4.weights_gib_per_gpu == pytest.approx(61.03 / 4, abs=0.05)
    assert r.kv_bytes_per_token == 2 * 64 * 8 * 128 * 2
    assert tp4.kv_cache_tokens % mem.BLOCK_SIZE == 0
    assert tp4.max_concurrent_seqs == tp4.kv_cache_tokens // 32768 >= 1


def test_qwen25_32b_awq_three_replicas(classes):
    r = plan("Qwen/Qwen2.5-32B-Instruct", 6, quantization="awq", classes=classes)
    assert r.layout(2, 1, 3).valid
    assert (r.recommended.tp, r.recommended.pp, r.recommended.dp) == (2, 1, 3)
    assert r.command[2] == "Qwen/Qwen2.5-32B-Instruct-AWQ"
    assert "--data-parallel-size" in r.command and "--quantization" not in r.command
    assert any("pre-quantized checkpoint" in n for n in r.notes)


def test_requested_tp6_is_a_diagnosis(classes):
    r = plan("Qwen/Qwen2.5-32B-Instruct", 6, requested=(6, 1, 1), classes=classes)
    d = r.diagnoses[0]
    assert d.class_ == "config.tp_indivisible"
    assert d.rule == "preflight.plan.tp-heads"
    assert "40 attention heads" in d.summary
    assert d.evidence[0].line == 0 and "num_attention_heads = 40" in d.evidence[0].text
    actions = [f.action for f in d.fix if f.action]
    assert actions[0]["type"] == "choose_layout"
    assert {"type": "set_arg", "arg": "--tensor-parallel-size", "value": "2", "safety": "safe"} in actions
    for a in actions:
        from pydantic import TypeAdapter

        TypeAdapter(Action).validate_python({k: v for k, v in a.items() if k != "safety"})


def test_requested_world_too_big(classes):
    r = plan("Qwen/Qwen2.5-7B-Instruct", 4, requested=(4, 2, 1), classes=classes)
    assert [d.class_ for d in r.diagnoses] == ["config.insufficient_gpus"]
    assert "more than the 4 GPUs" in r.diagnoses[0].summary


def test_json_contract(classes):
    r = plan("Qwen/Qwen2.5-32B-Instruct", 6, classes=classes)
    data = json.loads(r.model_dump_json(by_alias=True))
    assert {"model", "gpus", "layouts", "recommended", "command"} <= set(data)
    assert data["gpus"] == 6
    for x in data["layouts"]:
        assert {"tp", "pp", "dp", "gpus_used", "valid", "reasons", "weights_gib_per_gpu", "kv_cache_tokens"} <= set(x)
    assert set(data["recommended"]) >= {"tp", "pp", "dp"}
    assert all(isinstance(a, str) for a in data["command"])
    # Every layout with TP x PP x DP <= 6 is listed exactly once.
    triples = [(x["tp"], x["pp"], x["dp"]) for x in data["layouts"]]
    expected = [(t, p, d) for t in range(1, 7) for p in range(1, 7) for d in range(1, 7) if t * p * d <= 6]
    assert sorted(triples) == sorted(expected)


# --- head-count facts across the families ---------------------------------------------------------


@pytest.mark.parametrize(
    "name, accepted, refused",
    [
        ("Qwen/Qwen2.5-7B-Instruct", [1, 2, 4], [3, 5, 6, 7, 8]),  # 28 heads, 4 KV heads
        ("Qwen/Qwen2.5-14B-Instruct", [1, 2, 4, 8], [3, 5, 6, 7]),  # 40 / 8
        ("Qwen/Qwen2.5-32B-Instruct", [1, 2, 4, 8], [3, 5, 6, 7]),  # 40 / 8
        ("Qwen/Qwen2.5-72B-Instruct", [1, 2, 4, 8], [3, 5, 6, 7]),  # 64 / 8
        ("Qwen/Qwen3-8B", [1, 2, 4, 8], [3, 5, 6, 7]),  # 32 / 8
        ("Qwen/Qwen3-14B", [1, 2, 4, 8], [3, 5, 6, 7]),  # 40 / 8
        ("Qwen/Qwen3-32B", [1, 2, 4, 8], [3, 5, 6, 7]),  # 64 / 8
        ("Qwen/Qwen3-30B-A3B", [1, 2, 4, 8], [3, 5, 6, 7]),  # 32 / 4: TP 8 keeps one KV head per rank
        ("Qwen/Qwen3-235B-A22B", [1, 2, 4, 8], [3, 5, 6, 7]),  # 64 / 4
    ],
)
def test_tp_sizes_vllm_accepts(name, accepted, refused, classes):
    r = plan(name, 8, CARD_80 * 8, classes=classes)  # memory is not the question here
    for tp in accepted:
        assert not r.layout(tp).refused, (name, tp, r.layout(tp).reasons)
    for tp in refused:
        assert r.layout(tp).refused, (name, tp)


def test_pp_beyond_layers_refused(classes):
    r = plan_layouts(from_table("Qwen/Qwen2.5-0.5B"), 32, 80 * GiB, classes=classes)
    assert "pp-layers" in r.layout(1, 25).codes  # 24 layers
    assert not r.layout(1, 24).refused


def test_vllm_pp_split():
    assert mem.stage_layers(64, 3) == [21, 22, 21]
    assert mem.stage_layers(80, 6) == [13, 13, 13, 14, 14, 13]  # remainder before the last stage
    assert mem.stage_layers(94, 4) == [23, 24, 24, 23]
    assert sum(mem.stage_layers(28, 5)) == 28


def test_kv_heads_replicated_past_tp():
    big = from_table("Qwen/Qwen3-235B-A22B")
    assert mem.kv_heads_per_rank(big, 8) == 1
    assert mem.kv_bytes_per_token(big, 94, 8, 2) == 2 * 94 * 1 * 128 * 2
    assert mem.kv_bytes_per_token(from_table("Qwen/Qwen2.5-7B-Instruct"), 28, 1, 2) == 57344


def test_235b_on_eight_h100(classes):
    r = plan("Qwen/Qwen3-235B-A22B", 8, CARD_80, classes=classes)
    assert (r.recommended.tp, r.recommended.pp, r.recommended.dp) == (8, 1, 1)
    assert r.layout(8).weights_gib_per_gpu == pytest.approx(437.9 / 8, rel=0.02)
    assert r.diagnoses == []


def test_72b_does_not_fit_four_24gb_cards(classes):
    r = plan("Qwen/Qwen2.5-72B-Instruct", 4, classes=classes)
    assert r.recommended is None and r.command == []
    d = r.diagnoses[0]
    assert d.class_ == "memory.gpu_oom" and d.rule == "preflight.plan.weights-fit"
    assert any(f.action and f.action.get("arg") == "--quantization" for f in d.fix)


def test_kv_short_lowers_context(classes):
    # Qwen3-8B fits one 24 GB card, but not with its full 40960-token context.
    r = plan("Qwen/Qwen3-8B", 1, classes=classes)
    x = r.layout(1)
    assert x.codes == ["kv-short"] and 0 < x.kv_cache_tokens < 40960
    d = r.diagnoses[0]
    assert d.class_ == "memory.kv_cache_insufficient"
    lower = next(f.action for f in d.fix if f.action and f.action["type"] == "lower_max_model_len")
    assert int(lower["to"]) <= x.kv_cache_tokens and int(lower["to"]) % 1024 == 0
    assert r.command[r.command.index("--max-model-len") + 1] == lower["to"]
    # Asking for less context makes it fit.
    assert plan("Qwen/Qwen3-8B", 1, classes=classes, max_model_len=16384).layout(1).valid


def test_max_len_beyond_model(classes):
    r = plan("Qwen/Qwen2.5-7B-Instruct", 2, classes=classes, max_model_len=131072)
    assert "config.bad_argument" in [d.class_ for d in r.diagnoses]


def test_quant_groups_must_stay_whole(classes):
    # Qwen3-30B-A3B-FP8 uses 128x128 blocks: 768/4 = 192 is not whole blocks; 768/2 = 384 is.
    r = plan("Qwen/Qwen3-30B-A3B-FP8", 8, CARD_80, classes=classes)
    assert "quant-group" in r.layout(4).codes
    assert not r.layout(2).refused
    # The padded 72B AWQ MLP (29696 = 232 x 128) splits over 8.
    r72 = plan("Qwen/Qwen2.5-72B-Instruct-AWQ", 8, CARD_80, classes=classes)
    assert not r72.layout(8).refused


def test_bf16_on_turing(classes):
    r = plan("Qwen/Qwen2.5-7B-Instruct", 2, 16 * GiB, classes=classes, compute_capabilities=["7.5", "7.5"])
    assert r.dtype == "float16" and "--dtype" in r.command
    r = plan(
        "Qwen/Qwen2.5-7B-Instruct", 2, 16 * GiB, classes=classes, dtype="bfloat16", compute_capabilities=["7.5", "7.5"]
    )
    assert "config.dtype_unsupported" in [d.class_ for d in r.diagnoses]


def test_fp8_kv_cache_doubles_tokens(classes):
    a = plan("Qwen/Qwen2.5-32B-Instruct", 6, classes=classes).layout(4)
    b = plan("Qwen/Qwen2.5-32B-Instruct", 6, classes=classes, kv_cache_dtype="fp8").layout(4)
    assert b.kv_cache_tokens == pytest.approx(2 * a.kv_cache_tokens, rel=0.01)


# --- topology --------------------------------------------------------------------------------------


def test_tp_groups_avoid_the_socket_link(build, classes):
    snap = ReplayProbe(build.FIXTURES / "snapshot-6x4090-pcie.json").snapshot()
    r = plan("Qwen/Qwen2.5-32B-Instruct", 6, classes=classes, topology=snap.topology)
    x = r.layout(2, 3)
    # Two sockets of three GPUs: two TP pairs stay on a socket (PHB), one must cross (SYS).
    assert x.tp_crosses_slow_link is True
    assert len(x.slow_links) == 3 and sum("SYS" in s for s in x.slow_links) == 1
    assert x.tp_link == "SYS"
    # TP 2 x PP 2 on four cards can keep both pairs inside a socket.
    y = r.layout(2, 2)
    assert y.tp_link == "PHB" and not any("SYS" in s for s in y.slow_links)
    assert sorted(y.gpu_order[:2]) in ([0, 1], [0, 2], [1, 2]) or sorted(y.gpu_order[:2]) in ([3, 4], [3, 5], [4, 5])


def test_nvlink_box_has_no_slow_links(build, classes):
    snap = ReplayProbe(build.FIXTURES / "snapshot-8xh100-nvlink.json").snapshot()
    r = plan("Qwen/Qwen2.5-72B-Instruct", 8, CARD_80, classes=classes, topology=snap.topology)
    assert r.topology_known
    assert all(x.tp_crosses_slow_link is False for x in r.layouts if x.valid and x.tp > 1)
    assert (r.recommended.tp * r.recommended.pp * r.recommended.dp) == 8


def test_placement_prefers_fast_pairs():
    m = [["X", "NV4", "SYS", "SYS"], ["NV4", "X", "SYS", "SYS"], ["SYS", "SYS", "X", "NV4"], ["SYS", "SYS", "NV4", "X"]]
    assert place(4, 2, 2, m).groups == [(0, 1), (2, 3)]
    m2 = [
        ["X", "SYS", "NV4", "SYS"],
        ["SYS", "X", "SYS", "NV4"],
        ["NV4", "SYS", "X", "SYS"],
        ["SYS", "NV4", "SYS", "X"],
    ]
    p = place(4, 2, 2, m2)
    assert sorted(p.groups) == [(0, 2), (1, 3)] and not p.crosses_slow()


def test_sizes():
    assert parse_size("24GiB") == 24 * GiB
    assert parse_size("24G") == 24 * GiB
    assert parse_size("80GB") == 80 * 10**9
    assert parse_size("24") == 24 * GiB
    assert parse_size("512MiB") == 512 * 2**20
    with pytest.raises(ValueError):
        parse_size("lots")


def test_matches_a_real_vllm_startup_log():
    """vLLM 0.11 serving Qwen/Qwen3-8B (bf16, TP 1) logged: "Loading model weights took 15.2684 GB"
    (GiB, in fact) and, with 10701063270 bytes available for the cache, "GPU KV cache size: 72,448 tokens"
    with 128-token blocks."""
    m = from_table("Qwen/Qwen3-8B")
    weights = sum(mem.stage_weight_bytes(m, 1, 1, "bfloat16", None)) / GiB
    assert weights == pytest.approx(15.2684, rel=0.002)
    per_token = mem.kv_bytes_per_token(m, m.num_layers, 1, 2)
    assert 10701063270 // per_token // 128 * 128 == 72448
