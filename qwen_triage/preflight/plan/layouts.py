"""Every tensor x pipeline x data parallel layout for N GPUs: which vLLM accepts, which fit, which to use.

Refusals follow vLLM's own checks (TP divides the attention heads; KV heads
and TP divide one another; PP at most the layer count; quantization groups
whole on each TP shard). Fit follows :mod:`qwen_triage.preflight.plan.memory`: the
``--gpu-memory-utilization`` share of the smallest card, minus weights and a
stated overhead, must hold the KV cache for at least one ``--max-model-len``
sequence, because vLLM refuses to start otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from qwen_triage.engine.check_finding import CheckFinding
from qwen_triage.preflight.findings import to_report
from qwen_triage.preflight.machine.topology import Placement, describe, kind, place
from qwen_triage.preflight.model.config import ModelConfig, QuantInfo
from qwen_triage.preflight.plan import memory as mem
from qwen_triage.preflight.plan.checks import (
    fewer_visible_finding,
    kv_short_finding,
    max_len_findings,
    no_fit_finding,
    quantization_findings,
    requested_findings,
    resolve_dtype,
)
from qwen_triage.preflight.plan.models import Layout, LayoutRef, PlanModel, PlanResult, Settings
from qwen_triage.rulepack.spec import ClassSpec
from qwen_triage.units import GiB

__all__ = ["Layout", "LayoutRef", "PlanResult", "command_for", "plan_layouts"]

# --- settings ------------------------------------------------------------------------


def _resolve_quant(model: ModelConfig, requested: str | None) -> tuple[QuantInfo | None, str | None, list[str]]:
    """(quantization to plan with, its vLLM name or None when read from the checkpoint, conflicts)."""
    if requested in (None, "", "none"):
        q = model.quantization
        return q, None, []
    presets = {
        "awq": QuantInfo(method="awq", bits=4, group_size=128),
        "gptq": QuantInfo(method="gptq", bits=4, group_size=128),
        "gptq-int8": QuantInfo(method="gptq", bits=8, group_size=128),
        "fp8": QuantInfo(method="fp8", bits=8, group_size=None, prequantized=False),
        "bitsandbytes": QuantInfo(method="bitsandbytes", bits=4, prequantized=False),
    }
    want = presets[requested]
    have = model.quantization
    if have is not None and have.method != "gguf":
        if have.method != want.method:
            return have, None, [f"the checkpoint is {have.method}-quantized but --quantization {requested} was given"]
        return have, None, []
    return want, requested.split("-")[0], []


def _group_ok(model: ModelConfig, tp: int, quant: QuantInfo | None) -> str | None:
    if quant is None or not quant.prequantized or not quant.group_size:
        return None
    g = quant.group_size
    dims = []
    if not model.is_moe or model.dense_layers:
        dims.append(("intermediate_size", model.intermediate_size))
    if model.is_moe:
        dims.append(("moe_intermediate_size", model.moe_intermediate_size))
    for name, size in dims:
        if size % tp or (size // tp) % g:
            return f"{name} {size} / TP {tp} = {size / tp:g} is not a whole number of {quant.method} groups of {g}"
    return None


def _structural(model: ModelConfig, tp: int, pp: int, quant: QuantInfo | None) -> list[tuple[str, str]]:
    out = []
    if model.num_heads % tp:
        out.append(("tp-heads", f"TP {tp} does not divide the {model.num_heads} attention heads"))
    kv = model.num_kv_heads
    if (kv >= tp and kv % tp) or (kv < tp and tp % kv):
        out.append(("tp-kv-heads", f"{kv} KV heads and TP {tp}: one must divide the other"))
    if pp > model.num_layers:
        out.append(("pp-layers", f"PP {pp} is more than the {model.num_layers} layers"))
    if not any(code == "tp-heads" for code, _ in out):
        if problem := _group_ok(model, tp, quant):
            out.append(("quant-group", problem))
    return out


def _memory(model: ModelConfig, tp: int, pp: int, s: Settings, quant: QuantInfo | None) -> dict[str, Any]:
    act_bytes = mem.DTYPE_BYTES.get(s.dtype, 2)
    weights = mem.stage_weight_bytes(model, tp, pp, s.dtype, quant)
    overhead, _ = mem.overhead_bytes(model, tp, tp * pp, act_bytes, s.batched_tokens, s.enforce_eager)
    budget = s.util * s.gpu_mem
    parts = mem.stage_layers(model.num_layers, pp)
    avail = [budget - w - overhead for w in weights]
    tokens = min(
        mem.round_tokens(a / mem.kv_bytes_per_token(model, n, tp, s.kv_bytes)) if a > 0 and n else 0
        for a, n in zip(avail, parts, strict=True)
    )
    return {
        "weights": max(weights),
        "overhead": overhead,
        "budget": budget,
        "kv_avail": min(avail),
        "tokens": tokens,
        "stage_layers": parts,
    }


def _fit_reasons(m: dict[str, Any], s: Settings) -> list[tuple[str, str]]:
    if m["kv_avail"] <= 0:
        room = m["budget"] - m["overhead"]
        return [
            (
                "weights-fit",
                f"weights need {m['weights'] / GiB:.1f} GiB per GPU, more than the {room / GiB:.1f} GiB left of "
                f"{s.util:g} x {s.gpu_mem / GiB:.1f} GiB after {m['overhead'] / GiB:.1f} GiB overhead",
            )
        ]
    if m["tokens"] < s.max_model_len:
        return [
            (
                "kv-short",
                f"KV cache holds {m['tokens']} tokens, fewer than --max-model-len {s.max_model_len}",
            )
        ]
    return []


def _tradeoffs(x: Layout, n_gpus: int, max_len: int, placement: Placement | None) -> list[str]:
    out = []
    if x.tp > 1:
        link = ""
        if x.tp_link:
            link = f" over {kind(x.tp_link)} ({describe(x.tp_link)})"
        out.append(f"two all-reduces per layer between the {x.tp} GPUs of a TP group{link}; cuts per-token latency")
    if x.pp > 1:
        out.append(
            f"{x.pp} pipeline stages: little traffic between stages, but a request passes through them in turn "
            f"(no latency gain for one user; good throughput with many)"
        )
    if x.dp > 1:
        out.append(
            f"{x.dp} independent replicas: best throughput for many users; each holds a full copy of the weights "
            f"and its own KV cache, one request runs on one replica"
        )
    if x.gpus_used < n_gpus:
        out.append(f"leaves {n_gpus - x.gpus_used} of {n_gpus} GPUs free")
    if x.fits and x.kv_cache_tokens is not None and x.max_concurrent_seqs is not None:
        out.append(
            f"KV cache {x.kv_cache_tokens} tokens per replica = {x.max_concurrent_seqs} sequence(s) of "
            f"{max_len} at once"
        )
    if x.slow_links:
        out.append("TP crosses slow links: " + ", ".join(x.slow_links))
    return out


def _score(x: Layout) -> tuple:
    # Use the GPUs the user gave us, as replicas where the model fits in
    # fewer, preferring TP to PP (PP adds a hop per stage for every token),
    # then TP groups on fast links, then the larger KV cache.
    return (-x.gpus_used, -x.dp, x.pp, bool(x.tp_crosses_slow_link), -(x.kv_cache_tokens or 0), x.tp)


def _category(x: Layout) -> str:
    if x.dp > 1:
        return "replicas"
    if x.pp > 1:
        return "pipeline"
    return "tensor"


def _ref(x: Layout, why: str) -> LayoutRef:
    return LayoutRef(tp=x.tp, pp=x.pp, dp=x.dp, why=why)


def command_for(
    model_ref: str,
    x: LayoutRef,
    s: Settings,
    dtype_arg: str | None,
    quant_arg: str | None,
    max_len: int,
) -> list[str]:
    argv = ["vllm", "serve", model_ref, "--tensor-parallel-size", str(x.tp)]
    if x.pp > 1:
        argv += ["--pipeline-parallel-size", str(x.pp)]
    if x.dp > 1:
        argv += ["--data-parallel-size", str(x.dp)]
    argv += ["--max-model-len", str(max_len), "--gpu-memory-utilization", f"{s.util:g}"]
    if dtype_arg:
        argv += ["--dtype", dtype_arg]
    if quant_arg:
        argv += ["--quantization", quant_arg]
    if s.kv_dtype != "auto":
        argv += ["--kv-cache-dtype", s.kv_dtype]
    if s.enforce_eager:
        argv.append("--enforce-eager")
    return argv


def _quantized_name(model: ModelConfig, model_ref: str, quant: str | None) -> tuple[str, str | None]:
    """Qwen publishes AWQ/GPTQ checkpoints under suffixed names; point at them."""
    if quant not in ("awq", "gptq", "gptq-int8") or model.source != "built-in table":
        return model_ref, None
    suffix = {"awq": "-AWQ", "gptq": "-GPTQ-Int4", "gptq-int8": "-GPTQ-Int8"}[quant]
    if model_ref.lower().endswith(suffix.lower()):
        return model_ref, None
    name = model_ref + suffix
    return name, f"--quantization {quant} needs a pre-quantized checkpoint: the command names {name} (check it exists)"


def _evaluate(
    model: ModelConfig, s: Settings, gpus: int, topology: list[list[str]] | None, memory_known: bool,
    tp: int, pp: int, dp: int,
) -> Layout:
    """One layout: vLLM's refusals, else its memory fit, placement on the links and trade-offs."""
    used = tp * pp * dp
    refusals = _structural(model, tp, pp, s.quant)
    if used > gpus:
        refusals.insert(0, ("world-size", f"TP x PP x DP = {used} is more than the {gpus} GPUs"))
    x = Layout(tp=tp, pp=pp, dp=dp, gpus_used=used, valid=False, refused=bool(refusals), fits=None)
    x.codes = [c for c, _ in refusals]
    x.reasons = [r for _, r in refusals]
    if refusals:
        return x
    m = _memory(model, tp, pp, s, s.quant)
    misfit = _fit_reasons(m, s)
    x.fits = not misfit
    x.valid = not misfit
    x.codes += [c for c, _ in misfit]
    x.reasons += [r for _, r in misfit]
    _fill_memory(x, m, s.max_model_len, dp, memory_known)
    placement = place(gpus, tp, pp * dp, topology)
    x.gpu_order = placement.order
    x.tp_crosses_slow_link = placement.crosses_slow() if tp > 1 else (False if topology else None)
    x.slow_links = placement.slow_links()
    x.tp_link = placement.worst()
    if misfit:
        x.fits_with = _fits_with(model, tp, pp, s, s.quant)
        if x.fits_with:
            x.reasons.append(f"would fit with {x.fits_with}")
    x.tradeoffs = _tradeoffs(x, gpus, s.max_model_len, placement)
    if x.fits_with:
        x.tradeoffs.append(f"needs {x.fits_with} to fit")
    return x


