"""Python, torch, vLLM, NCCL, transformers and Ollama versions, and the environment that steers them.

Versions come from package metadata and torch's ``version.py`` read as text:
importing torch would take seconds, initialise CUDA state and fail in exactly
the broken environments ``doctor`` is for.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from qwen_triage.redact import is_secret_env

PACKAGES = (
    "torch",
    "vllm",
    "transformers",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu11",
    "nvidia-cuda-runtime-cu12",
    "triton",
    "flash-attn",
    "flashinfer-python",
    "xformers",
    "sglang",
    "llama-cpp-python",
    "safetensors",
    "gguf",
)
ENV_NAMES = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "LD_PRELOAD",
    "PYTORCH_CUDA_ALLOC_CONF",
    "CUDA_DISABLE_CONTROL",
)
ENV_PREFIXES = ("NCCL_", "VLLM_", "TORCH_NCCL_", "OLLAMA_")
_TORCH_CUDA = re.compile(r"^cuda\s*(?::[^=]*)?=\s*['\"]([\d.]+)['\"]", re.MULTILINE)

# Minimum Linux driver for each CUDA toolkit (CUDA release notes, table 3).
MIN_DRIVER = {
    "11.8": "520.61.05",
    "12.0": "525.60.13",
    "12.1": "530.30.02",
    "12.2": "535.54.03",
    "12.3": "545.23.06",
    "12.4": "550.54.14",
    "12.5": "555.42.02",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
}


class SoftwareInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    python: str
    packages: dict[str, str] = {}
    torch_cuda: str | None = None
    nccl: str | None = None
    ollama: str | None = None
    env: dict[str, str] = {}


def relevant_env(environ: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for name, value in sorted(environ.items()):
        if name in ENV_NAMES or name.startswith(ENV_PREFIXES):
            out[name] = "<redacted>" if is_secret_env(name) else value
    return out


def torch_cuda_version(find_spec: Callable[[str], object | None] = importlib.util.find_spec) -> str | None:
    """The CUDA torch was built for, from ``torch/version.py`` read as text (torch is not imported)."""
    try:
        spec = find_spec("torch")
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None)
    if not origin:
        return None
    try:
        text = (Path(origin).parent / "version.py").read_text(encoding="utf-8")
    except OSError:
        return None
    m = _TORCH_CUDA.search(text)
    return m.group(1) if m else None


def ollama_version(
    which: Callable[[str], str | None] = shutil.which,
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> str | None:
    exe = which("ollama")
    if not exe:
        return None
    try:
        done = run([exe, "--version"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"version is (\S+)", (done.stdout or "") + (done.stderr or ""))
    return m.group(1) if m else None


def probe_software(
    environ: Mapping[str, str] | None = None,
    *,
    version: Callable[[str], str] = md.version,
    find_spec: Callable[[str], object | None] = importlib.util.find_spec,
    which: Callable[[str], str | None] = shutil.which,
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> SoftwareInfo:
    environ = os.environ if environ is None else environ
    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = version(name)
        except md.PackageNotFoundError:
            continue
    torch_cuda = None
    if "torch" in packages:
        m = re.search(r"\+cu(\d+)(\d)$", packages["torch"])
        torch_cuda = torch_cuda_version(find_spec) or (f"{m.group(1)}.{m.group(2)}" if m else None)
    return SoftwareInfo(
        python=sys.version.split()[0],
        packages=packages,
        torch_cuda=torch_cuda,
        nccl=packages.get("nvidia-nccl-cu12") or packages.get("nvidia-nccl-cu11"),
        ollama=ollama_version(which, run),
        env=relevant_env(environ),
    )


def _vt(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def cuda_gap(runtime_cuda: str, driver_cuda: str) -> str | None:
    """'major' when the driver cannot run that CUDA at all, 'minor' when only minor-version compatibility saves it."""
    r, d = _vt(runtime_cuda), _vt(driver_cuda)
    if not r or not d:
        return None
    if r[0] > d[0]:
        return "major"
    if r[0] == d[0] and r[:2] > d[:2]:
        return "minor"
    return None
