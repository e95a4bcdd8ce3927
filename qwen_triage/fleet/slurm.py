"""Slurm `HealthCheckProgram` mode: drain this node on node-level diagnoses, and only its own drains undone.

Rules of conduct:
- drain (``scontrol update NodeName=N State=DRAIN Reason="xid_fatal (qwen-triage: hardware.xid_fatal)"``:
  the condition first, because ``sinfo -R`` shows only a reason's first 20 characters)
  only for node-level classes (``node_level`` in rules/classes.yaml: a bad GPU, link or
  bus, a driver/library mismatch, fabric manager down, the node's storage, NIC or
  kernel) — never for a job's own mistake;
- never touch a node that is drained or down for a reason that is not ours
  (someone else's drain stays theirs, with their reason);
- resume (opt-in) only a drain whose reason is one of ours (that form, or the older
  ``qwen-triage: <class>``), once
  no node-level diagnosis is active any more;
- every scontrol call has a timeout (Slurm kills a health check after 60 s).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from dataclasses import dataclass, field
from typing import Callable, Sequence

from qwen_triage.fleet.policy import NodePolicy, acts_on_node
from qwen_triage.fleet.state import ActiveDiagnosis

REASON_PREFIX = "qwen-triage:"
# a reason this module wrote: "xid_fatal (qwen-triage: hardware.xid_fatal, node.nic_error)"
OUR_REASON = re.compile(r"[a-z0-9_]{1,64} \(qwen-triage: [a-z0-9_.]{1,80}(?:, [a-z0-9_.]{1,80}){0,20}\)")
SCONTROL_TIMEOUT = 15.0
MAX_REASON = 200

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def run_scontrol(args: Sequence[str]) -> "subprocess.CompletedProcess[str]":
    """The real runner: scontrol with a timeout, no stdin."""
    return subprocess.run(list(args), capture_output=True, text=True, timeout=SCONTROL_TIMEOUT,
                          stdin=subprocess.DEVNULL)


def node_name(explicit: str | None = None) -> str:
    return explicit or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".", 1)[0]


_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/]*)=")


def parse_show_node(line: str) -> dict[str, str]:
    """`scontrol show node -o NAME` (one line of `Key=value` pairs; values such as Reason contain spaces)."""
    line = line.strip()
    keys = list(_KEY.finditer(line))
    out: dict[str, str] = {}
    for i, m in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
        out[m[1]] = line[m.end() : end].strip()
    return out


def reason_text(reason: str) -> str:
    """Reason without the ``[user@time]`` tail scontrol adds."""
    return re.sub(r"\s*\[[^\]]*@[^\]]*\]\s*$", "", reason.strip())


@dataclass
class NodeInfo:
    name: str
    state: str
    reason: str

    @property
    def flags(self) -> set[str]:
        return {f.rstrip("*~#!%$@^-") for f in self.state.upper().split("+") if f}

    @property
    def drained(self) -> bool:
        return bool(self.flags & {"DRAIN", "DRAINED", "DRAINING"})

    @property
    def down(self) -> bool:
        return bool(self.flags & {"DOWN", "FAIL", "FAILING", "MAINT", "REBOOT_ISSUED", "REBOOT_REQUESTED"})

    @property
    def ours(self) -> bool:
        text = reason_text(self.reason)
        return text.startswith(REASON_PREFIX) or OUR_REASON.fullmatch(text) is not None


@dataclass
class SlurmOutcome:
    node: str
    action: str  # "drained", "updated", "resumed", "none", "left-alone", "error"
    detail: str = ""
    commands: list[list[str]] = field(default_factory=list)


def show_node(node: str, runner: Runner) -> NodeInfo:
    cp = runner(["scontrol", "show", "node", "-o", node])
    if cp.returncode != 0:
        raise RuntimeError(f"scontrol show node {node} failed: {(cp.stderr or cp.stdout).strip()[:200]}")
    fields = parse_show_node(cp.stdout.splitlines()[0] if cp.stdout.strip() else "")
    if not fields.get("NodeName"):
        raise RuntimeError(f"scontrol show node {node}: no node in the answer")
    reason = fields.get("Reason", "")
    if reason in ("(null)", "None"):
        reason = ""
    return NodeInfo(name=fields["NodeName"], state=fields.get("State", ""), reason=reason)


def drain_reason(classes: list[str]) -> str:
    """``xid_fatal (qwen-triage: hardware.xid_fatal, …)``: the condition in the first 20 characters
    (what ``sinfo -R`` shows), every class and who drained it after."""
    head = f"{classes[0].rsplit('.', 1)[-1]} ({REASON_PREFIX} {classes[0]}"
    for c in classes[1:]:
        if len(head) + len(c) + 3 > MAX_REASON:
            break
        head += f", {c}"
    return head + ")"


def apply(
    active: list[ActiveDiagnosis],
    node: str,
    runner: Runner = run_scontrol,
    resume: bool = False,
    *,
    policy: NodePolicy,
) -> SlurmOutcome:
    """Drain, resume or leave the node, from the active diagnoses (already ordered, most severe first)."""
    classes = list(dict.fromkeys(d.class_ for d in active if policy.drains(d.class_) and acts_on_node(d.severity)))
    out = SlurmOutcome(node=node, action="none")
    try:
        info = show_node(node, runner)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        out.action, out.detail = "error", str(exc)
        return out
    busy = info.drained or info.down
    if classes:
        reason = drain_reason(classes)
        if busy and not info.ours:
            out.action = "left-alone"
            out.detail = f"{info.state} by someone else: {reason_text(info.reason) or 'no reason given'}"
            return out
        if info.drained and info.ours and reason_text(info.reason) == reason:
            out.detail = f"already drained: {reason}"
            return out
        cmd = ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"]
        out.commands.append(cmd)
        cp = runner(cmd)
        if cp.returncode != 0:
            out.action, out.detail = "error", f"scontrol update failed: {(cp.stderr or cp.stdout).strip()[:200]}"
            return out
        out.action = "updated" if info.drained and info.ours else "drained"
        out.detail = reason
        return out
    if resume and info.drained and info.ours:
        cmd = ["scontrol", "update", f"NodeName={node}", "State=RESUME"]
        out.commands.append(cmd)
        cp = runner(cmd)
        if cp.returncode != 0:
            out.action, out.detail = "error", f"scontrol update failed: {(cp.stderr or cp.stdout).strip()[:200]}"
            return out
        out.action, out.detail = "resumed", f"was: {reason_text(info.reason)}"
    return out
