"""SGLang (``python -m sglang.launch_server``) as a user on a CPU-only machine meets it: argparse's refusals of
the server flags, and what every launch that gets past the parser prints when the release's GPU-built dependencies
are not there.

Two releases, both installed over the CPU torch of this machine (torch==2.13.0 from /opt/wheels) with the light
runtime dependencies SGLang imports on the way to ServerArgs, and then ``sglang`` itself with ``--no-deps`` (the
``after`` step): a plain ``pip install sglang`` pulls torch==2.14.1 (0.5.23) / 2.7.1 (0.4.10.post2) CUDA builds,
flashinfer, sglang-kernel / sgl-kernel and the CUTLASS DSL, none of which runs here.

- 0.5.23 (the newest): ``--help``, ``sglang.check_env`` and argparse run; everything past the parser stops at the
  model-config import, ``import torchvision.transforms`` (sglang/srt/multimodal/internvl_utils.py), since no
  torchvision build for this CPU torch installs (PyPI's torchvision 0.28 is the CUDA build, "operator
  torchvision::nms does not exist"; 0.29 wants torch 2.14). So the ServerArgs checks (mem fraction, tp/dp,
  port, model path, config.json, tokenizer) are never reached: those launches record what the user sees, a
  missing engine dependency (runtime.backend_mismatch), whatever else was wrong on the command line.
- 0.4.10.post2 (August 2025, still run by users pinned to the 0.4 line): built for torch 2.7, its import of
  sglang.srt.utils calls ``torch._C._cpu._is_amx_tile_supported()``, which torch 2.13 no longer has: every launch,
  ``--help`` included, dies with an AttributeError (runtime.backend_mismatch).
"""

from case import OFFLINE_ENV, PORT_HOLDER, Case, Program, Release, config_edit, tiny_files

LAUNCH = "{python} -m sglang.launch_server"
ENV = {**OFFLINE_ENV, "SGLANG_USE_CPU_ENGINE": "1"}
NEW, OLD = "0.5.23", "0.4.10.post2"

# what both venvs get before sglang (pip resolves these normally); the release's own pins where they differ
COMMON = ["torch==2.13.0", "fastapi", "uvicorn", "uvloop", "orjson", "pyzmq", "psutil", "pydantic", "requests",
          "aiohttp", "tqdm", "numpy", "setproctitle", "msgspec", "pybase64", "python-multipart", "prometheus-client",
          "partial_json_parser", "openai==2.8.0", "einops", "interegular", "pillow", "sentencepiece", "tiktoken",
          "packaging", "triton", "IPython", "scipy", "gguf", "blobfile", "distro", "watchfiles", "xxhash",
          "zstandard", "anthropic", "soundfile"]


def _release(label: str, pins: list[str]) -> Release:
    return Release(label=label, requirements=COMMON + pins, pip_args=["--progress-bar", "off"],
                   after=[["{python}", "-m", "pip", "install", "-q", "--no-deps", f"sglang=={label}"]])


def _launch(id: str, expect: list[str], note: str, args: str, *, releases=(NEW,), tiny: bool = False,
            damage: str = "", prefix: str = "", files: dict | None = None, expect_by: dict | None = None) -> Case:
    written = dict(files or {})
    cmd = ""
    if tiny:
        written.update(tiny_files(damage))
        cmd = "{python} make_tiny_qwen.py {work}/tiny >/dev/null 2>&1 && {python} damage.py && "
    return Case(id=id, expect=expect, input="sglang-serve", env=ENV, note=note, releases=tuple(releases),
                files=written, expect_by=dict(expect_by or {}), timeout=150,
                argv=["bash", "-c", cmd + "exec " + prefix + LAUNCH + " " + args])


