"""flash-attn installed from its source release with pip, in a venv that has torch (the CPU build) and no CUDA
toolkit: the two ways the install fails before anything compiles. Under pip's build isolation (`--use-pep517`, the
only path of current pips) the setup runs in a fresh build environment without the venv's torch: "No module named
'torch'". With `--no-build-isolation` it sees the venv's torch and finds no nvcc: "flash_attn was requested, but nvcc
was not found", then torch's cpp_extension "CUDA_HOME environment variable is not set".

The release label is flash-attn's version; each case installs that sdist itself (pip fetches it from the index), so
a case runs on its own release only. `--isolated` keeps this machine's pip configuration (extra indexes, find-links)
out of the output. (No healthy case: with FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE its bdist_wheel still asks torch for a
CUDA version to pick a prebuilt wheel, and a CPU torch has none.)
"""

from case import Case, Program, Release

VERSIONS = ["2.5.9.post1", "2.8.3.post2"]
PIP = ["{python}", "-m", "pip", "install", "--isolated", "--no-deps", "--no-cache-dir"]


def _cases(version: str) -> list[Case]:
    pkg = f"flash-attn=={version}"
    return [
        Case(id="pip-build-isolation-no-torch", expect=["runtime.backend_mismatch"],
             argv=PIP + ["--use-pep517", pkg], releases=(version,), timeout=600,
             note="pip install flash-attn with build isolation: the isolated build environment has no torch, and "
                  "flash-attn's setup.py imports it"),
        Case(id="pip-no-build-isolation-no-nvcc", expect=["runtime.backend_mismatch"],
             argv=PIP + ["--no-build-isolation", pkg], releases=(version,), timeout=600,
             note="pip install --no-build-isolation flash-attn with a torch wheel and no CUDA toolkit: no nvcc, "
                  "CUDA_HOME unset"),
    ]


PROGRAM = Program(
    name="flashattn",
    releases=[Release(label=v, requirements=["torch==2.13.0", "numpy", "setuptools", "wheel", "packaging", "ninja",
                                             "psutil"]) for v in VERSIONS],
    cases=[c for v in VERSIONS for c in _cases(v)],
    dist="flash-attn",
)
