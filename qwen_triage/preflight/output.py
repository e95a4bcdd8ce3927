"""The head every preflight JSON output shares: its schema version and the tool that wrote it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from qwen_triage import __version__
from qwen_triage.preflight import PREFLIGHT_SCHEMA_VERSION


class PreflightOutput(BaseModel):
    """Base of ``plan``, ``check-model`` and ``doctor`` results; each adds its ``kind`` first."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = PREFLIGHT_SCHEMA_VERSION
    tool: str = f"qwen-triage {__version__}"