def _fill_memory(x: Layout, m: dict[str, Any], max_len: int, dp: int, memory_known: bool) -> None:
    x.weights_gib_per_gpu = round(m["weights"] / GiB, 2)
    x.kv_cache_gib_per_gpu = round(max(m["kv_avail"], 0) / GiB, 2)
    x.overhead_gib_per_gpu = round(m["overhead"] / GiB, 2)
    x.kv_cache_tokens = m["tokens"]
    x.max_concurrent_seqs = m["tokens"] // max_len if max_len else None
    x.total_concurrent_seqs = x.max_concurrent_seqs * dp if x.max_concurrent_seqs is not None else None
    if not memory_known:  # figures of a stand-in size would be invented
        x.kv_cache_gib_per_gpu = x.kv_cache_tokens = x.max_concurrent_seqs = x.total_concurrent_seqs = None
    x.stage_layers = m["stage_layers"]


def _recommend(
    model: ModelConfig, source: str, layouts: list[Layout], gpus: int, s: Settings
) -> tuple[LayoutRef | None, int, list[CheckFinding]]:
    """(the layout to launch, its --max-model-len, findings): the best valid layout; else the largest KV
    cache at a shorter context; else nothing, and why."""
    valid = sorted((x for x in layouts if x.valid), key=_score)
    if valid:
        best = valid[0]
        return _ref(best, _why(best, gpus, layouts)), s.max_model_len, []
    # Nothing holds a full-length sequence: offer the largest KV cache with a shorter context.
    short = sorted(
        (x for x in layouts if not x.refused and x.codes == ["kv-short"]),
        key=lambda x: (-(x.kv_cache_tokens or 0), x.pp, -x.dp),
    )
    short = [x for x in short if (x.kv_cache_tokens or 0) >= 1024]
    if not short:
        return None, s.max_model_len, [no_fit_finding(model, source, layouts, gpus, s, s.quant)]
    best = short[0]
    launch_len = (best.kv_cache_tokens or 0) // 1024 * 1024
    recommended = _ref(best, f"the largest KV cache; --max-model-len lowered to {launch_len}")
    return recommended, launch_len, [kv_short_finding(model, source, best, s.max_model_len, launch_len, s)]


