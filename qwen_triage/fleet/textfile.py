"""node_exporter textfile-collector output for `check --textfile FILE`.

Prometheus text exposition format 0.0.4: `# HELP` and `# TYPE` before each
family, label values escaped (backslash, double quote, line feed), no
timestamps (the collector forbids them), and labels of low cardinality only —
class, severity, rule and source, never a PCI address, a pid or a message. The
file is replaced atomically (temporary file beside it, then rename), as the
collector's documentation asks, so a scrape never sees half a file.

Series (alert rules in deploy/prometheus/ are written against these names):

  qwen_triage_up                                         1 when this check read its sources, else 0
  qwen_triage_diagnosis{class,severity,rule,source}      1 for each active diagnosis
  qwen_triage_last_check_timestamp_seconds               when the check ran (Unix time)
  qwen_triage_lines_read_total{source}                   lines read from each source (counter)
  qwen_triage_check_errors_total                         sources that could not be read (counter)
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from qwen_triage.atomicfile import write_atomic
from qwen_triage.fleet.check import CheckResult

PREFIX = "qwen_triage_"


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: str) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{escape_label(str(v))}"' for k, v in labels.items()) + "}"


def _num(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    return repr(float(value))


def render(result: CheckResult, up: bool | None = None) -> str:
    """The whole textfile for one check."""
    up = result.status != "unknown" and not result.errors if up is None else up
    lines: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: list[tuple[dict[str, str], float]]) -> None:
        lines.append(f"# HELP {PREFIX}{name} {help_text}")
        lines.append(f"# TYPE {PREFIX}{name} {kind}")
        for labels, value in samples:
            lines.append(f"{PREFIX}{name}{_labels(**labels)} {_num(value)}")

    family("up", "gauge", "1 when the last qwen-triage check read all its sources, 0 when it could not.",
           [({}, 1 if up else 0)])
    seen: set[tuple[str, str, str, str]] = set()
    diag = []
    for d in result.active:
        key = (d.class_, d.severity, d.rule, d.source)
        if key in seen:
            continue
        seen.add(key)
        diag.append(({"class": d.class_, "severity": d.severity, "rule": d.rule, "source": d.source}, 1.0))
    family("diagnosis", "gauge", "Active qwen-triage diagnosis on this node (1 while it is active).", diag)
    family("last_check_timestamp_seconds", "gauge", "When the last qwen-triage check ran, in Unix time.",
           [({}, round(result.checked_at, 3))])
    family("lines_read_total", "counter", "Log lines qwen-triage check has read from each source.",
           [({"source": s}, n) for s, n in sorted(result.lines_read_total.items())])
    family("check_errors_total", "counter", "Sources qwen-triage check could not read, summed over checks.",
           [({}, result.check_errors_total)])
    return "\n".join(lines) + "\n"


def failure_text(checked_at: float, errors_total: int = 1) -> str:
    """What to write when the check could not run at all: up 0, and nothing active claimed."""
    result = CheckResult(status="unknown", checked_at=checked_at, seconds=0.0, boot_id="", errors=["check failed"],
                         check_errors_total=errors_total)
    return render(result, up=False)


def write_textfile(path: str | os.PathLike[str], text: str) -> None:
    p = Path(path)
    if p.suffix != ".prom":
        raise ValueError(f"{p}: node_exporter's textfile collector reads *.prom files only")
    write_atomic(p, text.encode("utf-8"), mode=0o644)
