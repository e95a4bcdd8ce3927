"""The ``plan``, ``check-model`` and ``doctor`` commands, for the main ``qwen-triage`` group.

Exit status: 0 when nothing above info was found, 1 when something was, 2 on
bad usage or unreadable input (one line on stderr). Heavy modules (pynvml,
gguf, safetensors, the checks themselves) are imported when a command runs,
so ``qwen-triage --help`` stays fast.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, NoReturn

import click

from qwen_triage.cli.exiting import fail
from qwen_triage.cli.options import format_option
from qwen_triage.exits import EXIT_CLEAN, EXIT_FOUND, Failure

QUANT_CHOICES = ("none", "awq", "gptq", "gptq-int8", "fp8", "bitsandbytes")


def _finish(result: Any, fmt: str, show_all: bool = False) -> NoReturn:
    from qwen_triage.preflight.render import emit

    emit(result, fmt, sys.stdout, show_all=show_all)
    sys.stdout.flush()
    raise SystemExit(EXIT_FOUND if result.diagnoses else EXIT_CLEAN)


def _layout_options(f: Any) -> Any:
    """``--tensor/--pipeline/--data-parallel-size``, handed to the command as one ``requested`` layout."""

    @functools.wraps(f)
    def command(*args: Any, tensor_parallel_size: int | None, pipeline_parallel_size: int | None,
                data_parallel_size: int | None, **kwargs: Any) -> Any:
        return f(*args, requested=_requested(tensor_parallel_size, pipeline_parallel_size, data_parallel_size),
                 **kwargs)

    c: Any = command
    c = click.option("--data-parallel-size", type=click.IntRange(1, 1024), help="replicas you intend to launch")(c)
    c = click.option("--pipeline-parallel-size", type=click.IntRange(1, 1024), help="PP you intend to launch")(c)
    c = click.option("--tensor-parallel-size", type=click.IntRange(1, 1024), help="TP you intend to launch (checked)")(
        c
    )
    return c


def _requested(tp: int | None, pp: int | None, dp: int | None) -> tuple[int, int, int] | None:
    if tp is None and pp is None and dp is None:
        return None
    return (tp or 1, pp or 1, dp or 1)


# --- plan -----------------------------------------------------------------------------------


@click.command("plan")
@click.option(
    "--model",
    "-m",
    "model",
    required=True,
    help="model directory, config.json, .gguf, or a Qwen name (Qwen/Qwen2.5-32B-Instruct)",
)
@click.option("--gpus", type=click.IntRange(1, 256), help="number of GPUs (default: those NVML sees)")
@click.option("--gpu-mem", help="memory per GPU, e.g. 24GiB or 80GB (default: the smallest GPU found)")
@click.option(
    "--dtype", type=click.Choice(["auto", "bfloat16", "float16", "float32"]), default="auto", show_default=True
)
@click.option(
    "--quantization",
    "-q",
    type=click.Choice(QUANT_CHOICES),
    default=None,
    help="weights quantization (default: from config.json)",
)
@click.option(
    "--kv-cache-dtype", type=click.Choice(["auto", "fp8", "fp8_e4m3", "fp8_e5m2"]), default="auto", show_default=True
)
@click.option(
    "--max-model-len", type=click.IntRange(16, None), help="context length to plan for (default: the model's)"
)
@click.option("--gpu-memory-utilization", type=click.FloatRange(0.05, 1.0), default=0.9, show_default=True)
@click.option("--enforce-eager", is_flag=True, help="plan without CUDA graphs")
@_layout_options
@click.option("--topo", type=click.Path(dir_okay=False), help="`nvidia-smi topo -m` output, to judge TP links")
@click.option(
    "--snapshot", type=click.Path(dir_okay=False), help="GPU snapshot JSON (`doctor --record`) instead of NVML"
)
@click.option(
    "--nvidia-smi", "nvidia_smi", type=click.Path(dir_okay=False), help="`nvidia-smi -q -x` output instead of NVML"
)
@click.option("--all", "show_all", is_flag=True, help="list every layout, replicas included")
@format_option
def plan(show_all: bool, fmt: str, **options: Any) -> None:
    """Which tensor x pipeline x data parallel layouts work for MODEL on N GPUs, and the `vllm serve` command."""
    from qwen_triage.preflight.plan.command import PlanOptions, run

    try:
        result = run(PlanOptions(**options))  # the options by PlanOptions' own names
    except Failure as exc:
        fail(str(exc), command="plan")
    _finish(result, fmt, show_all)


# --- check-model -------------------------------------------------------------------------------


@click.command("check-model")
@click.argument("path", type=click.Path())
@click.option(
    "--sha256",
    "sha256",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[FILE]",
    help="verify against a sha256sum-format FILE; alone: hash every weight file and print the sums",
)
@format_option
def check_model(path: str, sha256: str | None, fmt: str) -> None:
    """Check a model directory or file (safetensors, GGUF, config, tokenizer) without loading it."""
    from qwen_triage.cli.progress import hash_progress
    from qwen_triage.preflight.model.check import CheckModelOptions, run

    try:
        with hash_progress() as progress:
            result = run(CheckModelOptions(path, sha256_list=sha256 or None, hash_files=sha256 == ""), progress)
    except Failure as exc:
        fail(str(exc), command="check-model")
    if sha256 == "" and fmt == "text":
        from qwen_triage.preflight.render import emit

        emit(result, fmt, sys.stdout)
        click.echo()
        for f in result.files:
            if f.sha256:
                click.echo(f"{f.sha256}  {f.name}")
        raise SystemExit(EXIT_FOUND if result.diagnoses else EXIT_CLEAN)
    _finish(result, fmt)


# --- doctor ---------------------------------------------------------------------------------------


@click.command("doctor")
@click.option(
    "--nvidia-smi",
    "nvidia_smi",
    type=click.Path(dir_okay=False),
    help="analyse `nvidia-smi -q -x` output from another machine",
)
@click.option("--topo", type=click.Path(dir_okay=False), help="and its `nvidia-smi topo -m` output")
@click.option("--snapshot", type=click.Path(dir_okay=False), help="replay a GPU snapshot recorded with --record")
@click.option("--record", type=click.Path(dir_okay=False), help="write this machine's GPU snapshot (JSON) to a file")
@click.option("--model", "-m", "model", help="also check this model's files and plan it on the GPUs found")
@_layout_options
@click.option("--max-model-len", type=click.IntRange(16, None))
@click.option("--gpu-memory-utilization", type=click.FloatRange(0.05, 1.0), default=0.9, show_default=True)
@format_option
def doctor(snapshot: str | None, record: str | None, fmt: str, **probe_args: Any) -> None:
    """Probe GPUs, links, /dev/shm, driver and software; report findings and an inventory."""
    from qwen_triage.preflight.doctor import DoctorOptions, run

    # probe_args: --nvidia-smi, --topo, --model, the layout and its limits, by DoctorOptions' own names
    try:
        result = run(DoctorOptions(snapshot=snapshot, record=record, **probe_args))
    except Failure as exc:
        fail(str(exc), command="doctor")
    _finish(result, fmt)


COMMANDS = [plan, check_model, doctor]
