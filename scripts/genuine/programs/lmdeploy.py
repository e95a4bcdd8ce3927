"""LMDeploy (the ``lmdeploy`` CLI) as users drive it on a host with no GPU: ``lmdeploy serve api_server`` /
``lmdeploy chat`` / ``lmdeploy serve proxy`` / ``lmdeploy check_env`` (and ``lmdeploy convert`` on the older
release, which 0.10 dropped) with flags the parser refuses, engine settings the engine configs refuse, a
--chat-template or --adapters the CLI refuses, a local model path that is not there, a hub id with HF_HUB_OFFLINE=1,
a model folder whose config.json is cut short, a proxy port another socket holds, and what a CUDA-less host gives
(TurboMind's extension needs libcuda.so.1, so `lmdeploy convert` stops there; the PyTorch engine's check finds a
CPU build of torch). Healthy: ``--version``, ``--help``, ``check_env``, a proxy that answers /v1/models.

Two releases: 0.18.0 (the newest) and 0.9.2 (summer 2025). Both wheels pin a torch older than the one CPU torch on
this machine (``torch<=2.12.1`` / ``torch<=2.7.1``; PyPI's torch of those versions is the CUDA build, gigabytes),
so, as llamafactory.py does, the dependencies install with ``torch==2.13.0`` (the CPU wheel in /opt/wheels) and the
lmdeploy wheel itself goes in with ``--no-deps`` in an ``after`` step. Not asked for: triton (0.18.0's
xgrammar brings one in), tilelang, apache-tvm-ffi,
flash-linear-attention, torchvision (GPU kernels and vision models; no case reaches them). The nvidia-*-cu12
runtime wheels the release lists are installed, as ``pip install lmdeploy`` puts them there: the TurboMind extension
then misses only the driver's libcuda.so.1, as on a real CUDA-less host.

The tiny Qwen2 model (random weights, about 1 MB) is written inside each case by ``scripts/make_tiny_qwen.py``.
"""

from dataclasses import replace

from case import OFFLINE_ENV, PORT_HOLDER, Case, Program, Release, tiny_files

BUILD = "{python} make_tiny_qwen.py {work}/tiny >/dev/null 2>&1 && {python} damage.py && exec "
ENV = {**OFFLINE_ENV, "CUDA_VISIBLE_DEVICES": ""}
ENV_HOST = dict(OFFLINE_ENV)  # the host as it is: no GPU, CUDA_VISIBLE_DEVICES unset


def _cli(id: str, expect: list[str], note: str, cmd: str, *, build: bool = False, damage: str = "",
         env: dict | None = None, exit: str = "fail", timeout: float = 180, releases=None, input: str = "lmdeploy-cli",
         files: dict | None = None) -> Case:
    """One ``lmdeploy ...`` command line; with ``build`` the tiny model is written (then damaged) first."""
    written = {**(tiny_files(damage) if build else {}), **(files or {})}
    line = (BUILD if build else "exec ") + "{bin}/lmdeploy " + cmd
    return Case(id=id, expect=expect, argv=["bash", "-c", line], files=written, env={**ENV, **(env or {})},
                input=input, note=note, timeout=timeout, exit=exit, releases=releases)


# --max-batch-size given: without it api_server asks torch.cuda for the device name first (get_max_batch_size), and
# on this host every serve would stop there (the case serve-default-batch-cpu-torch keeps that)
SERVE = "serve api_server %s --server-name 127.0.0.1 --server-port {port} --session-len 256 --max-batch-size 8"