CASES = [
    # --- healthy ------------------------------------------------------------------------------------------------
    Case(id="help-healthy", expect=[], input="sglang-serve", env=ENV, exit="ok", releases=(NEW,),
         note="healthy: python -m sglang.launch_server --help prints the server's options",
         argv=["bash", "-c", LAUNCH + " --help"]),
    Case(id="version-healthy", expect=[], input="mixed", env=ENV, exit="ok",
         note="healthy: import sglang and print its version (the lang frontend imports without torch's kernels)",
         argv=["{python}", "-c", "import sglang; print('sglang', sglang.__version__)"]),
    Case(id="check-env-healthy", expect=[], input="mixed", env=ENV, exit="ok", releases=(NEW,), timeout=150,
         note="healthy: python -m sglang.check_env on a CPU-only machine (no CUDA: the GPU entries are left out,"
              " missing optional packages are listed as Module Not Found)",
         argv=["{python}", "-m", "sglang.check_env"]),
    # --- argparse refusals (0.5.23: the parser runs before any heavy import) --------------------------------------
    _launch("dtype-invalid", ["config.bad_argument"], "--dtype with a value outside its choices (float17)",
            "--model-path {work}/tiny --dtype float17"),
    _launch("quantization-invalid", ["config.bad_argument"],
            "--quantization with a method SGLang does not have (awq4)", "--model-path {work}/tiny --quantization awq4"),
    _launch("kv-cache-dtype-invalid", ["config.bad_argument"], "--kv-cache-dtype fp9, not one of its choices",
            "--model-path {work}/tiny --kv-cache-dtype fp9"),
    _launch("tp-not-integer", ["config.bad_argument"], "--tp 2.5: the tensor-parallel size must be an integer",
            "--model-path {work}/tiny --tp 2.5"),
    _launch("mem-fraction-not-float", ["config.bad_argument"], "--mem-fraction-static abc (not a number)",
            "--model-path {work}/tiny --mem-fraction-static abc"),
    _launch("unknown-flag", ["config.bad_argument"], "a misspelt flag (--tensor-parallel-szie)",
            "--model-path {work}/tiny --tensor-parallel-szie 2"),
    _launch("model-path-not-given", ["config.bad_argument"], "no --model-path at all (only --port)",
            "--port {port}"),
    # --- launches past the parser: the torchvision import stops them first (see the module docstring) ------------
    _launch("mem-fraction-above-1", ["runtime.backend_mismatch"],
            "--mem-fraction-static 1.5 on the tiny model; the launch stops at the missing torchvision before"
            " ServerArgs checks the fraction", "--model-path {work}/tiny --mem-fraction-static 1.5", tiny=True,
            releases=(NEW, OLD)),
    _launch("local-model-path-missing", ["runtime.backend_mismatch"],
            "a local model path that does not exist, HF offline; the launch stops at the missing torchvision (0.5.23)"
            " / torch's missing AMX probe (0.4.10.post2) before the path is looked at",
            "--model-path /models/Qwen2.5-7B-Instruct", releases=(NEW, OLD)),
    _launch("port-in-use", ["runtime.backend_mismatch"],
            "--port held by a socket the case opens; the launch stops at the missing torchvision before the port"
            " is checked", "--model-path {work}/tiny --port {port}", tiny=True,
            prefix="{python} holder.py {port} ", files={"holder.py": PORT_HOLDER}),
    _launch("arch-unsupported", ["runtime.backend_mismatch"],
            "config.json names an architecture SGLang does not have (Qwen9ForCausalLM); the launch stops at the"
            " missing torchvision before the model config is read",
            "--model-path {work}/tiny", tiny=True, damage=config_edit(architectures=["Qwen9ForCausalLM"])),
    _launch("tp-dp-offline-repo-id", ["runtime.backend_mismatch"],
            "--tp 3 --dp 2 with a hub repo id and HF_HUB_OFFLINE=1; the launch stops at the missing torchvision",
            "--model-path Qwen/Qwen2.5-0.5B-Instruct --tp 3 --dp 2"),
    # --- 0.4.10.post2: the import itself ---------------------------------------------------------------------------
    _launch("help-torch-too-new", ["runtime.backend_mismatch"],
            "--help on 0.4.10.post2 over torch 2.13: sglang.srt.utils calls torch._C._cpu._is_amx_tile_supported(),"
            " gone from this torch, while importing the server", "--help", releases=(OLD,)),
]

PROGRAM = Program(
    name="sglang",
    dist="sglang",
    releases=[
        _release(OLD, ["transformers==4.54.1", "xgrammar==0.1.22", "llguidance<0.8.0,>=0.7.11"]),
        _release(NEW, ["transformers==5.19.0", "xgrammar==0.2.7", "llguidance"]),
    ],
    cases=CASES,
)
