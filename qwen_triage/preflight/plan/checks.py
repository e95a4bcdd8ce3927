"""Diagnoses a plan produces: a requested layout vLLM refuses, nothing fitting, a context too long.

They carry the same classes and fix actions a failed launch would be
triaged into, so the runner can act on a plan before the server starts.
"""

from __future__ import annotations

from collections.abc import Callable

from qwen_triage.rulepack.actions import ChooseLayout, LowerMaxModelLen, SetArg
from qwen_triage.preflight.plan import memory as mem
from qwen_triage.preflight.findings import CheckFinding, act, ev, fix
from qwen_triage.preflight.model.config import ModelConfig, QuantInfo
from qwen_triage.preflight.plan.models import Layout, LayoutRef, Settings, label
from qwen_triage.units import GiB
from qwen_triage.report.model import FixOut
from qwen_triage.rulepack.schema import Severity

# Refusal and misfit codes -> (class, rule, severity) when the user asked for that layout.
_CODE_CLASS = {
    "world-size": ("config.insufficient_gpus", "preflight.plan.world-size"),
    "tp-heads": ("config.tp_indivisible", "preflight.plan.tp-heads"),
    "tp-kv-heads": ("config.tp_indivisible", "preflight.plan.tp-kv-heads"),
    "quant-group": ("config.tp_indivisible", "preflight.plan.quant-group"),
    "pp-layers": ("config.bad_argument", "preflight.plan.pp-layers"),
    "weights-fit": ("memory.gpu_oom", "preflight.plan.weights-fit"),
    "kv-short": ("memory.kv_cache_insufficient", "preflight.plan.kv-short"),
}


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
        if code not in _CODE_CLASS:
            continue
        class_id, rule = _CODE_CLASS[code]
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
            CheckFinding(
                class_id=class_id,
                rule=rule,
                title=f"the requested layout (TP {tp}, PP {pp}) cannot work",
                severity=Severity.error,
                summary=reason[0].upper() + reason[1:] + ".",
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
    return CheckFinding(
        class_id="memory.kv_cache_insufficient",
        rule="preflight.plan.kv-short",
        title="no layout holds a full-length sequence in the KV cache",
        severity=Severity.error,
        summary=f"The weights fit, but at most {best.kv_cache_tokens} tokens of KV cache remain "
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
    return CheckFinding(
        class_id="memory.gpu_oom",
        rule="preflight.plan.weights-fit",
        title="the model does not fit on these GPUs",
        severity=Severity.error,
        summary=f"No layout fits {gpus} x {s.gpu_mem / GiB:.1f} GiB at --gpu-memory-utilization {s.util:g}: "
        f"the weights need {need}.",
        facts={"gpus": gpus, "gpu_mem_gib": round(s.gpu_mem / GiB, 2)},
        evidence=[ev(source, f"{mem.total_params(model) / 1e9:.1f}B parameters, {s.dtype}")],
        fix=steps,
    )


def quantization_findings(
    model: ModelConfig, source: str, requested: str | None, quant: QuantInfo | None, conflicts: list[str]
) -> list[CheckFinding]:
    out = [
        CheckFinding(
            class_id="config.bad_argument",
            rule="preflight.plan.quantization",
            title="--quantization does not match the checkpoint",
            severity=Severity.error,
            summary=f"vLLM refuses this: {text}.",
            evidence=[ev(source, f"quantization_config.quant_method = {quant.method if quant else '?'}")],
            fix=[fix("drop --quantization; vLLM reads it from config.json")],
        )
        for text in conflicts
    ]
    needs_checkpoint = quant is not None and quant.prequantized and quant.method in ("awq", "gptq")
    if requested and needs_checkpoint and model.quantization is None and model.source != "built-in table":
        out.append(
            CheckFinding(
                class_id="config.bad_argument",
                rule="preflight.plan.quantization",
                title="--quantization names a method the checkpoint is not in",
                severity=Severity.warning,
                summary=f"--quantization {requested} needs a checkpoint quantized with it; config.json has no "
                f"quantization_config. The plan assumes {requested} weights.",
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
    ``from_checkpoint``, by a bfloat16 checkpoint under vLLM's ``--dtype auto`` (the runner's launch check)."""
    if from_checkpoint:
        title = "bfloat16 checkpoint on GPUs without bfloat16"
        summary = (f"the checkpoint is bfloat16 and the GPUs have compute capability {cc} (bfloat16 needs 8.0); "
                   "some vLLM releases refuse to start, others fall back with a warning.")
    else:
        title = "bfloat16 on a GPU older than compute capability 8.0"
        summary = f"--dtype bfloat16 needs compute capability 8.0; these GPUs have {cc}."
    return CheckFinding(
        class_id="config.dtype_unsupported",
        rule=rule,
        title=title,
        severity=Severity.error,
        summary=summary,
        evidence=[ev("nvml", f"compute capability {cc}")],
        fix=[fix("launch with --dtype float16", act(SetArg, arg="--dtype", value="float16"))],
    )


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
        CheckFinding(
            class_id="config.bad_argument",
            rule="preflight.plan.max-len",
            title="--max-model-len beyond the model's context",
            severity=Severity.error,
            summary=f"--max-model-len {max_model_len} is larger than max_position_embeddings {limit}; vLLM refuses "
            "it without a rope-scaling override.",
            evidence=[ev(source, f"max_position_embeddings = {limit}")],
            fix=[fix(f"use --max-model-len {limit} or less", act(SetArg, arg="--max-model-len", value=str(limit)))],
        )
    ]


def fewer_visible_finding(gpus: int, detected: int) -> CheckFinding:
    return CheckFinding(
        class_id="config.insufficient_gpus",
        rule="preflight.plan.gpus-visible",
        title="planned for more GPUs than are visible",
        severity=Severity.warning,
        summary=f"planned for {gpus} GPUs but only {detected} are visible.",
        evidence=[ev("nvml", f"{detected} GPUs visible")],
        fix=[fix("check CUDA_VISIBLE_DEVICES and the container's --gpus option")],
    )
