"""node-problem-detector's custom-plugin protocol.

The contract (NPD `docs/custom_plugin_monitor.md`, `pkg/custompluginmonitor`):
the plugin's exit status is the condition's status — 0 OK, 1 NonOK (a
problem), 2 Unknown (anything else is Unknown too) — and its stdout is the
message, cut by NPD at ``max_output_length`` bytes (80 by default). NPD keeps
the condition's `reason` from its own config, so the message is for people:
one line, naming the class first, then what the evidence says, so the cut
never removes the class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwen_triage.exits import EXIT_OK, EXIT_PROBLEM, EXIT_UNKNOWN
from qwen_triage.fleet.policy import NodePolicy, acts_on_node
from qwen_triage.textsafe import clean

if TYPE_CHECKING:  # types only: a check cut by its deadline says "unknown" without importing the engine
    from qwen_triage.fleet.check import CheckResult
    from qwen_triage.fleet.state import ActiveDiagnosis

DEFAULT_MAX_OUTPUT = 80


def one_line(text: str) -> str:
    """The message as NPD shows it in a node condition: the one sanitiser's text (no escape sequence, control
    character or bidi override: a log's words must not make the condition read differently), on one line."""
    return " ".join(clean(text).split())


def cut(text: str, limit: int) -> str:
    """At most ``limit`` bytes of UTF-8, cut on a character boundary, marked with … when cut."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    ell = "…".encode()
    room = max(limit - len(ell), 0)
    head = data[:room].decode("utf-8", "ignore")
    return head + ("…" if limit >= len(ell) else "")


def detail(d: ActiveDiagnosis) -> str:
    """A short account of one diagnosis: the GPU and Xid where known, else the rule's title."""
    f = d.facts
    if f.get("xid") is not None:
        where = f" {f['pci']}" if f.get("pci") else ""
        return f"GPU{where} Xid {f['xid']}"
    if f.get("pci"):
        return f"{d.title} ({f['pci']})"
    return d.title or d.summary


def message(result: CheckResult) -> str:
    if result.active:
        top = result.active[0]
        text = f"{top.class_}: {one_line(detail(top))}"
        others = {d.class_ for d in result.active[1:] if d.class_ != top.class_}
        if others:
            text += f" (+{len(others)} more)"
        return text
    if result.status == "unknown":
        why = result.errors[0] if result.errors else "no source to read"
        return f"unknown: {why}"
    return "ok: no active diagnosis"


def sets_condition(d: ActiveDiagnosis, policy: NodePolicy) -> bool:
    """Whether a diagnosis turns the node's condition on: a warning of a node-level class (a lost carrier, a
    non-fatal SXid) is shown in the message but, like a Slurm drain, the condition waits for an error."""
    return acts_on_node(d.severity) or not policy.about_node(d.class_)


def npd_output(result: CheckResult, max_output: int = DEFAULT_MAX_OUTPUT) -> tuple[int, str]:
    """(exit status, the one line to print) for node-problem-detector; node policy from the result's pack."""
    if result.status == "problem" and not any(sets_condition(d, result.policy) for d in result.active):
        return EXIT_OK, cut(one_line(f"ok: warning only: {message(result)}"), max_output)
    code = EXIT_PROBLEM if result.status == "problem" else EXIT_UNKNOWN if result.status == "unknown" else EXIT_OK
    return code, cut(one_line(message(result)), max_output)


def npd_failure(reason: str, max_output: int = DEFAULT_MAX_OUTPUT) -> tuple[int, str]:
    """The check could not run at all (state locked, rules broken): Unknown, with why."""
    return EXIT_UNKNOWN, cut(one_line(f"unknown: {reason}"), max_output)