def _launch_env(layouts: list[Layout], recommended: LayoutRef, gpus: int, detected_gpus: int | None) -> dict[str, str]:
    chosen = next(x for x in layouts if (x.tp, x.pp, x.dp) == (recommended.tp, recommended.pp, recommended.dp))
    if chosen.gpu_order != list(range(chosen.gpus_used)) or (detected_gpus or gpus) > chosen.gpus_used:
        # CUDA numbers GPUs fastest-first unless told otherwise; NVML and
        # nvidia-smi number them by PCI bus, which is what the order refers to.
        return {
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in chosen.gpu_order),
        }
    return {}


def _settings(
    run_dtype: str, kv_cache_dtype: str, quant: QuantInfo | None, quant_arg: str | None,
    max_len: int, gpu_memory_utilization: float, gpu_mem_bytes: int, enforce_eager: bool,
) -> Settings:
    kv_bytes = mem.DTYPE_BYTES.get(run_dtype, 2) if kv_cache_dtype == "auto" else 1
    return Settings(dtype=run_dtype, kv_bytes=kv_bytes, kv_dtype=kv_cache_dtype, quant=quant, quant_name=quant_arg,
                    max_model_len=max_len, util=gpu_memory_utilization, gpu_mem=gpu_mem_bytes,
                    batched_tokens=mem.default_batched_tokens(gpu_mem_bytes), enforce_eager=enforce_eager)


