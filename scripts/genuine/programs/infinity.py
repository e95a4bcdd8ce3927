"""Infinity (``pip install "infinity-emb[server,torch]"``: the embedding / rerank server of michaelfeil/infinity that
RAG stacks run beside their LLM server) as a user starts it: ``infinity_emb v2 --model-id ...`` on 127.0.0.1, one
request, stopped with SIGINT (as Ctrl-C; uvicorn then prints a KeyboardInterrupt / CancelledError traceback that a
healthy log must not be diagnosed by). Healthy: the tiny random Qwen2 of ``make_tiny_qwen.py`` served on the CPU
(sentence-transformers wraps it with mean pooling and says so in a WARNING), in float16, behind an API key (one
request refused with 401, one answered), and a server answering requests for a model it does not serve and for
rerank on an embedding model with 400s.

The failures of its issue tracker: ``--device cuda`` where torch sees no CUDA device (infinity then dies on an
IndexError building its device list, in typer's boxed traceback), the optimum and ctranslate2 engines without their
extras, a port another socket holds, a hub model id offline with an empty cache, a local path that does not exist
(the hub refuses it as a repo id), weights cut short, a folder without config.json, a model type transformers does
not know, typer's refusals of a value (``--dtype bf16``) and of the v1 flag ``--model-name-or-path`` on ``v2``.

One release, 0.0.78 (the newest), with the sentence-transformers 3.4 and transformers 4.57 it pins, over the CPU
torch of this machine; the ``after`` step removes PyPI's CUDA torchvision as elsewhere. Every case runs offline with
DO_NOT_TRACK=1 (infinity's anonymous usage statistics off) and no CUDA device visible.

Not recorded: ``--bettertransformer`` and ``--dtype float16`` on the CPU start and serve (no failure to record; the
second is a healthy case), ``--device mps`` on Linux fails with the same IndexError as ``cuda`` (a wrong device name
rather than a missing GPU, no class of its own), and a folder without its tokenizer files, where transformers falls
back to the slow tokenizer and stops on a missing protobuf: the cause the user sees is a package, not the files.
"""

from case import (
    BUILD_DAMAGED_TINY,
    DROP_TORCHVISION,
    OFFLINE_ENV,
    PORT_HOLDER,
    STOP_SERVER,
    Case,
    Program,
    Release,
    config_edit,
    start_server,
    tiny_files,
)

ENV = {**OFFLINE_ENV, "DO_NOT_TRACK": "1", "INFINITY_ANONYMOUS_USAGE_STATS": "0", "CUDA_VISIBLE_DEVICES": ""}
SERVE = "{bin}/infinity_emb v2 --host 127.0.0.1 --port {port} --model-id "
EMBED = ("curl -sf http://127.0.0.1:{port}/embeddings -H 'Content-Type: application/json' "
         "-d '{\"model\": \"{work}/tiny\", \"input\": [\"hello\"]}' | head -c 200; rc=${PIPESTATUS[0]}; echo; ")


def _serve(id: str, expect: list[str], note: str, args: str, *, damage: str = "", model: str = "{work}/tiny",
           exit: str = "fail", prefix: str = "", client: str = EMBED) -> Case:
    """The tiny model built (and damaged), ``infinity_emb v2`` started on ``model`` with ``args`` (after ``prefix``:
    the port holder), ``client`` run against it (it leaves its status in ``$rc``), the server stopped."""
    line = (BUILD_DAMAGED_TINY + start_server(prefix + SERVE + model + " " + args, "http://127.0.0.1:{port}/health")
            + client + STOP_SERVER)
    return Case(id=id, expect=expect, input="mixed", env=dict(ENV), note=note, timeout=300, exit=exit,
                files={**tiny_files(damage), "hold.py": PORT_HOLDER}, argv=["bash", "-c", line])