CASES = [
    # --- healthy --------------------------------------------------------------------------------------------------
    _cli("version-healthy", [], "healthy: lmdeploy --version", "--version", exit="ok"),
    _cli("serve-help-healthy", [], "healthy: lmdeploy serve api_server --help", "serve api_server --help", exit="ok"),
    _cli("check-env-healthy", [], "healthy: lmdeploy check_env on the CPU-only host (it lists what it finds)",
         "check_env", exit="ok"),
    _cli("chat-help-healthy", [], "healthy: lmdeploy chat --help", "chat --help", exit="ok"),
    # --- flags the parser refuses ----------------------------------------------------------------------------------
    _cli("backend-invalid", ["config.bad_argument"], "--backend with a value outside its choices (tensorrt)",
         SERVE % "Qwen/Qwen2.5-0.5B-Instruct" + " --backend tensorrt"),
    _cli("quant-policy-invalid", ["config.bad_argument"], "--quant-policy 3 (KV-cache quantization is 0, 4 or 8)",
         SERVE % "Qwen/Qwen2.5-0.5B-Instruct" + " --quant-policy 3"),
    _cli("dtype-invalid", ["config.bad_argument"], "--dtype float8, not one of auto/float16/bfloat16",
         SERVE % "Qwen/Qwen2.5-0.5B-Instruct" + " --dtype float8"),
    _cli("tp-not-integer", ["config.bad_argument"], "--tp two (the flag takes an integer)",
         SERVE % "Qwen/Qwen2.5-0.5B-Instruct" + " --tp two"),
    _cli("unknown-flag", ["config.bad_argument"], "a misspelt flag (--cache-max-entry-cnt)",
         SERVE % "Qwen/Qwen2.5-0.5B-Instruct" + " --cache-max-entry-cnt 0.5"),
    # --- engine settings the engine configs refuse ------------------------------------------------------------------
    _cli("cache-max-entry-count-above-1", ["config.bad_argument"],
         "--cache-max-entry-count 1.5 (a fraction of free GPU memory: must lie in (0, 1])",
         SERVE % "{work}/tiny" + " --backend pytorch --cache-max-entry-count 1.5", build=True),
    _cli("cache-max-entry-count-above-1-turbomind", ["config.bad_argument"],
         "--cache-max-entry-count 1.5 with the TurboMind backend",
         SERVE % "{work}/tiny" + " --backend turbomind --cache-max-entry-count 1.5", build=True),
    _cli("chat-template-unknown", ["config.bad_argument"],
         "--chat-template qwen9: neither a file nor one of LMDeploy's registered chat templates",
         SERVE % "{work}/tiny" + " --backend pytorch --chat-template qwen9", build=True),
    _cli("adapters-repeated-name", ["config.bad_argument"],
         "--adapters given twice the same name (sql=... sql=...): each adapter needs a name of its own",
         SERVE % "{work}/tiny" + " --backend pytorch --adapters sql={work}/lora-a sql={work}/lora-b", build=True,
         releases=("0.18.0",)),
    # (no --tp case for the servers: on this host the PyTorch engine's environment check stops every start before
    # the engine reads --tp, and TurboMind, which checks it first, does not load without the driver; the older
    # release's `lmdeploy convert --tp 3` reaches TurboMind's check)
    # --- model paths and files ---------------------------------------------------------------------------------------
    _cli("local-path-missing", ["config.bad_argument"],
         "a local model path that does not exist on this node (offline: it is no hub id either)",
         SERVE % "/models/Qwen2.5-7B-Instruct"),
    _cli("offline-not-cached", ["download.incomplete"], "a hub model id, HF_HUB_OFFLINE=1 and an empty cache",
         SERVE % "Qwen/Qwen2.5-0.5B-Instruct"),
    _cli("chat-offline-not-cached", ["download.incomplete"], "lmdeploy chat with a hub id, HF_HUB_OFFLINE=1",
         "chat Qwen/Qwen2.5-0.5B-Instruct --backend pytorch"),
    _cli("config-json-truncated", ["model.format_mismatch"], "config.json cut short (not JSON)",
         SERVE % "{work}/tiny", build=True,
         damage="t = (M / 'config.json').read_text(); (M / 'config.json').write_text(t[: len(t) // 2])"),
    _cli("config-json-truncated-pytorch", ["model.format_mismatch"], "config.json cut short, --backend pytorch",
         SERVE % "{work}/tiny" + " --backend pytorch", build=True,
         damage="t = (M / 'config.json').read_text(); (M / 'config.json').write_text(t[: len(t) // 2])"),
    # (no unknown model_type / architecture case for the servers: with TurboMind unloadable the PyTorch engine takes
    # the model, and its environment check stops the start before the model's classes are looked up -- on 0.9.2 the
    # start then hangs; the older release's `lmdeploy convert` reaches TurboMind's support check instead)
    # --- the CUDA-less host ------------------------------------------------------------------------------------------
    # torch here is the CPU build (a CUDA torch is no pip install away on this machine): what LMDeploy meets is
    # "Torch not compiled with CUDA enabled": a torch build that does not match the GPU engine
    # (runtime.backend_mismatch)
    _cli("serve-cpu-host-pytorch", ["runtime.backend_mismatch"],
         "the tiny model served with --backend pytorch on this GPU-less host with a CPU build of torch",
         SERVE % "{work}/tiny" + " --backend pytorch", build=True, env=ENV_HOST),
    # (no --backend turbomind case: TurboMind's extension needs the driver's libcuda.so.1, LMDeploy falls back to the
    # PyTorch engine with a warning, and in the one recording its engine process died on an EOFError of its
    # multiprocessing manager before the environment check printed anything: a log that names no cause)
    _cli("serve-default-batch-cpu-torch", ["runtime.backend_mismatch"],
         "api_server without --max-batch-size: it asks torch.cuda for the GPU's name, and this torch is a CPU build",
         SERVE.replace(" --max-batch-size 8", "") % "{work}/tiny" + " --backend pytorch", build=True, env=ENV_HOST),
    # 0.9.2: the engine process exits after its check, and the server waits for it without end (killed here)
    _cli("serve-cpu-host-hangs", ["runtime.backend_mismatch"],
         "0.9.2 serving the tiny model with --backend pytorch on the GPU-less host (CPU torch): the engine's check "
         "fails and the server hangs", SERVE % "{work}/tiny" + " --backend pytorch", build=True, env=ENV_HOST,
         exit="timeout", timeout=100, releases=("0.9.2",)),
    _cli("chat-cpu-host", ["runtime.backend_mismatch"], "lmdeploy chat on the tiny model, GPU-less host, CPU torch",
         "chat {work}/tiny --backend pytorch --session-len 256", build=True, env=ENV_HOST),
    # --- the proxy (no engine, no GPU): a port already taken ----------------------------------------------------------
    Case(id="proxy-port-in-use", expect=["server.port_in_use"], input="lmdeploy-cli", env=ENV, timeout=120,
         files={"hold.py": PORT_HOLDER},
         note="lmdeploy serve proxy with --server-port held by another socket",
         argv=["bash", "-c", "exec {python} hold.py {port} {bin}/lmdeploy serve proxy --server-name 127.0.0.1"
               " --server-port {port}"]),
    Case(id="proxy-healthy", expect=[], input="lmdeploy-cli", env=ENV, timeout=120, exit="ok",
         note="healthy: lmdeploy serve proxy starts, answers /v1/models (no nodes yet) and is stopped by SIGINT",
         argv=["bash", "-c", "{ {bin}/lmdeploy serve proxy --server-name 127.0.0.1 --server-port {port} & } ; SRV=$!; "
               "for i in $(seq 60); do curl -sf http://127.0.0.1:{port}/v1/models && break; "
               "kill -0 $SRV 2>/dev/null || break; sleep 1; done; rc=$?; echo; kill -INT $SRV; wait $SRV; exit $rc"]),
]

