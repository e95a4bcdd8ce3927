"""Triton Inference Server (``tritonserver``) as PyTriton ships it (``pip install nvidia-pytriton``: the server binary,
its core library and the Python backend with a stub per Python version), run the way users run the NGC image: a model
repository of Python-backend models, the default ports 8000/8001/8002, the server's own defaults. On this host there
is no GPU and no CUDA driver, which is what a CPU-only host or a container started without ``--gpus`` gives Triton.

The failures are the ones Triton's users report: a repository path or version directory missing, a config.pbtxt
Triton cannot parse or refuses (a syntax error, an unknown data type, a KIND_CPU group naming GPUs, a directory name
that is not the model's name), a backend the build does not have, a model.py that imports a missing package or is not
there (the server then waits forever for its stub), the Python backend's shared memory larger than a container's 64 MB
/dev/shm, an ensemble naming a model the repository does not hold, a warmup without the model's input, a conda-pack
EXECUTION_ENV_PATH that is not there, a KIND_GPU group on a host without GPUs (with and without --exit-on-error),
--load-model naming a model that is not in the repository, ports another process holds, two services on one port,
command-line values and options tritonserver refuses, a stub built for another Python. Healthy: the server loading a
Python model (and an ensemble over it) and answering an inference, explicit model control, ``--help``.

How it runs here: the release's ``after`` step copies the Python backend into ``<venv>/backends/python`` with the stub
for the venv's Python linked in, and writes ``<venv>/bin/tritonserver``, which sets LD_LIBRARY_PATH to the venv
Python's libdir (the stub embeds libpython) and runs the bundled binary with ``--backend-directory`` at that folder
(the NGC image's /opt/tritonserver/backends is the binary's own default). Every server runs in ``unshare -n``, a network
namespace of its own with loopback up, so the default ports 0.0.0.0:8000-8002 are reachable from nowhere else and clash
with no other run; the shared-memory case also mounts a 64 MB tmpfs on /dev/shm (``unshare -m``), Docker's default.
"""

from case import PORT_HOLDER, Case, Program, Release

OLD = "0.5.2"  # nvidia-pytriton; its tritonserver is 2.42.0 (March 2024, the pack's horizon)
NEW = "0.7.0"  # its tritonserver is 2.51.0

# The after-step: the Python backend (with this Python's stub) in <venv>/backends/python, every stub under
# <venv>/python_backend_stubs, and the tritonserver wrapper in <venv>/bin.
SETUP = r'''
import importlib.util, pathlib, shutil, sys, sysconfig
venv = pathlib.Path(sys.argv[1])
ts = pathlib.Path(importlib.util.find_spec("pytriton").origin).parent / "tritonserver"
be = venv / "backends" / "python"
be.mkdir(parents=True, exist_ok=True)
for f in (ts / "backends" / "python").iterdir():
    if f.is_file():
        shutil.copy2(f, be / f.name)
for link, target in ((be / "triton_python_backend_stub",
                      ts / "python_backend_stubs" / f"{sys.version_info[0]}.{sys.version_info[1]}" / "triton_python_backend_stub"),
                     (venv / "python_backend_stubs", ts / "python_backend_stubs")):
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target)
wrapper = venv / "bin" / "tritonserver"
wrapper.write_text(
    "#!/bin/sh\n"
    "# the bundled tritonserver with its backends where an image keeps them; the Python stub embeds libpython\n"
    f"export LD_LIBRARY_PATH={sysconfig.get_config_var('LIBDIR')}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\n"
    f"exec {ts / 'bin' / 'tritonserver'} --backend-directory={venv / 'backends'} \"$@\"\n")
wrapper.chmod(0o755)
'''

CONFIG = """\
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

MODEL_PY = """\
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (x + 1).astype(np.float32))]))
        return responses
"""

ENSEMBLE = """\
name: "ens"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling { step [ { model_name: "%s" model_version: -1
  input_map { key: "INPUT0" value: "IN" } output_map { key: "OUTPUT0" value: "OUT" } } ] }
