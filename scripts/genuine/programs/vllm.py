"""vLLM (the CPU build) refusing to start: argument-parser errors, configuration validation, and model loading
failures that ``fixtures/vllm-cpu`` does not already hold (no config.json, no weights, unknown architecture or
model_type, custom code without trust_remote_code, weights of another shape, a hub id with no hub).

The release's venv is the one ``scripts/setup-vllm.sh`` builds (vLLM's CPU wheel is not a plain
``pip install vllm``): link it as the harness's venv and stamp it once,

    ln -sfn ~/.cache/qwen-triage/vllm-venv ~/.cache/qwen-triage/genuine/vllm-0.32.0

(run.py writes ``.genuine-stamp`` only after its own pip install; without the stamp it would try to rebuild,
and refuses to remove a link). The stamp is the release's own, written with the harness's function:

    cd scripts/genuine && python3 -c "import run; p = run.load_programs(['vllm'])[0]; r = p.releases[0];
    (run.venv_dir(p, r) / run.STAMP).write_text(run.stamp_of(r))"

The tiny Qwen2 model is written inside each case by ``make_tiny_qwen.py`` with the venv's own python.
"""

from pathlib import Path

from case import Case, Program, Release

MAKE_TINY = (Path(__file__).resolve().parents[2] / "make_tiny_qwen.py").read_text()
SERVE = "{bin}/vllm serve %s --host 127.0.0.1 --port {port} --max-model-len 256 --enforce-eager --kv-cache-memory-bytes 64M"
BUILD = "{python} make_tiny_qwen.py {work}/tiny >/dev/null 2>&1 && {python} damage.py && exec "
ENV = {"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}


def _files(damage: str = "") -> dict[str, str]:
    """The tiny model's builder and the case's damage script (run before the server starts)."""
    return {"make_tiny_qwen.py": MAKE_TINY,
            "damage.py": "import json, os, pathlib\nM = pathlib.Path('{work}/tiny')\n" + damage + "\n"}


def _case(id: str, expect: list[str], note: str, *, extra: str = "", damage: str = "", model: str = "{work}/tiny",
          env: dict | None = None, build: bool = True, timeout: float = 240, also: list[str] | None = None) -> Case:
    files = _files(damage)
    cmd = (BUILD if build else "exec ") + SERVE % model + (" " + extra if extra else "")
    return Case(id=id, expect=expect, argv=["bash", "-c", cmd], files=files if build else {},
                env={**ENV, **(env or {})}, input="vllm-serve", note=note, timeout=timeout, also=list(also or []))


def _config_edit(**changes) -> str:
    return ("c = json.loads((M / 'config.json').read_text())\n"
            + "".join(f"c[{k!r}] = {v!r}\n" for k, v in changes.items())
            + "(M / 'config.json').write_text(json.dumps(c))")


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
]

PROGRAM = Program(
    name="vllm",
    releases=[Release(label="0.32.0", requirements=["vllm==0.32.0+cpu (scripts/setup-vllm.sh)"])],
    cases=CASES,
)
