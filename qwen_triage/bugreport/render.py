"""The bug report as Markdown (to paste into an issue) or JSON.

Text that came from outside (log lines, summaries, paths) is escaped for
Markdown (``report.markdown.md_escape``) or sits in a fenced block it cannot
close; the report is redacted before it gets here (``collect.redacted``).
"""

from __future__ import annotations

from qwen_triage.bugreport.model import BugReport, Finding, Section
from qwen_triage.report.markdown import hang_markdown, md_escape

_VERSION_ROWS = (
    ("tool", "qwen-triage"), ("driver", "NVIDIA driver"), ("cuda_driver", "CUDA (driver)"), ("torch", "torch"),
    ("torch_cuda", "torch built for CUDA"), ("vllm", "vLLM"), ("transformers", "transformers"), ("nccl", "NCCL"),
    ("ollama", "Ollama"), ("python", "Python"), ("os", "OS"), ("kernel", "Linux kernel"), ("container", "container"),
)


def to_json(report: BugReport) -> str:
    return report.model_dump_json(indent=2) + "\n"


def _finding(f: Finding) -> list[str]:
    out = [f"- **{md_escape(f.severity)}** `[{md_escape(f.rule, code=True).replace('`', '')}]` {md_escape(f.title)}"]
    if f.summary and f.summary != f.title:
        out.append(f"  {md_escape(f.summary)}")
    if f.evidence:
        out += ["", "  ```text", *(f"  {md_escape(e, code=True)}" for e in f.evidence), "  ```"]
    for step in f.fix:
        out.append(f"  - fix: {md_escape(step)}")
    return out


def _section(s: Section) -> list[str]:
    out = [f"## {md_escape(s.title)}", "", f"_{md_escape(s.source)}_", ""]
    if not s.diagnoses:
        out.append("No diagnosis.")
    for f in s.diagnoses:
        out += _finding(f)
    if s.observations:
        out += ["", "Observations:", ""]
        for f in s.observations:
            out += _finding(f)
    if s.unrecognised:
        out += ["", "Error lines no rule explains:", "", "```text", *(md_escape(u, code=True) for u in s.unrecognised),
                "```"]
    for n in s.notes:
        out.append(f"- note: {md_escape(n)}")
    if s.cut:
        out.append(f"- cut to keep this short: {md_escape('; '.join(s.cut))}")
    return out + [""]


def to_markdown(report: BugReport) -> str:
    v = report.versions
    out = ["# qwen-triage report", "", f"Created {md_escape(report.created)} (secrets redacted).", "",
           "| | version |", "|---|---|"]
    for key, label in _VERSION_ROWS:
        value = getattr(v, key)
        if value:
            out.append(f"| {label} | {md_escape(str(value))} |")
    if v.gpus:
        out.append(f"| GPUs | {md_escape(', '.join(v.gpus))} |")
    if v.nvml_error:
        out.append(f"| NVML | {md_escape(v.nvml_error)} |")
    out.append("")
    if report.doctor is not None:
        out += _section(report.doctor)
    if report.hang is not None:
        out += hang_markdown(report.hang)
    for s in report.sections:
        out += _section(s)
    for n in report.notes:
        out.append(f"- {md_escape(n)}")
    return "\n".join(out).rstrip() + "\n"