"""


def repo(config: str = CONFIG, model_py: str | None = MODEL_PY, name: str = "add", **more: str) -> dict[str, str]:
    """A model repository with one Python model (``repo/<name>/config.pbtxt``, ``repo/<name>/1/model.py``), plus
    ``more`` files (their paths below ``repo/``)."""
    files = {f"repo/{name}/config.pbtxt": config}
    if model_py is not None:
        files[f"repo/{name}/1/model.py"] = model_py
    files.update({f"repo/{path}": text for path, text in more.items()})
    return files


NETNS = "ip link set lo up && "

def infer(model: str, tensor: str, data: tuple[int, ...] = (1, 2, 3, 4), *, fail: bool = True) -> str:
    """A curl line sending one FP32 row ``data`` to ``model``'s input ``tensor``; with ``fail`` a refused request
    fails the line (curl -f), without it the refusal only reaches the client."""
    values = ", ".join(map(str, data))
    return (f"curl -s{'f' if fail else ''} -o /dev/null -X POST http://127.0.0.1:8000/v2/models/{model}/infer "
            f"-d '{{\"inputs\": [{{\"name\": \"{tensor}\", \"shape\": [1, {len(data)}], \"datatype\": \"FP32\", "
            f"\"data\": [{values}]}}]}}'")


def serve_then_stop(args: str, *, infer: str = "", probe: str = "ready") -> str:
    """Start tritonserver, wait until /v2/health/<probe> answers (the server may die first), run ``infer`` (a curl
    line), then stop it with SIGTERM as docker stop would; exit 0 only if it became ready (and ``infer`` worked). With
    ``probe="live"`` the script then asks for readiness, which a server with a model that failed to load refuses."""
    check = "" if probe == "ready" else "curl -sf -o /dev/null http://127.0.0.1:8000/v2/health/ready || rc=1; "
    return ("{ tritonserver " + args + " & } ; S=$!; rc=1; for i in $(seq 240); do "
            f"curl -sf -o /dev/null http://127.0.0.1:8000/v2/health/{probe} && {{ rc=0; break; }}; "
            "kill -0 $S 2>/dev/null || break; sleep 0.5; done; "
            + check + (f"[ $rc = 0 ] && {{ {infer} || rc=1; }}; " if infer else "")
            + "kill -TERM $S 2>/dev/null; wait $S; exit $rc")


def _case(id: str, expect: list[str], note: str, line: str, *, files: dict | None = None, exit: str = "fail",
          timeout: float = 120, shm_mb: int | None = None) -> Case:
    """One shell line in a network namespace of its own (loopback up); with ``shm_mb`` also in a mount namespace whose
    /dev/shm is a tmpfs of that size."""
    prefix = NETNS
    flags = ["-n"]
    if shm_mb:
        flags.append("-m")
        prefix += f"mount -t tmpfs -o size={shm_mb}m tmpfs /dev/shm && "
    return Case(id=id, expect=expect, argv=["unshare", *flags, "bash", "-c", prefix + line], files=files or {},
                input="mixed", note=note, timeout=timeout, exit=exit)


SERVE = "exec tritonserver --model-repository=repo"

CASES = [
    # --- healthy --------------------------------------------------------------------------------------------------
    _case("serve-healthy", [],
          "healthy: a Python-backend model on a KIND_CPU instance, loaded, answering an inference, stopped with SIGTERM "
          "(a host without a CUDA driver: Triton warns it has no pinned memory pool and no NVML/DCGM metrics)",
          serve_then_stop("--model-repository=repo", infer=infer("add", "INPUT0")),
          files=repo(), exit="ok"),
    _case("ensemble-healthy", [],
          "healthy: an ensemble over the Python model (its CUDA stream cannot be made without a driver, an error line "
          "the server goes on after), answering an inference through the ensemble",
          serve_then_stop("--model-repository=repo", infer=infer("ens", "IN")),
          files=repo(**{"ens/config.pbtxt": ENSEMBLE % "add", "ens/1/.keep": ""}), exit="ok"),
    _case("explicit-load-healthy", [],
          "healthy: --model-control-mode=explicit --load-model=add (only that model loaded at start), ready, stopped",
          serve_then_stop("--model-repository=repo --model-control-mode=explicit --load-model=add"),
          files=repo(), exit="ok"),
    _case("verbose-healthy", [],
          "healthy: --log-verbose=1 (the backend's, the stub's and the request path's own lines), answering an "
          "inference and a request with the wrong shape (refused to the client, the server goes on), stopped",
          serve_then_stop("--model-repository=repo --log-verbose=1",
                          infer=infer("add", "INPUT0") + "; " + infer("add", "INPUT0", (1, 2, 3), fail=False)),
          files=repo(), exit="ok"),
    _case("help-healthy", [], "healthy: tritonserver --help (the usage text; it exits 1)",
          "exec tritonserver --help", exit="any"),
    # --- the model repository ---------------------------------------------------------------------------------------
    _case("repository-path-missing", ["model.file_missing"],
          "--model-repository=/models where nothing is mounted (the volume mount missing or at another path)",
          "exec tritonserver --model-repository=/models"),
    _case("repository-flag-missing", ["config.bad_argument"], "tritonserver started without --model-repository",
          "exec tritonserver"),
    _case("version-directory-missing", ["model.file_missing"],
          "the model directory has config.pbtxt but no numeric version sub-directory (model.py put beside the config)",
          SERVE, files={"repo/add/config.pbtxt": CONFIG, "repo/add/model.py": MODEL_PY}),
    _case("model-py-missing", ["model.file_missing"],
          "the version directory 1/ is there without its model.py: the stub stops at once and the server waits for it "
          "for ever (killed by the harness)", SERVE, files=repo(model_py=None, **{"add/1/.keep": ""}), exit="timeout",
          timeout=45),
    _case("load-model-not-in-repository", ["model.file_missing"],
          "--model-control-mode=explicit --load-model=llama, a model the repository does not hold",
          SERVE + " --model-control-mode=explicit --load-model=llama", files=repo()),
    _case("ensemble-member-missing", ["model.file_missing"],
          "an ensemble whose step names a model (tokenizer) that is not in the repository",
          SERVE, files=repo(**{"ens/config.pbtxt": ENSEMBLE % "tokenizer", "ens/1/.keep": ""})),
    _case("directory-name-mismatch", ["config.bad_argument"],
          "config.pbtxt says name: \"qwen\" in the directory add/ (Triton wants the two equal)",
          SERVE, files=repo(config='name: "qwen"\n' + CONFIG)),
    # --- config.pbtxt -------------------------------------------------------------------------------------------------
    _case("config-syntax-error", ["config.bad_argument"], "config.pbtxt with a misplaced colon (text-format parse error)",
          SERVE, files=repo(config=CONFIG.replace("max_batch_size: 8", "max_batch_size 8 :"))),
    _case("config-data-type-unknown", ["config.bad_argument"], "config.pbtxt with data_type: TYPE_FP33",
          SERVE, files=repo(config=CONFIG.replace("TYPE_FP32 dims", "TYPE_FP33 dims", 1))),
    _case("kind-cpu-names-gpus", ["config.bad_argument"], "a KIND_CPU instance group that lists gpus: [ 1 ]",
          SERVE, files=repo(config=CONFIG.replace("count: 1 }", "count: 1 gpus: [ 1 ] }"))),
    _case("warmup-input-missing", ["config.bad_argument"],
          "a model_warmup sample that names INPUT1, which the model does not have (INPUT0 is missing from it)",
          SERVE, files=repo(config=CONFIG + 'model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT1" value { '
                                              'data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]\n')),
    # --- backends -------------------------------------------------------------------------------------------------------
    _case("backend-not-installed", ["runtime.backend_mismatch"],
          "a model with backend: \"onnxruntime\" on a server whose build has only the Python backend",
          SERVE, files=repo(config=CONFIG.replace('"python"', '"onnxruntime"'), model_py=None,
                            **{"add/1/model.onnx": "not really onnx\n"})),
    _case("model-py-import-missing", ["runtime.backend_mismatch"],
          "model.py imports transformers, which the server's Python environment does not have",
          SERVE, files=repo(model_py="import transformers\n" + MODEL_PY)),
    _case("stub-python-mismatch", ["runtime.backend_mismatch"],
          "a backend directory whose triton_python_backend_stub was built for Python 3.10 (libpython3.10 is not on "
          "this host): the stub cannot start and the server waits for it for ever (killed by the harness)",
          "mkdir -p be/python && cp {bin}/../backends/python/*.py {bin}/../backends/python/*.so be/python/ && "
          "ln -s {bin}/../python_backend_stubs/3.10/triton_python_backend_stub be/python/ && "
          + SERVE + " --backend-directory=be", files=repo(), exit="timeout", timeout=45),
    _case("execution-env-missing", ["model.file_missing"],
          "EXECUTION_ENV_PATH names $$TRITON_MODEL_DIRECTORY/env.tar.gz, a conda-pack archive that was never copied in",
          SERVE, files=repo(config=CONFIG + 'parameters: { key: "EXECUTION_ENV_PATH", value: {string_value: '
                                              '"$$TRITON_MODEL_DIRECTORY/env.tar.gz"} }\n')),
    _case("python-shm-exceeds-dev-shm", ["nccl.shm_too_small"],
          "--backend-config=python,shm-default-byte-size=134217728 (128 MB per instance) in a container with Docker's "
          "default 64 MB /dev/shm", SERVE + " --backend-config=python,shm-default-byte-size=134217728",
          files=repo(), shm_mb=64),
    # --- GPUs -------------------------------------------------------------------------------------------------------
    _case("kind-gpu-no-gpu", ["runtime.no_gpu_visible"],
          "a KIND_GPU instance group on a host (or a container started without --gpus) with no GPU",
          SERVE, files=repo(config=CONFIG.replace("KIND_CPU", "KIND_GPU"))),
    _case("kind-gpu-no-gpu-exit-on-error-false", ["runtime.no_gpu_visible"],
          "--exit-on-error=false with a CPU model and a KIND_GPU one on a host without GPUs: the server comes up "
          "(live), the GPU model is UNAVAILABLE and readiness is refused; stopped with SIGTERM",
          serve_then_stop("--model-repository=repo --exit-on-error=false", probe="live"),
          files=repo(**{"llm/config.pbtxt": CONFIG.replace("KIND_CPU", "KIND_GPU"), "llm/1/model.py": MODEL_PY})),
    # --- ports and the command line ------------------------------------------------------------------------------
    _case("http-port-in-use", ["server.port_in_use"], "another process already listens on 8000 (HTTP)",
          "{python} hold.py 8000 tritonserver --model-repository=repo", files={**repo(), "hold.py": PORT_HOLDER}),
    _case("grpc-port-in-use", ["server.port_in_use"], "another process already listens on 8001 (GRPC)",
          "{python} hold.py 8001 tritonserver --model-repository=repo", files={**repo(), "hold.py": PORT_HOLDER}),
    _case("http-port-equals-grpc-port", ["config.bad_argument"], "--http-port 8001, the GRPC service's default port",
          SERVE + " --http-port 8001", files=repo()),
    _case("option-value-not-integer", ["config.bad_argument"], "--http-thread-count=abc (the option takes an integer)",
          SERVE + " --http-thread-count=abc", files=repo()),
    _case("option-unknown", ["config.bad_argument"], "--model-store-path=repo, an option tritonserver does not have",
          "exec tritonserver --model-store-path=repo", files=repo()),
]

PROGRAM = Program(
    name="triton",
    dist="nvidia-pytriton",
    releases=[Release(label=label, requirements=[f"nvidia-pytriton=={label}"],
                      after=[["{python}", "-c", SETUP, "{venv}"]]) for label in (OLD, NEW)],
    cases=CASES,
)
