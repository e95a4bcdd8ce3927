"""Diagnoses a plan produces: a requested layout vLLM refuses, nothing fitting, a context too long.

They carry the same classes and fix actions a failed launch would be
triaged into, so the runner can act on a plan before the server starts.
"""

from __future__ import annotations

from collections.abc import Callable

from qwen_triage.engine.check_finding import CheckFinding, finding
from qwen_triage.preflight.findings import act, ev, fix
from qwen_triage.preflight.model.config import ModelConfig, QuantInfo
from qwen_triage.preflight.plan import memory as mem
from qwen_triage.preflight.plan.models import Layout, LayoutRef, Settings, label
from qwen_triage.report.model import FixOut
from qwen_triage.rulepack.actions import ChooseLayout, LowerMaxModelLen, SetArg
from qwen_triage.units import GiB

# Refusal and misfit codes -> the check reported when the user asked for that layout (rules/checks.yaml
# declares each one's class); the two a plan also reports on its own word the requested case apart.
_CODE_CHECK = {
    "world-size": "preflight.plan.world-size",
    "tp-heads": "preflight.plan.tp-heads",
    "tp-kv-heads": "preflight.plan.tp-kv-heads",
    "quant-group": "preflight.plan.quant-group",
    "pp-layers": "preflight.plan.pp-layers",
    "weights-fit": "preflight.plan.weights-fit",
    "kv-short": "preflight.plan.kv-short",
}
_OWN_WORDING = {"weights-fit", "kv-short"}


def _layout_fix(recommended: LayoutRef | None) -> list[FixOut]:
    steps = [fix("re-plan the layout with `qwen-triage plan`", act(ChooseLayout))]
    if recommended is not None:
        steps.append(
            fix(
                f"use {label(recommended)}",
                act(SetArg, arg="--tensor-parallel-size", value=str(recommended.tp)),
            )
        )
        steps.append(
            fix(
                f"pipeline-parallel size {recommended.pp}",
                act(SetArg, arg="--pipeline-parallel-size", value=str(recommended.pp)),
            )
        )
        # without it, TP and PP alone would silently drop the replicas plan chose
        steps.append(
            fix(
                f"data-parallel size {recommended.dp}",
                act(SetArg, arg="--data-parallel-size", value=str(recommended.dp)),
            )
        )
    return steps


def requested_findings(
    model: ModelConfig,
    source: str,
    requested: tuple[int, int, int],
    layouts: list[Layout],
    gpus: int,
    recommended: LayoutRef | None,
    evaluate: Callable[[int, int, int], Layout],
) -> list[CheckFinding]:
    """The problems of the layout the user means to launch, as the diagnoses vLLM's refusal would get."""
    tp, pp, dp = requested
    x = next((y for y in layouts if (y.tp, y.pp, y.dp) == (tp, pp, dp)), None) or evaluate(tp, pp, dp)
    out = []
    facts = {"tp": tp, "pp": pp, "dp": dp, "heads": model.num_heads, "kv_heads": model.num_kv_heads, "gpus": gpus}
    for code, reason in zip(x.codes, x.reasons, strict=True):
        if code not in _CODE_CHECK:
            continue
        steps = _layout_fix(recommended)
        if code == "kv-short":
            tokens = (x.kv_cache_tokens or 0) // 1024 * 1024
            steps = [fix(f"lower --max-model-len to {tokens}", act(LowerMaxModelLen, to=str(tokens)))] + steps
        evidence_text = {
            "tp-heads": f"num_attention_heads = {model.num_heads}, --tensor-parallel-size {tp}",
            "tp-kv-heads": f"num_key_value_heads = {model.num_kv_heads}, --tensor-parallel-size {tp}",
            "pp-layers": f"num_hidden_layers = {model.num_layers}, --pipeline-parallel-size {pp}",
            "world-size": f"{gpus} GPUs, TP {tp} x PP {pp} x DP {dp} = {tp * pp * dp}",
        }.get(code, f"TP {tp} x PP {pp}: {reason}")
        out.append(
            finding(
                _CODE_CHECK[code],
                reason[0].upper() + reason[1:] + ".",
                variant="requested" if code in _OWN_WORDING else None,
                facts=facts,
                evidence=[ev(source if code != "world-size" else "nvml", evidence_text)],
                fix=steps,
            )
        )
    return out


def kv_short_finding(
    model: ModelConfig, source: str, best: Layout, max_len: int, launch_len: int, s: Settings
) -> CheckFinding:
    steps = [fix(f"lower --max-model-len to {launch_len}", act(LowerMaxModelLen, to=str(launch_len)))]
    if s.kv_dtype == "auto":
        steps.append(fix("store the KV cache in fp8", act(SetArg, arg="--kv-cache-dtype", value="fp8")))
    steps.append(fix("or more GPUs / a quantized checkpoint", act(ChooseLayout)))
    return finding(
        "preflight.plan.kv-short",
        f"The weights fit, but at most {best.kv_cache_tokens} tokens of KV cache remain "
        f"({label(best)}), fewer than --max-model-len {max_len}.",
        facts={"max_tokens": best.kv_cache_tokens, "max_model_len": max_len},
        evidence=[ev(source, f"{model.num_layers} layers x {model.num_kv_heads} KV heads x {model.head_dim} head_dim")],
        fix=steps,
    )


