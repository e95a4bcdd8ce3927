"""The remediation runner (``qwen-triage relaunch``): groundwork.

``vllm_args`` parses a vLLM launch command line, edits it, and renders the
difference between two launches (argv + environment), each change with its
reason.
"""

from qwen_triage.runner.vllm_args import (
    ArgToken,
    Change,
    EntryPoint,
    VllmArgsError,
    VllmLaunch,
    apply_action,
    apply_edits,
    diff_launches,
    parse_command_line,
    parse_vllm_argv,
    remove_arg,
    render_diff,
    set_arg,
)

__all__ = [
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
]
