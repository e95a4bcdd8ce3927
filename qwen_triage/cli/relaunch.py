"""`qwen-triage relaunch`: only click is imported up front; the runner loads when the command runs."""

from __future__ import annotations

import sys
from typing import Any

import click

from qwen_triage.cli.options import pack_options


@click.command(
    "relaunch",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    short_help="Fix what can be fixed in a failing vLLM launch, relaunch it, prove it serves.",
)
@click.option("--profile", "profile_path", type=click.Path(dir_okay=False, exists=True),
              help="YAML profile: command, env, expected_gpus, health_url, limits.")
@click.option("--apply", is_flag=True, help="Launch and fix for real. Without it: preflight and the plan only.")
@click.option("--gpus", type=click.IntRange(min=1),
              help="Devices to plan for when NVML sees none (vLLM's CPU build: worker processes).")
@click.option("--gpu-mem", "gpu_mem", type=click.FloatRange(min=0.01), help="GiB per device when NVML cannot tell.")
@click.option("--attempts", type=click.IntRange(1, 20), help="Launches in all, restarts included (default 3).")
@click.option("--ready-timeout", type=click.FloatRange(min=1), help="Seconds from start to proven-ready (default 1200).")
@click.option("--stall", type=click.FloatRange(min=0), help="Seconds of silence that count as a hang (default 300; 0: never).")
@click.option("--backoff", type=click.FloatRange(min=0), help="Seconds before the first relaunch, doubling (default 5).")
@click.option("--grace", type=click.FloatRange(min=0), help="Seconds between SIGTERM and SIGKILL (default 15).")
@click.option("--release-timeout", type=click.FloatRange(min=1),
              help="Seconds to wait for processes, port and GPU memory to be freed (default 60).")
@click.option("--health-interval", type=click.FloatRange(min=0.1),
              help="Seconds between /health polls of a ready server (default 5).")
@click.option("--health-url", help="Where /health answers (default: the server's --host/--port).")
@click.option("--wait-for-fix", is_flag=True, default=None,
              help="When a manual step can be checked (port, model files, /dev/shm): wait for it, then go on.")
@click.option("--wait-timeout", type=click.FloatRange(min=1), help="Give up waiting after this many seconds (default 3600).")
@click.option("--no-preflight", is_flag=True, help="Launch the command as given; fix only what the launch shows.")
@click.option("--no-completion", is_flag=True, help="Readiness without the test completion (/health and /v1/models only).")
@click.option("--detach", is_flag=True, help="Once ready, leave the server running in its own session and exit.")
@click.option("--stop-when-ready", is_flag=True, help="Once proven ready, stop the server and exit 0 (checks a profile).")
@click.option("--env", "env_pairs", multiple=True, metavar="NAME=VALUE", help="Environment for the server (repeatable).")
@click.option("--journal", "journal_path", type=click.Path(dir_okay=False),
              help="JSONL journal to append to (default: the user's state dir, relaunch/journal.jsonl).")
@click.option("--log-dir", type=click.Path(file_okay=False), help="Where attempt logs go (default: relaunch/runs).")
@click.option("--gpu-snapshot", type=click.Path(exists=True, dir_okay=False),
              help="Plan against a recorded NVML snapshot (`doctor --record`) instead of this machine; dry runs only.")
@click.option("--show-output", is_flag=True, help="Also pass the server's output through (it always goes to the log).")
@click.option("--no-kernel-log", is_flag=True, help="Do not read the kernel log of a failed attempt's window.")
@click.option("--allow-rule-actions", is_flag=True,
              help="Let rules from --rules / QWEN_TRIAGE_RULES edit the launch too (default: their steps are printed).")
@pack_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def relaunch(command: tuple[str, ...], **opts: Any) -> None:
    """Find why a vLLM launch fails, fix what is safe to fix, relaunch, and prove it serves.

    \b
      qwen-triage relaunch -- vllm serve ./qwen32b --tensor-parallel-size 6 --port 8000
      qwen-triage relaunch --apply -- python -m vllm.entrypoints.openai.api_server --model ./qwen32b
      qwen-triage relaunch --profile six-card.yaml --apply

    Without --apply only the preflight and the fix plan are shown. Safe edits
    (layout, --max-model-len, --gpu-memory-utilization, --dtype, NCCL settings,
    a GPU left out) are made by the runner; steps that change the machine are
    printed for you. Exit status: 0 ready (or dry run), 1 no automatic fix
    left or attempts used up, 2 bad input, 3 a step needs you, 130 interrupted.
    """
    from qwen_triage.runner.main import LIMITS, RelaunchOptions, run

    limits = {name: opts.pop(name) for name in LIMITS}  # the profile's limits, as --attempts, --stall, …
    sys.exit(run(RelaunchOptions(command=command, limits=limits, **opts)))  # the rest by their own names


COMMANDS = [relaunch]