# lmdeploy convert (TurboMind's offline converter): in 0.9.2, gone from 0.10. It imports TurboMind's extension first,
# which needs the driver's libcuda.so.1: on this host every convert stops there, whatever else is wrong (a
# --chat-template nobody has, --tp 3, an architecture TurboMind lacks: tried, all print the same ImportError)
CONVERT = [
    _cli("convert-path-missing", ["config.bad_argument"], "lmdeploy convert with a model path that is not there",
         "convert qwen2 /models/Qwen2.5-7B-Instruct", releases=("0.9.2",)),
    _cli("convert-cpu-host", ["runtime.no_gpu_visible"],
         "lmdeploy convert of the tiny model on the GPU-less host: TurboMind's extension needs libcuda.so.1",
         "convert qwen2 {work}/tiny --dst-path {work}/tm", build=True, env=ENV_HOST, releases=("0.9.2",)),
]
CASES += CONVERT

# Recorded on the older release as well: the cases whose words come from LMDeploy's own checks (argparse's refusals
# and the help texts print alike on both releases), and one healthy run of each kind
OLDER_TOO = {
    "version-healthy", "check-env-healthy", "serve-help-healthy", "proxy-healthy", "cache-max-entry-count-above-1",
    "local-path-missing", "offline-not-cached", "config-json-truncated", "proxy-port-in-use",
}
CASES = [c if c.releases or c.id in OLDER_TOO else replace(c, releases=("0.18.0",)) for c in CASES]

DEPS = ["cloudpickle", "einops", "fastapi", "fire", "mmengine-lite", "partial_json_parser", "pillow", "protobuf",
        "pydantic>2.0.0", "pyzmq", "ray", "safetensors", "sentencepiece", "shortuuid", "tiktoken", "uvicorn",
        "accelerate>=0.29.3", "peft<=0.14.0", "aiohttp", "prometheus_client", "tokenizers",
        "nvidia-nccl-cu12", "nvidia-cuda-runtime-cu12", "nvidia-cublas-cu12", "nvidia-curand-cu12"]

NEW, OLD = "0.18.0", "0.9.2"

PROGRAM = Program(
    name="lmdeploy",
    dist="lmdeploy",
    releases=[
        Release(label=OLD,
                requirements=["torch==2.13.0", "transformers==4.53.3", "numpy<2.0.0", "openai", "outlines",
                              "pynvml", *DEPS],
                pip_args=["-q", "--progress-bar", "off"],
                after=[["{python}", "-m", "pip", "install", "-q", "--no-deps", f"lmdeploy=={OLD}"]]),
        Release(label=NEW,
                requirements=["torch==2.13.0", "transformers==4.57.6", "numpy", "openai>=2.45.0", "openai_harmony",
                              "pybase64", "rdkit", "xgrammar", "opencv-python-headless", *DEPS],
                pip_args=["-q", "--progress-bar", "off"],
                after=[["{python}", "-m", "pip", "install", "-q", "--no-deps", f"lmdeploy=={NEW}"]]),
    ],
    cases=CASES,
)