def _plan_model(model: ModelConfig, s: Settings) -> tuple[PlanModel, int, Any]:
    """The model as the plan shows it, its KV bytes per token, and the overhead breakdown."""
    weights_total = sum(mem.stage_weight_bytes(model, 1, 1, s.dtype, s.quant))
    kv_total = mem.kv_bytes_per_token(model, model.num_layers, 1, s.kv_bytes)
    _, overhead = mem.overhead_bytes(model, 1, 1, mem.DTYPE_BYTES.get(s.dtype, 2), s.batched_tokens, s.enforce_eager)
    shown = PlanModel(
        **model.model_dump(),
        params_b=round(mem.total_params(model) / 1e9, 2),
        weights_gib=round(weights_total / GiB, 2),
    )
    return shown, kv_total, overhead


def _resolve_request(
    model: ModelConfig, source: str, dtype: str, quantization: str | None, kv_cache_dtype: str,
    max_model_len: int | None, util: float, gpu_mem_bytes: int, enforce_eager: bool,
    compute_capabilities: list[str] | None, model_ref: str | None,
) -> tuple[Settings, tuple[str, str | None, str | None], list[CheckFinding], list[str]]:
    """What was asked, resolved as vLLM would: (settings, (model name, --dtype, --quantization to pass),
    findings about the request itself, notes)."""
    findings: list[CheckFinding] = []
    notes: list[str] = []
    quant, quant_arg, conflicts = _resolve_quant(model, quantization)
    findings += quantization_findings(model, source, quantization, quant, conflicts)
    model_name_ref, name_note = _quantized_name(model, model_ref or model.name, quantization)
    if name_note:
        notes.append(name_note)
        quant_arg = None
    run_dtype, dtype_arg, dtype_notes, dtype_findings = resolve_dtype(model, dtype, compute_capabilities)
    notes += dtype_notes
    findings += dtype_findings
    findings += max_len_findings(model, source, max_model_len)
    max_len = model.max_position_embeddings if max_model_len is None else max_model_len
    s = _settings(run_dtype, kv_cache_dtype, quant, quant_arg, max_len, util, gpu_mem_bytes, enforce_eager)
    return s, (model_name_ref, dtype_arg, quant_arg), findings, notes