def no_fit_finding(
    model: ModelConfig, source: str, layouts: list[Layout], gpus: int, s: Settings, quant: QuantInfo | None
) -> CheckFinding:
    best = min(
        (x for x in layouts if not x.refused and x.weights_gib_per_gpu is not None),
        key=lambda x: x.weights_gib_per_gpu or 0,
        default=None,
    )
    need = f"{best.weights_gib_per_gpu:.1f} GiB per GPU at best ({label(best)})" if best else "no accepted layout"
    steps = []
    near = [x for x in layouts if x.fits_with]
    if near:
        steps.append(fix(f"quantize: {near[0].fits_with} makes {label(near[0])} fit", act(ChooseLayout)))
    if quant is None:
        steps.append(fix("load with fp8 weights", act(SetArg, arg="--quantization", value="fp8")))
    steps.append(fix("add GPUs, or pick a smaller model"))
    return finding(
        "preflight.plan.weights-fit",
        f"No layout fits {gpus} x {s.gpu_mem / GiB:.1f} GiB at --gpu-memory-utilization {s.util:g}: "
        f"the weights need {need}.",
        facts={"gpus": gpus, "gpu_mem_gib": round(s.gpu_mem / GiB, 2)},
        evidence=[ev(source, f"{mem.total_params(model) / 1e9:.1f}B parameters, {s.dtype}")],
        fix=steps,
    )


def quantization_findings(
    model: ModelConfig, source: str, requested: str | None, quant: QuantInfo | None, conflicts: list[str]
) -> list[CheckFinding]:
    out = [
        finding(
            "preflight.plan.quantization",
            f"vLLM refuses this: {text}.",
            evidence=[ev(source, f"quantization_config.quant_method = {quant.method if quant else '?'}")],
        )
        for text in conflicts
    ]
    needs_checkpoint = quant is not None and quant.prequantized and quant.method in ("awq", "gptq")
    if requested and needs_checkpoint and model.quantization is None and model.source != "built-in table":
        out.append(
            finding(
                "preflight.plan.quantization",
                f"--quantization {requested} needs a checkpoint quantized with it; config.json has no "
                f"quantization_config. The plan assumes {requested} weights.",
                variant="not-in-checkpoint",
                evidence=[ev(source, "no quantization_config in config.json")],
                fix=[fix(f"download the {requested} release of the model, or use --quantization fp8")],
            )
        )
    return out


BF16_MIN_CC = 8.0  # bfloat16 needs Ampere (compute capability 8.0) or newer


def no_bf16_cc(compute_capabilities: list[str] | None) -> str | None:
    """The first compute capability below 8.0 among the GPUs (it cannot run bfloat16), or None."""
    return next((cc for cc in compute_capabilities or [] if cc and float(cc) < BF16_MIN_CC), None)


def bf16_finding(cc: str, *, from_checkpoint: bool = False, rule: str = "preflight.plan.bf16-cc") -> CheckFinding:
    """bfloat16 asked of GPUs of compute capability ``cc`` (below 8.0): by ``--dtype bfloat16``, or, with
    ``from_checkpoint``, by a bfloat16 checkpoint under vLLM's ``--dtype auto`` (the runner's launch check,
    which reports it under its own ``rule``)."""
    if from_checkpoint:
        summary = (f"the checkpoint is bfloat16 and the GPUs have compute capability {cc} (bfloat16 needs 8.0); "
                   "some vLLM releases refuse to start, others fall back with a warning.")
    else:
        summary = f"--dtype bfloat16 needs compute capability 8.0; these GPUs have {cc}."
    return finding(rule, summary, evidence=[ev("nvml", f"compute capability {cc}")])


def resolve_dtype(
    model: ModelConfig, dtype: str, compute_capabilities: list[str] | None
) -> tuple[str, str | None, list[str], list[CheckFinding]]:
    """(dtype to plan with, --dtype to pass or None, notes, findings): what vLLM's auto would pick, and
    whether the cards can run it."""
    # vLLM runs float32 checkpoints in half precision unless told otherwise.
    run = {"float32": "float16", "float": "float16"}.get(model.dtype, model.dtype) if dtype == "auto" else dtype
    arg = None if dtype == "auto" else dtype
    old = no_bf16_cc(compute_capabilities)
    if run != "bfloat16" or old is None:
        return run, arg, [], []
    if dtype == "auto":
        note = f"GPUs with compute capability {old} cannot run bfloat16: planned as float16"
        return "float16", "float16", [note], []
    return run, arg, [], [bf16_finding(old)]


def max_len_findings(model: ModelConfig, source: str, max_model_len: int | None) -> list[CheckFinding]:
    limit = model.max_position_embeddings
    if max_model_len is None or max_model_len <= limit:
        return []
    return [
        finding(
            "preflight.plan.max-len",
            f"--max-model-len {max_model_len} is larger than max_position_embeddings {limit}; vLLM refuses "
            "it without a rope-scaling override.",
            evidence=[ev(source, f"max_position_embeddings = {limit}")],
            fix=[fix(f"use --max-model-len {limit} or less", act(SetArg, arg="--max-model-len", value=str(limit)))],
        )
    ]


def fewer_visible_finding(gpus: int, detected: int) -> CheckFinding:
    return finding(
        "preflight.plan.gpus-visible",
        f"planned for {gpus} GPUs but only {detected} are visible.",
        evidence=[ev("nvml", f"{detected} GPUs visible")],
    )
