"""The bug report's data: versions, the doctor summary, triaged sections (the JSON of ``report --format json``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from qwen_triage.report.model import Hang

BUGREPORT_FORMAT = 2  # 2: `hang`, the logs' multi-rank picture (engine.hang)


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Versions(_M):
    tool: str
    python: str | None = None
    driver: str | None = Field(default=None, description="NVIDIA driver, through NVML")
    cuda_driver: str | None = Field(default=None, description="highest CUDA the driver supports")
    nvml_error: str | None = None
    gpus: list[str] = Field(default_factory=list, description="'N x name (memory)' per kind of GPU")
    torch: str | None = None
    torch_cuda: str | None = None
    vllm: str | None = None
    transformers: str | None = None
    nccl: str | None = None
    ollama: str | None = None
    os: str | None = None
    kernel: str | None = None
    container: str | None = Field(default=None, description="docker, podman, kubernetes, containerd, lxc; None: none seen")


class Finding(_M):
    """One diagnosis or observation, short."""

    severity: str
    rule: str
    title: str
    summary: str = ""
    evidence: list[str] = Field(default_factory=list, description="a few lines of the log, as read")
    fix: list[str] = Field(default_factory=list)


class Section(_M):
    """The triage of one input (a log file, a unit's journal, the kernel log) or the doctor's findings."""

    title: str
    source: str = Field(description="where it came from, in words")
    diagnoses: list[Finding] = Field(default_factory=list)
    observations: list[Finding] = Field(default_factory=list)
    unrecognised: list[str] = Field(default_factory=list, description="error lines no rule explains (templates)")
    notes: list[str] = Field(default_factory=list)
    cut: list[str] = Field(default_factory=list, description="what was left out to keep the report short")


class BugReport(_M):
    format: int = BUGREPORT_FORMAT
    created: str
    versions: Versions
    doctor: Section | None = None
    sections: list[Section] = Field(default_factory=list)
    hang: Hang | None = Field(default=None, description="the logs' multi-rank job read as one (as `scan` of them all "
                              "gives it): the rank that stopped first and one row per rank; null: no multi-rank job")
    notes: list[str] = Field(default_factory=list)
