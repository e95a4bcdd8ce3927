"""Xinference (``pip install xinference``: the model-serving layer over vLLM / SGLang / llama.cpp / transformers) as
a user drives it on a CPU-only, offline host: ``xinference-local`` (supervisor + worker + REST API in one process
tree) started on 127.0.0.1 and the ``xinference`` client commands run against it -- ``launch`` of a model name the
registry lacks, with an engine that is not installed (vLLM, llama.cpp), a size / format / quantization the model
does not have, a --model-path that is not there, --n-gpu on a host without GPUs, a hub model with HF_HUB_OFFLINE=1
and an empty cache, a local model folder whose config.json names an architecture transformers does not know,
``terminate`` of a uid that is not running; ``xinference-local`` on a port another socket holds, a client with no
server listening, flags click refuses. Healthy: ``--version``, ``launch --help``, a local cluster that answers
``xinference list`` and ``xinference registrations -t LLM``, and the tiny random Qwen2 (``scripts/make_tiny_qwen.py``)
launched from its folder with the transformers engine on the CPU, answering one chat completion, terminated.

Not recorded: ``xinference engine -n qwen2.5-instruct`` (4.1.0's client dies on its own TypeError, "string indices
must be integers", reading the server's answer: a bug of the CLI, no class of the pack), and the first-start login
("Cannot find access token, please login first!", see below: no class either).

One release, 4.1.0 (the newest), installed with its own dependencies over the CPU torch of this machine
(torch==2.13.0 from /opt/wheels). pip then brings PyPI's torchvision 0.28 (via timm), a CUDA build that does not
load with this torch ("operator torchvision::nms does not exist") and that transformers imports when it is there,
so every model load would stop on it: the ``after`` step removes it (no case reaches a vision model). An older 1.x
release (1.17.1, tried) is not recorded: its supervisor imports torchvision at start-up (model/image/ocr/deepseek_ocr.py),
so with PyPI's torchvision or without it every xinference-local on this CPU torch dies before it serves.

Every case runs with XINFERENCE_HOME in its work directory, HF_HUB_OFFLINE=1, XINFERENCE_ENABLE_VIRTUAL_ENV=0 (4.x
otherwise builds a virtualenv per launch with uv and installs the engine's packages into it: a download) and
XINFERENCE_AUTH_ADVANCED=0 (4.x otherwise turns on its account system at first start, and every client command
stops at "Cannot find access token, please login first!" until an admin account is set up). The server listens on
127.0.0.1:{port} only and is stopped with SIGINT at the end of the case (the harness kills the process group too).

Case ids of the cases that start a server stay at 27 characters or fewer: xoscar (the actor framework under Xinference)
binds its unix sockets under $HOME/.xoscar/socket/<md5>, $HOME is inside the case's work directory (named after the
id), and a longer id pushes that path past the 107 bytes of AF_UNIX ("OSError: AF_UNIX path too long": the local
cluster then fails to start).
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

NEW = "4.1.0"

ENV = {**OFFLINE_ENV, "XINFERENCE_HOME": "{work}/xinference-home", "XINFERENCE_ENABLE_VIRTUAL_ENV": "0",
       "XINFERENCE_AUTH_ADVANCED": "0", "XINFERENCE_MODEL_SRC": "huggingface", "CUDA_VISIBLE_DEVICES": ""}
EP = "-e http://127.0.0.1:{port}"

# xinference-local on 127.0.0.1:{port}, ready when /status answers
START = start_server("{bin}/xinference-local -H 127.0.0.1 -p {port}", "http://127.0.0.1:{port}/status")

LLM = "-n qwen2.5-instruct -en transformers -s 0_5 -f pytorch"


def _served(id: str, expect: list[str], note: str, client: str, *, tiny: bool = False, damage: str = "",
            exit: str = "fail") -> Case:
    """``xinference-local`` started, one ``xinference`` client command (or script) run against it, the server
    stopped. ``client`` is a shell fragment that leaves its status in ``$rc``."""
    return Case(id=id, expect=expect, input="mixed", env=ENV, note=note, timeout=300, exit=exit,
                files=tiny_files(damage) if tiny else {},
                argv=["bash", "-c", (BUILD_DAMAGED_TINY if tiny else "") + START + client + STOP_SERVER])


def _launch(id: str, expect: list[str], note: str, args: str, **kw) -> Case:
    return _served(id, expect, note, "{bin}/xinference launch " + args + " " + EP + "; rc=$?; ", **kw)


CASES = [
    # --- healthy ----------------------------------------------------------------------------------------------------
    Case(id="version-healthy", expect=[], input="mixed", env=ENV, exit="ok", note="healthy: xinference --version",
         argv=["{bin}/xinference", "--version"]),
    Case(id="launch-help-healthy", expect=[], input="mixed", env=ENV, exit="ok",
         note="healthy: xinference launch --help lists the launch options",
         argv=["{bin}/xinference", "launch", "--help"]),
    _served("local-list-healthy", [], "healthy: xinference-local starts on 127.0.0.1, `xinference list` answers (no "
            "model running) and the cluster is stopped with SIGINT",
            "{bin}/xinference list " + EP + "; rc=$?; ", exit="ok"),
    _served("registrations-healthy", [], "healthy: xinference-local starts, `xinference registrations -t LLM` lists "
            "the built-in LLM families (offline: the registry ships in the wheel), the cluster is stopped",
            "{bin}/xinference registrations -t LLM " + EP + "; rc=$?; ", exit="ok"),
    _served("launch-tiny-healthy", [],
            "healthy: the tiny random Qwen2 launched from its folder (--model-path) as qwen2.5-instruct with the "
            "transformers engine on the CPU, listed, one chat completion answered, terminated, cluster stopped",
            "{bin}/xinference launch " + LLM + " --model-path {work}/tiny -u tiny " + EP + " && "
            "{bin}/xinference list " + EP + " && "
            "curl -sf http://127.0.0.1:{port}/v1/chat/completions -H 'Content-Type: application/json' "
            "-d '{\"model\": \"tiny\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 4}' "
            "&& echo && {bin}/xinference terminate --model-uid tiny " + EP + "; rc=$?; ",
            tiny=True, exit="ok"),
    # --- the command line -------------------------------------------------------------------------------------------
    Case(id="local-port-not-integer", expect=["config.bad_argument"], input="mixed", env=ENV,
         note="xinference-local -p abc: click refuses the port (not an integer)",
         argv=["{bin}/xinference-local", "-H", "127.0.0.1", "-p", "abc"]),
    Case(id="launch-context-length-zero", expect=["config.bad_argument"], input="mixed", env=ENV,
         note="xinference launch --context-length 0: click refuses it (the option's range starts at 1)",
         argv=["{bin}/xinference", "launch", "-n", "qwen2.5-instruct", "-en", "transformers", "--context-length",
               "0", "-e", "http://127.0.0.1:{port}"]),
    Case(id="local-unknown-option", expect=["config.bad_argument"], input="mixed", env=ENV,
         note="xinference-local with a misspelt option (--log-levle)",
         argv=["{bin}/xinference-local", "-H", "127.0.0.1", "-p", "{port}", "--log-levle", "debug"]),
    # --- no server --------------------------------------------------------------------------------------------------
    Case(id="list-no-server", expect=["dist.rendezvous_failed"], input="mixed", env=ENV,
         note="xinference list against 127.0.0.1:{port} where no Xinference server listens (never started, or the "
              "wrong port): the client's connection is refused",
         argv=["{bin}/xinference", "list", "-e", "http://127.0.0.1:{port}"]),
    Case(id="local-port-in-use", expect=["server.port_in_use"], input="mixed", env=ENV, timeout=240,
         files={"hold.py": PORT_HOLDER},
         note="xinference-local -p PORT while another socket holds PORT",
         argv=["bash", "-c", "exec {python} hold.py {port} {bin}/xinference-local -H 127.0.0.1 -p {port}"]),
    # --- launches the server refuses ----------------------------------------------------------------------------------
    _launch("launch-no-engine", ["config.bad_argument"],
            "xinference launch of an LLM without --model-engine: 4.x requires it (the client refuses)",
            "-n qwen2.5-instruct -s 0_5 -f pytorch"),
    _launch("launch-unknown-model", ["config.bad_argument"],
            "xinference launch of a model name the registry does not have (qwen9-instruct)",
            "-n qwen9-instruct -en transformers"),
    _launch("launch-engine-vllm-missing", ["runtime.backend_mismatch"],
            "xinference launch --model-engine vllm where vLLM is not installed (and there is no GPU): the model's "
            "engine table has no vllm entry", "-n qwen2.5-instruct -en vllm -s 0_5 -f pytorch"),
    _launch("launch-llamacpp-missing", ["runtime.backend_mismatch"],
            "xinference launch of a GGUF model with --model-engine llama.cpp where xllamacpp / llama-cpp-python is not "
            "installed", "-n qwen2.5-instruct -en llama.cpp -s 0_5 -f ggufv2 -q q4_k_m"),
    _launch("launch-size-unknown", ["config.bad_argument"],
            "xinference launch with a size the model family does not have (-s 999)",
            "-n qwen2.5-instruct -en transformers -s 999 -f pytorch"),
    _launch("launch-quantization-unknown", ["config.bad_argument"],
            "xinference launch with a quantization the pytorch format does not offer (-q int3)",
            "-n qwen2.5-instruct -en transformers -s 0_5 -f pytorch -q int3"),
    _launch("launch-format-unknown", ["config.bad_argument"],
            "xinference launch with a model format the family does not list (-f safetensors)",
            "-n qwen2.5-instruct -en transformers -s 0_5 -f safetensors"),
    _launch("launch-model-path-missing", ["model.file_missing"],
            "xinference launch --model-path of a folder that does not exist on the worker",
            LLM + " --model-path /models/Qwen2.5-0.5B-Instruct"),
    _launch("launch-n-gpu-no-gpu", ["config.bad_argument"],
            "xinference launch --n-gpu 2 on a host without GPUs: n_gpu must lie between 1 and the GPU count (0)",
            LLM + " --n-gpu 2"),
    _launch("launch-offline-not-cached", ["download.incomplete"],
            "xinference launch of a hub model with HF_HUB_OFFLINE=1 and an empty cache: the download fails after "
            "Xinference's retries", LLM),
    _launch("launch-arch-unknown", ["model.arch_unsupported"],
            "xinference launch --model-path of a model folder whose config.json names model_type qwen9 "
            "(Qwen9ForCausalLM), which this transformers does not know",
            LLM + " --model-path {work}/tiny", tiny=True,
            damage=config_edit(model_type="qwen9", architectures=["Qwen9ForCausalLM"])),
    _served("terminate-unknown-uid", ["config.bad_argument"],
            "xinference terminate --model-uid of a model that is not running",
            "{bin}/xinference terminate --model-uid qwen2.5-instruct-0 " + EP + "; rc=$?; "),
]

PROGRAM = Program(
    name="xinference",
    dist="xinference",
    releases=[Release(label=NEW, requirements=["torch==2.13.0", f"xinference=={NEW}"],
                      pip_args=["-q", "--progress-bar", "off"],
                      after=DROP_TORCHVISION)],
    cases=CASES,
)
