"""What the relaunch loop reaches the machine through, handed in rather than global.

Tests replace any of these (a replayed NVML probe, a port check, a printer
into a buffer, an event for Ctrl-C) without patching the loop.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from qwen_triage.runner import probes
from qwen_triage.runner.render import Printer

if TYPE_CHECKING:
    from qwen_triage.engine.compiled import CompiledPack
    from qwen_triage.preflight.machine.nvml import GpuProbe


@dataclass
class Deps:
    """Everything the loop reaches the machine through."""

    compiled: Callable[[], "CompiledPack"]
    gpu_probe: "GpuProbe | None" = None  # None: NVML is not used (CPU build, or unavailable)
    printer: Printer = field(default_factory=Printer)
    stop: threading.Event = field(default_factory=threading.Event)  # Ctrl-C: stop cleanly
    kill: threading.Event = field(default_factory=threading.Event)  # Ctrl-C again: no more grace
    port_in_use: Callable[[str | None, int], bool] = probes.port_in_use
    kernel_log: bool = True
    base_env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    wait_poll: float = 5.0  # seconds between --wait-for-fix checks
    # --allow-rule-actions: rules from --rules / QWEN_TRIAGE_RULES may edit the launch too
    allow_rule_actions: bool = False
