"""The remediation runner (``qwen-triage relaunch``).

``vllm_args`` parses a vLLM launch command line, edits it, and renders the
difference between two launches (argv + environment), each change with its
reason. The rest, one job per module:

* ``profile``    the YAML profile and the merged run settings
* ``preflight``  check-model, doctor and plan applied to one command
* ``probes``     read-only machine probes (port holder, /dev/shm, model files)
* ``layout``     the valid layout closest to the request; CPU-build thread binding
* ``fixplan``    diagnoses -> launch edits and instructions; identical-attempt keys
* ``observed``   hangs, timeouts, idle GPUs as diagnoses
* ``readiness``  /health, /v1/models, a completion, per-GPU memory
* ``attempt``    one launch (supervised or detached) and its triage
* ``loop``       the bounded relaunch loop
* ``journal``    the JSONL journal
* ``render``     what is printed
* ``cli``/``main``  the click command, kept cheap to import

The names below are loaded on first use, so importing ``qwen_triage.cli.relaunch``
(which the top-level CLI does to list commands) stays cheap.
"""

from __future__ import annotations

from typing import Any

_VLLM_ARGS = (
    "ArgToken",
    "Change",
    "EntryPoint",
    "VllmArgsError",
    "VllmLaunch",
    "apply_action",
    "apply_edits",
    "diff_launches",
    "parse_command_line",
    "parse_vllm_argv",
    "remove_arg",
    "render_diff",
    "set_arg",
)

__all__ = list(_VLLM_ARGS)


def __getattr__(name: str) -> Any:
    if name in _VLLM_ARGS:
        from qwen_triage.runner.vllm import argv as vllm_args
        return getattr(vllm_args, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
