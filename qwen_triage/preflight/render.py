"""Text (rich), markdown and JSON for the three preflight results.

Text and markdown show the same things in the same order: what was looked at,
the findings with their evidence and fixes, then observations and notes.
The tables of what was looked at are laid out here; the findings are worded by
:mod:`qwen_triage.report.text` and :mod:`qwen_triage.report.markdown`, like
every diagnosis. JSON is the pydantic model itself, with the report's ``class``
alias.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import IO

from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape as _markup_escape
from rich.table import Table

from qwen_triage.preflight.doctor import DoctorResult
from qwen_triage.preflight.model.check import CheckModelResult
from qwen_triage.preflight.plan.memory import NCCL_BYTES
from qwen_triage.preflight.plan.models import Layout, PlanResult, label
from qwen_triage.redact import mask_argv, mask_env
from qwen_triage.report.formats import Renderer, json_renderer, write_format
from qwen_triage.report.markdown import findings_markdown, md_escape
from qwen_triage.report.text import print_findings
from qwen_triage.textsafe import clean
from qwen_triage.units import GiB, human

NCCL_GIB = round(NCCL_BYTES / GiB, 2)


def escape(text: str) -> str:
    """Outside text (paths, file and process names, details) for a rich console: no markup, no control
    character (:func:`qwen_triage.textsafe.clean`)."""
    return _markup_escape(clean(str(text)))


def to_json(result: BaseModel) -> str:
    return result.model_dump_json(by_alias=True, indent=2)


def _mem(result: PlanResult) -> str:
    return f"{result.gpu_mem_gib} GiB" if result.memory_known and result.gpu_mem_gib is not None else "? GiB (memory unknown)"


def _command_line(result: PlanResult) -> str:
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in mask_env(result.env).items())
    return clean((env + " " if env else "") + shlex.join(mask_argv(result.command)))


def _shown_layouts(result: PlanResult, show_all: bool) -> list[Layout]:
    if show_all:
        return result.layouts
    return [x for x in result.layouts if x.dp == 1 or x.valid or x.fits_with]


def _status(x: Layout) -> str:
    if x.valid:
        return "ok"
    if x.refused:
        return "refused: " + "; ".join(x.reasons)
    # Memory misfits in a few words; the full sentences are in the JSON.
    if "weights-fit" in x.codes:
        text = "weights do not fit"
    else:
        text = f"KV cache too small ({x.kv_cache_tokens} tokens)"
    return text + (f"; fits with {x.fits_with}" if x.fits_with else "")


# --- text ---------------------------------------------------------------------------------


def text_plan(result: PlanResult, c: Console, show_all: bool = False) -> None:
    m = result.model
    moe = f", {m.num_experts} experts (top {m.experts_per_token})" if m.is_moe else ""
    c.print(
        f"[bold]Model[/bold]  {escape(m.name)} [dim]({escape(m.source)})[/dim]: {m.num_layers} layers, "
        f"{m.num_heads} heads / "
        f"{m.num_kv_heads} KV heads, head_dim {m.head_dim}{moe}; {m.params_b}B params = {m.weights_gib} GiB "
        f"{result.quantization or result.dtype}"
    )
    o = result.overhead
    c.print(
        f"[bold]GPUs[/bold]   {result.gpus} x {_mem(result)}, --gpu-memory-utilization "
        f"{result.gpu_memory_utilization:g}, "
        f"--max-model-len {result.max_model_len}; topology {'known' if result.topology_known else 'unknown'}"
    )
    c.print(
        f"[bold]Memory[/bold] KV cache {human(result.kv_bytes_per_token)} per token (whole model); overhead per GPU "
        f"{o.total_gib} GiB (context {o.cuda_context_gib}, activations {o.activations_gib}, CUDA graphs "
        f"{o.cuda_graphs_gib}, "
        f"NCCL {NCCL_GIB} when TP x PP > 1)"
    )
    table = Table(show_lines=False, header_style="bold", expand=False)
    for col in (
        "TP",
        "PP",
        "DP",
        "GPUs",
        "weights/GPU",
        "KV tokens",
        f"seqs@{result.max_model_len}",
        "TP link",
        "status",
    ):
        table.add_column(col, overflow="fold")
    for x in _shown_layouts(result, show_all):
        style = "green" if x.valid else ("dim" if x.refused else "yellow")
        table.add_row(
            str(x.tp),
            str(x.pp),
            str(x.dp),
            str(x.gpus_used),
            f"{x.weights_gib_per_gpu:.1f} GiB" if x.weights_gib_per_gpu is not None else "-",
            str(x.kv_cache_tokens) if x.kv_cache_tokens is not None else "-",
            str(x.total_concurrent_seqs) if x.total_concurrent_seqs is not None else "-",
            (x.tp_link or "-") + (" (slow)" if x.tp_crosses_slow_link else ""),
            escape(_status(x)),
            style=style,
        )
    c.print(table)
    if result.recommended:
        r = result.recommended
        c.print(f"[bold green]Recommended[/bold green]  {label(r)}: {escape(r.why)}")
        shown = result.layout(r.tp, r.pp, r.dp)
        for t in shown.tradeoffs if shown else []:
            c.print(f"   - {escape(t)}")
        c.print(f"   [bold]{escape(_command_line(result))}[/bold]")
    if result.alternatives:
        c.print("[bold]Other layouts[/bold]")
        for a in result.alternatives:
            c.print(f"   {label(a)}: {escape(a.why)}")
    print_findings(c, result.diagnoses, result.observations, result.notes)


def text_check(result: CheckModelResult, c: Console) -> None:
    c.print(f"[bold]Model files[/bold]  {escape(result.path)}  [dim]({result.format})[/dim]")
    table = Table(header_style="bold")
    for col in ("file", "kind", "size", "tensors", "status"):
        table.add_column(col, overflow="fold")
    for f in result.files:
        status = "ok" if f.ok else (f.detail or "problem")
        if f.sha256:
            status += f"  sha256 {f.sha256}"
        table.add_row(
            escape(f.name),
            f.kind,
            human(f.bytes) if f.bytes is not None else "-",
            str(f.tensors) if f.tensors is not None else "-",
            escape(status),
            style=None if f.ok else "red",
        )
    c.print(table)
    print_findings(c, result.diagnoses, result.observations, result.notes)


def text_doctor(result: DoctorResult, c: Console) -> None:
    inv = result.inventory
    snap = inv.gpus
    if snap is not None:
        c.print(
            f"[bold]GPUs[/bold]  {len(snap.gpus)} via {escape(snap.source)}; driver {snap.driver_version or '?'}, "
            f"CUDA {snap.cuda_driver_version or '?'}"
        )
        table = Table(header_style="bold")
        for col in (
            "#",
            "name",
            "bus",
            "VBIOS",
            "memory used/total",
            "cc",
            "PCIe now/max",
            "NVLink",
            "NUMA",
            "processes",
        ):
            table.add_column(col, overflow="fold", no_wrap=col in ("name", "bus", "memory used/total", "PCIe now/max"))
        for g in snap.gpus:
            p = g.pcie
            pcie = f"gen{p.gen_current or '?'} x{p.width_current or '?'} / gen{p.gen_max or '?'} x{p.width_max or '?'}"
            links = sum(1 for link in g.nvlinks if link.active)
            procs = ", ".join(f"{pr.pid} {pr.name or ''} {human(pr.used_bytes)}".strip() for pr in g.processes)
            table.add_row(
                str(g.index),
                escape(g.name),
                g.pci_bus_id,
                g.vbios or "-",
                f"{human(g.memory.used)} / {human(g.memory.total)}",
                g.compute_capability or "-",
                pcie,
                f"{links} active" if g.nvlinks else "-",
                str(g.numa_node) if g.numa_node is not None else "-",
                escape(procs) or "-",
            )
        c.print(table)
        if snap.topology:
            topo = Table(title="topology (nvidia-smi topo -m)" + (" / P2P" if snap.p2p else ""), header_style="bold")
            topo.add_column("")
            for i in range(len(snap.topology)):
                topo.add_column(f"GPU{i}")
            for i, row in enumerate(snap.topology):
                cells = [f"{v}/{snap.p2p[i][j]}" if snap.p2p and i != j else v for j, v in enumerate(row)]
                topo.add_row(f"GPU{i}", *cells)
            c.print(topo)
    elif inv.nvml_error:
        c.print(f"[bold]GPUs[/bold]  [yellow]NVML unavailable[/yellow]: {escape(inv.nvml_error)}")
    s = inv.system
    if s is not None:
        c.print(
            f"[bold]System[/bold]  kernel {s.kernel or '?'}, {s.cpu_count or '?'} CPUs, "
            f"{human(s.host_memory_bytes)} RAM, "
            f"/dev/shm {human(s.shm_bytes)}, container {s.container or 'no'}, IOMMU {s.iommu}, NUMA nodes "
            f"{s.numa_nodes or '?'}, "
            f"NVIDIA kernel module {s.kernel_module_version or '-'}, libnvidia-ml {s.userspace_driver_version or '-'}"
        )
    sw = inv.software
    if sw is not None:
        pk = sw.packages
        c.print(
            f"[bold]Software[/bold]  Python {sw.python}, torch {pk.get('torch', '-')} (CUDA {sw.torch_cuda or '-'}), "
            f"vLLM {pk.get('vllm', '-')}, NCCL {sw.nccl or '-'}, transformers {pk.get('transformers', '-')}, "
            f"Ollama {sw.ollama or '-'}"
        )
        if sw.env:
            c.print("[bold]Environment[/bold]  " + escape(" ".join(f"{k}={v}" for k, v in mask_env(sw.env).items())))
    if result.model_check is not None:
        bad = [f.name for f in result.model_check.files if not f.ok]
        c.print(
            f"[bold]Model files[/bold]  {escape(result.model_check.path)}: {len(result.model_check.files)} files, "
            f"{'problems in ' + ', '.join(bad) if bad else 'all readable'}"
        )
    if result.plan is not None and result.plan.recommended:
        c.print(f"[bold]Plan[/bold]  {label(result.plan.recommended)}: {escape(_command_line(result.plan))}")
    print_findings(c, result.diagnoses, result.observations, result.notes)


# --- markdown ------------------------------------------------------------------------------


def md_plan(result: PlanResult, show_all: bool = False) -> str:
    m = result.model
    out = [f"# Plan: {md_escape(m.name)} on {result.gpus} x {_mem(result)}", ""]
    out.append(
        f"{m.num_layers} layers, {m.num_heads} attention heads, {m.num_kv_heads} KV heads, head_dim {m.head_dim}; "
        f"{m.params_b}B parameters = {m.weights_gib} GiB ({result.quantization or result.dtype}); KV cache "
        f"{human(result.kv_bytes_per_token)} per token; overhead {result.overhead.total_gib} GiB per GPU; "
        f"--max-model-len {result.max_model_len}, --gpu-memory-utilization {result.gpu_memory_utilization:g}."
    )
    out += [
        "",
        "| TP | PP | DP | GPUs | weights/GPU | KV tokens | seqs | TP link | status |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for x in _shown_layouts(result, show_all):
        out.append(
            f"| {x.tp} | {x.pp} | {x.dp} | {x.gpus_used} | "
            f"{f'{x.weights_gib_per_gpu:.1f} GiB' if x.weights_gib_per_gpu is not None else '-'} | "
            f"{x.kv_cache_tokens if x.kv_cache_tokens is not None else '-'} | "
            f"{x.total_concurrent_seqs if x.total_concurrent_seqs is not None else '-'} | {x.tp_link or '-'} | "
            f"{md_escape(_status(x))} |"
        )
    if result.recommended:
        r = result.recommended
        command = md_escape(_command_line(result), code=True)
        out += ["", f"**Recommended:** {label(r)} — {r.why}", "", "```sh", command, "```"]
        shown = result.layout(r.tp, r.pp, r.dp)
        out += [f"- {t}" for t in (shown.tradeoffs if shown else [])]
    if result.alternatives:
        out += ["", "**Other layouts:**", ""]
        out += [f"- {label(a)}: {a.why}" for a in result.alternatives]
    out += findings_markdown(result.diagnoses, result.observations, result.notes)
    return "\n".join(out) + "\n"


def md_check(result: CheckModelResult) -> str:
    out = [
        f"# check-model: {md_escape(str(result.path))} ({result.format})",
        "",
        "| file | kind | size | tensors | status |",
        "|---|---|---|---|---|",
    ]
    for f in result.files:
        status = "ok" if f.ok else (f.detail or "problem")
        if f.sha256:
            status += f" sha256 `{f.sha256}`"
        out.append(
            f"| {md_escape(f.name)} | {f.kind} | {human(f.bytes) if f.bytes is not None else '-'} | "
            f"{f.tensors if f.tensors is not None else '-'} | {md_escape(status)} |"
        )
    out += findings_markdown(result.diagnoses, result.observations, result.notes)
    return "\n".join(out) + "\n"


def md_doctor(result: DoctorResult) -> str:
    inv = result.inventory
    out = ["# doctor", ""]
    if inv.gpus is not None:
        snap = inv.gpus
        out.append(
            f"{len(snap.gpus)} GPUs via {snap.source}; driver {snap.driver_version or '?'}, CUDA "
            f"{snap.cuda_driver_version or '?'}"
        )
        out += [
            "",
            "| # | name | memory used/total | cc | PCIe now/max | NUMA | processes |",
            "|---|---|---|---|---|---|---|",
        ]
        for g in snap.gpus:
            p = g.pcie
            procs = ", ".join(f"{pr.pid} {pr.name or ''}".strip() for pr in g.processes) or "-"
            out.append(
                f"| {g.index} | {md_escape(g.name)} | {human(g.memory.used)} / {human(g.memory.total)} | "
                f"{g.compute_capability or '-'} | "
                f"gen{p.gen_current or '?'} x{p.width_current or '?'} / gen{p.gen_max or '?'} x{p.width_max or '?'} | "
                f"{g.numa_node if g.numa_node is not None else '-'} | {md_escape(procs)} |"
            )
        if snap.topology:
            n = len(snap.topology)
            out += ["", "| | " + " | ".join(f"GPU{i}" for i in range(n)) + " |", "|---" * (n + 1) + "|"]
            out += [f"| GPU{i} | " + " | ".join(row) + " |" for i, row in enumerate(snap.topology)]
    elif inv.nvml_error:
        out.append(f"NVML unavailable: {md_escape(str(inv.nvml_error))}")
    if inv.system is not None:
        s = inv.system
        out += [
            "",
            f"System: /dev/shm {human(s.shm_bytes)}, container {s.container or 'no'}, IOMMU {s.iommu}, "
            f"kernel module {s.kernel_module_version or '-'}, libnvidia-ml {s.userspace_driver_version or '-'}",
        ]
    if inv.software is not None:
        sw = inv.software
        out += [
            "",
            f"Software: Python {sw.python}, "
            + ", ".join(f"{k} {v}" for k, v in sw.packages.items())
            + f"; torch CUDA {sw.torch_cuda or '-'}; Ollama {sw.ollama or '-'}",
        ]
    if result.plan is not None and result.plan.command:
        out += ["", "Plan:", "", "```sh", md_escape(_command_line(result.plan), code=True), "```"]
    out += findings_markdown(result.diagnoses, result.observations, result.notes)
    return "\n".join(out) + "\n"


# --- dispatch -------------------------------------------------------------------------------


def make_console(stream: IO[str]) -> Console:
    # Pipes get a fixed, wide layout so tables do not wrap at rich's default of 80.
    is_tty = getattr(stream, "isatty", lambda: False)()
    # emoji=False: PCI bus ids such as 00000000:AB:00.0 contain ":ab:", an emoji code.
    return Console(file=stream, width=None if is_tty else 160, highlight=False, soft_wrap=False, emoji=False)


def _markdown(result: BaseModel, _stream: IO[str], show_all: bool) -> str:
    markdown: dict[type, Callable[[], str]] = {
        PlanResult: lambda: md_plan(result, show_all),  # type: ignore[arg-type]
        CheckModelResult: lambda: md_check(result),  # type: ignore[arg-type]
        DoctorResult: lambda: md_doctor(result),  # type: ignore[arg-type]
    }
    return markdown[type(result)]()


def _text(result: BaseModel, stream: IO[str], show_all: bool) -> None:
    text: dict[type, Callable[[Console], None]] = {
        PlanResult: lambda c: text_plan(result, c, show_all),  # type: ignore[arg-type]
        CheckModelResult: lambda c: text_check(result, c),  # type: ignore[arg-type]
        DoctorResult: lambda c: text_doctor(result, c),  # type: ignore[arg-type]
    }
    text[type(result)](make_console(stream))


def _json(result: BaseModel, stream: IO[str], _show_all: bool) -> str:
    return json_renderer(lambda: to_json(result))(stream)


# a preflight result in each of the report's formats (`--format`: report/emit.FORMATS; a test keeps them equal)
RENDERERS: dict[str, Callable[[BaseModel, IO[str], bool], str | None]] = {
    "text": _text,
    "json": _json,
    "markdown": _markdown,
}


def emit(result: BaseModel, fmt: str, stream: IO[str], show_all: bool = False) -> None:
    """A plan, check-model or doctor result in ``fmt``: its renderers, through the one switch (report/formats.py)."""
    def bound(render: Callable[[BaseModel, IO[str], bool], str | None]) -> Renderer:
        return lambda s: render(result, s, show_all)

    write_format(fmt, {name: bound(render) for name, render in RENDERERS.items()}, stream)