def plan_layouts(
    model_cfg: ModelConfig,
    gpus: int,
    gpu_mem_bytes: int,
    *,
    dtype: str = "auto",
    quantization: str | None = None,
    kv_cache_dtype: str = "auto",
    max_model_len: int | None = None,
    gpu_memory_utilization: float = 0.9,
    enforce_eager: bool = False,
    topology: list[list[str]] | None = None,
    compute_capabilities: list[str] | None = None,
    requested: tuple[int, int, int] | None = None,
    model_ref: str | None = None,
    detected_gpus: int | None = None,
    classes: dict[str, ClassSpec] | None = None,
    memory_known: bool = True,
) -> PlanResult:
    """Plan every layout of ``model_cfg`` on ``gpus`` cards of ``gpu_mem_bytes`` each.

    ``memory_known`` False (no NVML and no ``--gpu-mem``): ``gpu_mem_bytes`` is
    only a stand-in so that the shapes can be judged; no KV cache, sequence
    count or memory size is reported, and every reason says memory is unknown.

    ``topology`` is the ``nvidia-smi topo -m`` matrix of those GPUs (labels
    such as ``NV12``, ``PHB``, ``SYS``); ``requested`` a (tp, pp, dp) the user
    means to launch, which turns its problems into diagnoses.
    """
    if gpus < 1:
        raise ValueError("plan needs at least one GPU")
    model = model_cfg
    source = model.source.split(": ", 1)[-1]
    s, asked, findings, notes = _resolve_request(
        model, source, dtype, quantization, kv_cache_dtype, max_model_len, gpu_memory_utilization, gpu_mem_bytes,
        enforce_eager, compute_capabilities, model_ref,
    )
    model_name_ref, dtype_arg, quant_arg = asked
    run_dtype, quant, max_len = s.dtype, s.quant, s.max_model_len
    if topology is not None and len(topology) < gpus:
        notes.append(f"the topology matrix covers {len(topology)} GPUs, not {gpus}: links are not judged")
        topology = None

    evaluate = partial(_evaluate, model, s, gpus, topology, memory_known)
    layouts = [evaluate(tp, pp, dp) for tp, pp, dp in _shapes(gpus)]
    recommended, launch_len, fit_findings = _recommend(model, source, layouts, gpus, s)
    findings += fit_findings
    command: list[str] = []
    env: dict[str, str] = {}
    if recommended is not None:  # the `vllm serve` line and its environment
        command = command_for(model_name_ref, recommended, s, dtype_arg, quant_arg, launch_len)
        env = _launch_env(layouts, recommended, gpus, detected_gpus)
    findings += _judged(model, source, layouts, gpus, evaluate, recommended, requested, detected_gpus, notes)

    diagnoses, observations = to_report(findings, classes)
    shown, kv_total, overhead = _plan_model(model, s)
    return PlanResult(
        model=shown,
        gpus=gpus,
        gpu_mem_bytes=gpu_mem_bytes if memory_known else None,
        gpu_mem_gib=round(gpu_mem_bytes / GiB, 2) if memory_known else None,
        memory_known=memory_known,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_len,
        dtype=run_dtype,
        kv_cache_dtype=kv_cache_dtype,
        quantization=(quant.method if quant else None),
        kv_bytes_per_token=kv_total,
        overhead=overhead,
        topology_known=topology is not None,
        layouts=layouts,
        recommended=recommended,
        alternatives=_alternatives(layouts, recommended, gpus),
        command=command,
        env=env,
        diagnoses=diagnoses,
        observations=observations,
        notes=notes,
    )