CASES = [
    _serve("served-healthy", [], "healthy: infinity_emb v2 serves the tiny model on the CPU (sentence-transformers "
           "adds mean pooling), one embedding, stopped with SIGINT", "--device cpu", exit="ok"),
    _serve("fp16-cpu-healthy", [], "healthy: the same with --dtype float16 on the CPU", "--device cpu --dtype float16",
           exit="ok"),
    _serve("api-key-healthy", [], "healthy: --api-key set; a request without the key answered 401, one with it "
           "answered", "--device cpu --api-key sk-local-test", exit="ok",
           client=("curl -s -o /dev/null http://127.0.0.1:{port}/embeddings -H 'Content-Type: application/json' "
                   "-d '{\"model\": \"{work}/tiny\", \"input\": [\"hello\"]}'; "
                   "curl -sf http://127.0.0.1:{port}/embeddings -H 'Authorization: Bearer sk-local-test' "
                   "-H 'Content-Type: application/json' -d '{\"model\": \"{work}/tiny\", \"input\": [\"hello\"]}' "
                   "| head -c 120; rc=${PIPESTATUS[0]}; echo; ")),
    _serve("bad-requests-healthy", [], "healthy: requests for a model the server does not serve and for rerank on an "
           "embedding model answered 400, then one embedding", "--device cpu", exit="ok",
           client=("curl -s http://127.0.0.1:{port}/embeddings -H 'Content-Type: application/json' "
                   "-d '{\"model\": \"bge-m3\", \"input\": [\"hello\"]}'; echo; "
                   "curl -s http://127.0.0.1:{port}/rerank -H 'Content-Type: application/json' "
                   "-d '{\"model\": \"{work}/tiny\", \"query\": \"q\", \"documents\": [\"a\"]}'; echo; "
                   + EMBED)),
    _serve("device-cuda", ["runtime.no_gpu_visible"], "--device cuda where torch sees no CUDA device (CPU torch, no "
           "GPU passed in): IndexError building the device list", "--device cuda"),
    _serve("engine-optimum", ["runtime.backend_mismatch"], "--engine optimum without infinity-emb[optimum]: "
           "ImportError, optimum.onnxruntime is not available", "--engine optimum --device cpu"),
    _serve("engine-ct2", ["runtime.backend_mismatch"], "--engine ctranslate2 without infinity-emb[ctranslate2]: "
           "ImportError, ctranslate2 is not available", "--engine ctranslate2 --device cpu"),
    _serve("port-in-use", ["server.port_in_use"], "the port is held by another process: uvicorn cannot bind (address "
           "already in use)", "--device cpu", prefix="{python} hold.py {port} "),
    _serve("hub-offline", ["download.incomplete"], "a hub model id with HF_HUB_OFFLINE=1 and an empty cache: nothing "
           "can be fetched", "--device cpu", model="BAAI/bge-small-en-v1.5"),
    _serve("path-missing", ["config.bad_argument"], "a local model path that does not exist: the hub refuses it as a "
           "repo id (HFValidationError)", "--device cpu", model="/models/bge-m3"),
    _serve("weights-truncated", ["model.shard_corrupt"], "model.safetensors cut short (a copy that stopped part-way)",
           "--device cpu", damage="p = M / 'model.safetensors'\np.write_bytes(p.read_bytes()[:30000])"),
    _serve("config-missing", ["model.file_missing"], "a model folder without config.json", "--device cpu",
           damage="(M / 'config.json').unlink()"),
    _serve("dtype-invalid", ["config.bad_argument"], "--dtype bf16: typer refuses the value (the choices are float32, "
           "float16, bfloat16, int8, fp8, auto)", "--device cpu --dtype bf16"),
    _serve("v1-flag-on-v2", ["config.bad_argument"], "--model-name-or-path, the flag of the deprecated v1 command, "
           "given to v2: typer says no such option", "--device cpu --model-name-or-path {work}/tiny"),
    _serve("arch-unknown", ["model.arch_unsupported"], "config.json names a model type transformers does not know "
           "(qwen9)", "--device cpu", damage=config_edit(model_type="qwen9")),
]

PROGRAM = Program(
    name="infinity",
    releases=[Release(label="0.0.78", requirements=["torch==2.13.0", "infinity-emb[server,torch]==0.0.78"],
                      after=DROP_TORCHVISION)],
    cases=CASES,
    dist="infinity_emb",
)
