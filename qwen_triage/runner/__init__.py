"""The remediation runner (``qwen-triage relaunch``).

``vllm/`` parses a vLLM launch command line (``options``: vLLM's option
tables, built in or probed from the launch's own vLLM by ``probe``;
``argv``: the launch model and parser), edits it (``edit``), and renders the
difference between two launches, argv + environment, each change with its
reason (``diff``). The rest, one job per module:

* ``profile``    the YAML profile and the merged run settings
* ``preflight``  check-model, doctor and plan applied to one command
* ``probes``     read-only machine probes (port holder, /dev/shm, model files)
* ``layout``     the valid layout closest to the request; CPU-build thread binding
* ``fixplan``    diagnoses -> launch edits and instructions; identical-attempt keys
* ``observed``   hangs, timeouts, idle GPUs as diagnoses
* ``readiness``  /health, /v1/models, a completion, per-GPU memory
* ``attempt``    the server of one launch (supervised or detached) and its log's triage
* ``one_attempt``  one attempt: start, prove ready, serve, stop and release, triage
* ``fixwait``    a step only the user can take: wait for it (--wait-for-fix) or end the run
* ``deps``/``stops``  what the loop reaches the machine through; how a run ends (exit statuses)
* ``loop``       the bounded relaunch loop: what to launch next, the journal's run records
* ``journal``    the JSONL journal
* ``render``     what is printed
* ``cli``/``main``  the click command, kept cheap to import

The names below are loaded on first use, so importing ``qwen_triage.cli.relaunch``
(which the top-level CLI does to list commands) stays cheap.
"""

from __future__ import annotations

from typing import Any

# name -> the module of runner/vllm/ that holds it
_VLLM_NAMES = {
    "ArgToken": "argv",
    "EntryPoint": "argv",
    "VllmArgsError": "argv",
    "VllmLaunch": "argv",
    "parse_command_line": "argv",
    "parse_vllm_argv": "argv",
    "OptionTable": "options",
    "apply_action": "edit",
    "apply_edits": "edit",
    "remove_arg": "edit",
    "set_arg": "edit",
    "Change": "diff",
    "diff_launches": "diff",
    "render_diff": "diff",
    "parse_launch": "probe",
}

__all__ = sorted(_VLLM_NAMES)


def __getattr__(name: str) -> Any:
    module = _VLLM_NAMES.get(name)
    if module == "argv":
        from qwen_triage.runner.vllm import argv as found
    elif module == "options":
        from qwen_triage.runner.vllm import options as found
    elif module == "edit":
        from qwen_triage.runner.vllm import edit as found
    elif module == "diff":
        from qwen_triage.runner.vllm import diff as found
    elif module == "probe":
        from qwen_triage.runner.vllm import probe as found
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(found, name)