def _shapes(gpus: int) -> list[tuple[int, int, int]]:
    """Every (tp, pp, dp) whose product fits on ``gpus``, smallest TP first."""
    return [
        (tp, pp, dp)
        for tp in range(1, gpus + 1)
        for pp in range(1, gpus // tp + 1)
        for dp in range(1, gpus // (tp * pp) + 1)
    ]


def _judged(model: ModelConfig, source: str, layouts: list[Layout], gpus: int, evaluate: Callable[..., Layout],
            recommended: LayoutRef | None, requested: tuple[int, int, int] | None, detected_gpus: int | None,
            notes: list[str]) -> list[CheckFinding]:
    """What the plan says beyond its layouts: TP on every GPU when it is impossible (a note), the problems of the
    layout the user means to launch, fewer GPUs visible than planned for."""
    full = next((x for x in layouts if (x.tp, x.pp, x.dp) == (gpus, 1, 1)), None)
    if full is not None and full.refused and gpus > 1:
        notes.append(f"TP {gpus} on all {gpus} GPUs is impossible: " + "; ".join(full.reasons))
    findings: list[CheckFinding] = []
    if requested is not None:
        findings += requested_findings(model, source, requested, layouts, gpus, recommended, evaluate)
    if detected_gpus is not None and detected_gpus < gpus:
        findings.append(fewer_visible_finding(gpus, detected_gpus))
    return findings


def _fits_with(model: ModelConfig, tp: int, pp: int, s: Settings, quant: QuantInfo | None) -> str | None:
    options = []
    if quant is None or quant.bits > 8:
        options.append(("fp8 weights (--quantization fp8)", QuantInfo(method="fp8", bits=8, prequantized=False)))
    if quant is None or quant.bits > 4:
        options.append(("a 4-bit AWQ checkpoint", QuantInfo(method="awq", bits=4, group_size=128)))
    for name, q in options:
        if _structural(model, tp, pp, q):
            continue
        if not _fit_reasons(_memory(model, tp, pp, s, q), s):
            return name
    return None


def _why(x: Layout, gpus: int, layouts: list[Layout]) -> str:
    bits = []
    if x.gpus_used == gpus:
        bits.append(f"uses all {gpus} GPUs")
    else:
        bits.append(f"uses {x.gpus_used} of {gpus} GPUs")
    if x.dp > 1:
        bits.append(f"{x.dp} replicas for throughput")
    if x.pp > 1:
        wide = next((y for y in layouts if (y.tp, y.pp, y.dp) == (x.tp * x.pp, 1, x.dp)), None)
        if wide is not None and wide.refused:
            bits.append(f"PP {x.pp} because TP {wide.tp} is refused ({wide.reasons[0]})")
        else:
            bits.append(f"PP {x.pp} to spread the weights")
    if x.tp_crosses_slow_link is False and x.tp > 1:
        bits.append("TP groups on fast links")
    if x.max_concurrent_seqs is not None:
        bits.append(f"{x.max_concurrent_seqs} max-length sequence(s) per replica")
    else:
        bits.append("GPU memory unknown: fit not judged")
    return ", ".join(bits)


def _alternatives(layouts: list[Layout], recommended: LayoutRef | None, gpus: int) -> list[LayoutRef]:
    """The best layout of each kind (pure TP, TP x PP, replicas) other than the recommended one."""
    chosen = (recommended.tp, recommended.pp, recommended.dp) if recommended else None
    out = []
    for cat in ("tensor", "pipeline", "replicas"):
        pool = [x for x in layouts if _category(x) == cat and (x.tp, x.pp, x.dp) != chosen]
        fitting = sorted((x for x in pool if x.valid), key=_score)
        near = sorted((x for x in pool if not x.refused and x.fits_with), key=_score)
        pick = fitting[0] if fitting else (near[0] if near else None)
        if pick is not None:
            why = "; ".join(pick.tradeoffs[:3])
            out.append(_ref(pick, why))
    return out
