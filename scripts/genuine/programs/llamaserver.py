"""llama.cpp's own binaries (llama-server, llama-cli, llama-completion, llama-gguf-split, llama-quantize) driven into
real failures: launch flags a current build refuses or removed, model / adapter / projector files missing or
damaged, split GGUFs with a part gone, quantization a file or type does not allow, chat templates that do not parse,
requests the server refuses, a KV cache larger than the host's memory, -hf downloads without a network; and healthy
runs with their scary warnings. (``programs/llamacpp.py`` drives the same library through llama-cpp-python.)

Three releases. The two older are the llama-servers of most reports of 2024 and 2025: the trees llama-cpp-python
0.2.90's and 0.3.9's sdists vendor (1d1ccce, August 2024; ggerganov/llama.cpp@8733e0c, May 2025), built the same way
without libcurl (OLDEST_* / OLD_* below; the scenarios they have no flag or binary for run on the newer only). The
newest release is llama.cpp b11312 (ggml-org/llama.cpp@0c1e57098), the tree that the llama-cpp-python 0.3.36 sdist vendors
(its CHANGELOG: "update llama.cpp to ggml-org/llama.cpp@0c1e57098"; that commit is build 11312). The harness builds it
as the release's ``after`` step (BUILD below), in the release's venv ``~/.cache/qwen-triage/genuine/llamaserver-b11312/``
(which also holds gguf-py, used by each case to write its tiny GGUF); by hand that is::

    pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36      # the sdist, from the package index
    tar xzf llama_cpp_python-0.3.36.tar.gz
    cmake -S llama_cpp_python-0.3.36/vendor/llama.cpp -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \\
        -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \\
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_NUMBER=11312 -DLLAMA_BUILD_COMMIT=0c1e57098
    cmake --build build -j2 --target llama-server llama-cli llama-completion llama-gguf-split llama-quantize

(a CPU build with OpenMP and OpenSSL, static; the web UI is neither built with npm nor fetched from the hub, so the
server embeds none; the sdist has no .git, hence the build number and commit given by hand, which the binaries print
in ``--version`` and the quantize banner). About 20 minutes on two shared cores; ~530 MB. The binaries are linked into
the venv's bin, so the logs show them as ``/venv/bin/llama-*``.

Each case writes a tiny random llama GGUF (1 block, width 64, a 264-token SPM vocabulary, trained context 128) with
gguf-py's GGUFWriter, and damages it or adds adapters / splits as the scenario needs. Default verbosity throughout (what
users paste): the server prints its E/W lines and a few I lines, not the loader's metadata dump.
"""

from case import Case, Program, Release, per_release

SDIST = "0.3.36"        # the llama-cpp-python release whose sdist vendors the tree
BUILD_NUMBER = "11312"  # its llama.cpp: ggml-org/llama.cpp@0c1e57098 (b11312)
BUILD_COMMIT = "0c1e57098"
TARGETS = ["llama-server", "llama-cli", "llama-completion", "llama-gguf-split", "llama-quantize"]
CMAKE_ARGS = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF", "-DLLAMA_BUILD_TESTS=OFF",
              "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_BUILD_UI=OFF",
              "-DLLAMA_USE_PREBUILT_UI=OFF", f"-DLLAMA_BUILD_NUMBER={BUILD_NUMBER}",
              f"-DLLAMA_BUILD_COMMIT={BUILD_COMMIT}"]

# run once in the release's venv (an ``after`` step): fetch the sdist with pip, build the binaries with cmake, link
# them into the venv's bin; a rerun after a failure resumes the cmake build where it stopped
BUILD = """\
import pathlib, shutil, subprocess, sys, tarfile
venv, sdist, targets, args = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
src = venv / "src"
tree = src / f"llama_cpp_python-{sdist}" / "vendor" / "llama.cpp"
if not tree.is_dir():
    src.mkdir(exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--progress-bar",
                    "off", "-d", str(src), f"llama-cpp-python=={sdist}"], check=True)
    with tarfile.open(src / f"llama_cpp_python-{sdist}.tar.gz") as tar:
        tar.extractall(src)
build = venv / "llama.cpp-build"
subprocess.run(["cmake", "-S", str(tree), "-B", str(build), *args], check=True)
subprocess.run(["cmake", "--build", str(build), "-j2", "--target", *targets], check=True)
for t in targets:
    link = venv / "bin" / t
    link.unlink(missing_ok=True)
    link.symlink_to(build / "bin" / t)
"""

# the tiny model: TINY_ARCH (an architecture name), TINY_E (width; 256 where a k-/i-quant needs whole 256 blocks),
# TINY_TEMPLATE (tokenizer.chat_template), TINY_SPLIT (tensors per file: a gguf-split layout tiny-0000N-of-0000M.gguf)
WRITE = """\
import os
import numpy as np
import gguf
E = int(os.environ.get("TINY_E", "64"))
F = 2 * E
split = int(os.environ.get("TINY_SPLIT", "0"))
w = gguf.GGUFWriter("tiny.gguf", os.environ.get("TINY_ARCH", "llama"), **({"split_max_tensors": split} if split else {}))
w.add_name("tiny-llama")
w.add_context_length(128)
w.add_embedding_length(E)
w.add_block_count(1)
w.add_feed_forward_length(F)
w.add_head_count(4)
w.add_head_count_kv(4)
w.add_layer_norm_rms_eps(1e-5)
w.add_file_type(0)
w.add_tokenizer_model("llama")
toks = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)] + ["a", "b", "c", "d", "e"]
w.add_token_list(toks)
w.add_token_scores([0.0] * len(toks))
w.add_token_types([2, 3, 3] + [6] * 256 + [1] * 5)
w.add_bos_token_id(1)
w.add_eos_token_id(2)
if os.environ.get("TINY_TEMPLATE"):
    w.add_chat_template(os.environ["TINY_TEMPLATE"])
rng = np.random.default_rng(0)
V = len(toks)
def t(name, *shape):
    w.add_tensor(name, rng.standard_normal(shape, dtype=np.float32) * 0.02)
t("token_embd.weight", V, E)
w.add_tensor("output_norm.weight", np.ones(E, dtype=np.float32))
t("output.weight", V, E)
w.add_tensor("blk.0.attn_norm.weight", np.ones(E, dtype=np.float32))
w.add_tensor("blk.0.ffn_norm.weight", np.ones(E, dtype=np.float32))
for n in ("attn_q", "attn_k", "attn_v", "attn_output"):
    t(f"blk.0.{n}.weight", E, E)
t("blk.0.ffn_gate.weight", F, E)
t("blk.0.ffn_up.weight", F, E)
t("blk.0.ffn_down.weight", E, F)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
"""

# a LoRA adapter for the tiny model as convert_lora_to_gguf.py writes it (general.type adapter, adapter.type lora,
# A/B pairs for attn_q / attn_v); LORA_ARCH: the architecture it was converted for; LORA_CUT: keep only that many bytes
LORA = """\
import os
import numpy as np
import gguf
E, R = 64, 4
w = gguf.GGUFWriter("lora.gguf", os.environ.get("LORA_ARCH", "llama"))
w.add_type("adapter")
w.add_string("adapter.type", "lora")
w.add_float32("adapter.lora.alpha", 8.0)
rng = np.random.default_rng(1)
for n in ("attn_q", "attn_v"):
    w.add_tensor(f"blk.0.{n}.weight.lora_a", rng.standard_normal((R, E), dtype=np.float32) * 0.01)
    w.add_tensor(f"blk.0.{n}.weight.lora_b", rng.standard_normal((E, R), dtype=np.float32) * 0.01)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
if os.environ.get("LORA_CUT"):
    raw = open("lora.gguf", "rb").read()
    open("lora.gguf", "wb").write(raw[: int(os.environ["LORA_CUT"])])
"""

WRITE_CMD = "{python} write.py && "
SERVE = "{bin}/llama-server -m tiny.gguf --host 127.0.0.1 --port {port} -t 1"
SERVER_ENV = {"HF_ENDPOINT": "http://127.0.0.1:9"}  # no -hf case may reach the real hub


def _run(id: str, expect: list[str], note: str, cmd: str, *, pre: str = "", env: dict | None = None,
         files: dict | None = None, exit: str = "fail", timeout: float = 120) -> Case:
    """Write the tiny model (and whatever ``pre`` prepares), then exec ``cmd`` in the case's work dir."""
    return Case(id=id, expect=expect, argv=["bash", "-c", WRITE_CMD + pre + "exec " + cmd],
                files={"write.py": WRITE, "lora.py": LORA, **(files or {})}, env={**SERVER_ENV, **(env or {})},
                input="llama-cpp", note=note, exit=exit, timeout=timeout)


def _served(id: str, expect: list[str], note: str, flags: str, request: str, *, env: dict | None = None,
            exit: str = "fail", timeout: float = 120) -> Case:
    """A server that comes up, answers ``request`` (its body printed), and is stopped by SIGINT (Ctrl-C); the case
    exits with the request's status (curl --fail-with-body: non-zero on an HTTP error)."""
    return Case(id=id, expect=expect, input="llama-cpp", note=note, exit=exit, timeout=timeout,
                files={"write.py": WRITE}, env={**SERVER_ENV, **(env or {})},
                argv=["bash", "-c", WRITE_CMD + "{ " + SERVE + " " + flags + " & } ; SRV=$!; "
                      "for i in $(seq 120); do curl -sf http://127.0.0.1:{port}/health >/dev/null && break; "
                      "kill -0 $SRV 2>/dev/null || break; sleep 0.5; done; " + request
                      + "; rc=$?; echo; kill -INT $SRV; wait $SRV; exit $rc"])


def _post(path: str, body: str, headers: str = "") -> str:
    return ("curl -sS --fail-with-body http://127.0.0.1:{port}" + path + " -H 'Content-Type: application/json' "
            + headers + "-d '" + body + "'")


LONG = "a b c d e " * 10
TEMPLATE_OK = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"
               "{% if add_generation_prompt %}<|assistant|>{% endif %}")
TEMPLATE_BROKEN = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }{% endfor %}"  # `}` for `}}`

CASES = [
    # --- healthy runs and their warnings -----------------------------------------------------------------------------
    _served("server-completion-healthy", [], "healthy: llama-server loads the tiny model (warnings: no API key and CORS"
            " open, n_ctx_seq > n_ctx_train, the slot context capped to the training context), answers /completion,"
            " stops on SIGINT: https://github.com/ggml-org/llama.cpp/pull/22145",
            "-c 256", _post("/completion", '{"prompt": "a b", "n_predict": 4}'), exit="ok"),
    _served("server-chat-jinja-healthy", [], "healthy: --jinja with the GGUF's own chat template, one"
            " /v1/chat/completions request: https://github.com/ggml-org/llama.cpp/pull/17524",
            "-c 128 --jinja", _post("/v1/chat/completions", '{"messages": [{"role": "user", "content": "a b"}],'
                                    ' "max_tokens": 4}'),
            env={"TINY_TEMPLATE": TEMPLATE_OK}, exit="ok"),
    _served("server-api-key-healthy", [], "healthy: --api-key set; a client without the key is refused (401, the server"
            " warns 'unauthorized: Invalid API Key'), then one with it is answered:"
            " https://github.com/ggml-org/llama.cpp/issues/22232",
            "-c 128 --api-key sk-local-123",
            "curl -sS http://127.0.0.1:{port}/v1/models; echo; "
            + _post("/completion", '{"prompt": "a b", "n_predict": 4}', "-H 'Authorization: Bearer sk-local-123' ")
            + " >/dev/null", exit="ok"),
    _run("completion-ctx-over-train-healthy", [], "healthy: llama-completion with -c 512 on a model trained for 128"
         " ('model was trained on only 128 context tokens', 'possible training context overflow') generates and"
         " exits: https://github.com/ggml-org/llama.cpp/pull/10136",
         "{bin}/llama-completion -m tiny.gguf -c 512 -t 1 -no-cnv -n 8 -p 'a b c'", exit="ok"),
    _run("cli-single-turn-healthy", [], "healthy: llama-cli -st (single turn, the replacement for -no-cnv scripts)"
         " answers one prompt and exits: https://github.com/ggml-org/llama.cpp/issues/27214",
         "{bin}/llama-cli -m tiny.gguf -t 1 -c 128 -st -n 4 -p 'a b'", exit="ok"),
    _run("split-then-load-healthy", [], "healthy: llama-gguf-split --split-max-tensors 4 writes three parts, and"
         " llama-completion loads the model from the first: https://github.com/ggml-org/llama.cpp/pull/6187",
         "{bin}/llama-completion -m split/tiny-00001-of-00003.gguf -t 1 -c 128 -no-cnv -n 4 -p 'a b'",
         pre="mkdir -p split && {bin}/llama-gguf-split --split-max-tensors 4 tiny.gguf split/tiny && ", exit="ok"),
    _run("quantize-fallback-healthy", [], "healthy: llama-quantize to Q4_K_M on rows of 64 and 128 columns warns"
         " 'not divisible by 256 ... falling back to q5_0/q8_0' for each tensor and writes the file:"
         " https://github.com/ggml-org/llama.cpp/issues/6614",
         "{bin}/llama-quantize tiny.gguf tiny-Q4_K_M.gguf Q4_K_M", exit="ok"),
    # --- launch flags -----------------------------------------------------------------------------------------------
    _run("server-removed-draft-max", ["config.bad_argument"], "--draft-max from an older speculative-decoding guide:"
         " this build removed it ('use --spec-draft-n-max or --spec-ngram-mod-n-max'):"
         " https://github.com/Mesh-LLM/mesh-llm/issues/571",
         SERVE + " -c 128 -md draft.gguf --draft-max 8"),
    _run("cli-no-cnv-removed", ["config.bad_argument"], "llama-cli -no-cnv from a script written for the old llama-cli"
         " (now llama-completion): 'error: invalid argument: -no-cnv': https://github.com/PrismML-Eng/llama.cpp/issues/84",
         "{bin}/llama-cli -m tiny.gguf -t 1 -no-cnv -n 16 -p 'a b'"),
    _run("server-split-mode-tensor-cpu", ["config.bad_argument"], "--split-mode tensor (tensor parallelism across"
         " GPUs) on a CPU-only build: the loader needs at least one GPU device:"
         " https://github.com/ggml-org/llama.cpp/pull/22729",
         SERVE + " -c 128 --split-mode tensor"),
    _run("server-device-not-present", ["config.bad_argument"], "--device CUDA0 copied from a GPU host to a CPU-only"
         " build: 'invalid device: CUDA0' (--list-devices shows what the build has):"
         " https://github.com/ggml-org/llama.cpp/issues/16659",
         SERVE + " -c 128 --device CUDA0"),
    _run("server-v-cache-quant-no-fa", ["config.bad_argument"], "--cache-type-v q4_0 with --flash-attn off: a quantized"
         " V cache needs flash attention, the context is not created: https://github.com/ggml-org/llama.cpp/issues/10378",
         SERVE + " -c 128 --cache-type-k q4_0 --cache-type-v q4_0 -fa off"),
    # --- files the launch names ------------------------------------------------------------------------------------------
    _run("server-mmproj-missing", ["model.file_missing"], "--mmproj names a projector file that was never downloaded:"
         " https://github.com/ggml-org/llama.cpp/issues/23002",
         SERVE + " -c 128 --mmproj mmproj-model-f16.gguf"),
    _run("server-lora-missing", ["model.file_missing"], "--lora names an adapter path that does not exist:"
         " https://github.com/mozilla-ai/llamafile/issues/697",
         SERVE + " -c 128 --lora adapters/sql-lora.gguf"),
    _run("server-lora-other-arch", ["model.weights_mismatch"], "--lora with an adapter converted for another"
         " architecture (qwen2) than the base model (llama): 'model arch and LoRA arch mismatch':"
         " https://github.com/ggml-org/llama.cpp/issues/9114",
         SERVE + " -c 128 --lora lora.gguf", pre="{python} lora.py && ", env={"LORA_ARCH": "qwen2"}),
    _run("server-lora-truncated", ["model.gguf_corrupt"], "--lora with an adapter file cut short (an interrupted"
         " download): the adapter's tensor data is not within the file bounds:"
         " https://github.com/ggml-org/llama.cpp/pull/27056",
         SERVE + " -c 128 --lora lora.gguf", pre="{python} lora.py && ", env={"LORA_CUT": "900"}),
    _run("server-split-part-missing", ["model.shard_missing"], "a three-part split GGUF whose second part never"
         " arrived, served from its first part: https://github.com/ggml-org/llama.cpp/issues/15164",
         SERVE.replace("tiny.gguf", "tiny-00001-of-00003.gguf") + " -c 128",
         pre="rm tiny-00002-of-00003.gguf && ", env={"TINY_SPLIT": "4"}),
    _run("gguf-split-merge-part-missing", ["model.shard_missing"], "llama-gguf-split --merge of a split model whose"
         " second part is missing: https://github.com/ggml-org/llama.cpp/issues/8264",
         "{bin}/llama-gguf-split --merge tiny-00001-of-00003.gguf tiny-merged.gguf",
         pre="rm tiny-00002-of-00003.gguf && ", env={"TINY_SPLIT": "4"}),
    _run("server-models-dir-missing", ["model.file_missing"], "router mode (no -m) with --models-dir naming a"
         " directory that does not exist on this host: https://github.com/ggml-org/llama.cpp/issues/18037",
         "{bin}/llama-server --models-dir /srv/models --host 127.0.0.1 --port {port} -t 1"),
    # --- quantization ------------------------------------------------------------------------------------------------
    _run("quantize-invalid-ftype", ["config.bad_argument"], "llama-quantize with a type name it does not have (Q4_K_XL,"
         " an unsloth dynamic-quant label): https://github.com/ggml-org/llama.cpp/pull/15071",
         "{bin}/llama-quantize tiny.gguf tiny-q.gguf Q4_K_XL"),
    _run("quantize-needs-imatrix", ["config.bad_argument"], "IQ2_XXS without --imatrix: 'this quantization requires an"
         " importance matrix!': https://github.com/ggml-org/llama.cpp/pull/4897",
         "{bin}/llama-quantize tiny.gguf tiny-IQ2_XXS.gguf IQ2_XXS", env={"TINY_E": "256"}),
    _run("quantize-requantize-disabled", ["config.bad_argument"], "quantizing a Q8_0 file to Q4_K_M without"
         " --allow-requantize: 'requantizing from type q8_0 is disabled':"
         " https://github.com/ggml-org/llama.cpp/issues/8603",
         "{bin}/llama-quantize tiny-Q8_0.gguf tiny-Q4_K_M.gguf Q4_K_M",
         pre="{bin}/llama-quantize tiny.gguf tiny-Q8_0.gguf Q8_0 >/dev/null 2>&1 && "),
    _run("quantize-unknown-arch", ["model.gguf_unsupported"], "llama-quantize on a GGUF whose general.architecture"
         " this build does not know: https://github.com/ggml-org/llama.cpp/issues/12818",
         "{bin}/llama-quantize tiny.gguf tiny-Q8_0.gguf Q8_0", env={"TINY_ARCH": "qwen9moe"}),
    # --- chat templates ------------------------------------------------------------------------------------------------
    _run("server-gguf-template-broken", ["config.bad_argument"], "the GGUF's own tokenizer.chat_template does not parse"
         " (a `}` for `}}`); the server refuses to start: https://github.com/ggml-org/llama.cpp/issues/20305",
         SERVE + " -c 128", env={"TINY_TEMPLATE": TEMPLATE_BROKEN}),
    _run("server-chat-template-file-broken", ["config.bad_argument"], "--chat-template-file with a Jinja template that"
         " does not parse: https://github.com/speakleash/bielik-tools/issues/5",
         SERVE + " -c 128 --jinja --chat-template-file chat.jinja", files={"chat.jinja": TEMPLATE_BROKEN + "\n"}),
    # --- requests the server refuses ------------------------------------------------------------------------------
    _served("server-embeddings-not-enabled", ["config.bad_argument"], "a client asks /v1/embeddings of a server"
            " started without --embeddings (HTTP 501): https://github.com/unslothai/unsloth/issues/8535",
            "-c 128", _post("/v1/embeddings", '{"input": "a b c"}')),
    _served("server-embedding-input-exceeds-ubatch", ["config.bad_argument"], "an embedding input longer than the"
            " physical batch (-ub 16): HTTP 500 'increase the physical batch size':"
            " https://github.com/ggml-org/llama.cpp/issues/12295",
            "-c 128 --embeddings --pooling mean -b 16 -ub 16", _post("/v1/embeddings", '{"input": "' + LONG + '"}')),
    _run("completion-prompt-too-long", ["memory.kv_cache_insufficient"], "llama-completion with a prompt longer than"
         " its context: 'prompt is too long': https://github.com/ggml-org/ggml/issues/536",
         "{bin}/llama-completion -m tiny.gguf -t 1 -c 128 -no-cnv -n 4 -p '" + LONG * 4 + "'"),
    # --- memory --------------------------------------------------------------------------------------------------
    _run("server-kv-cache-exceeds-ram", ["memory.kv_cache_insufficient"], "-c 16000000: the ~4 GB KV cache does not fit"
         " the 3 GB of address space the host leaves (ulimit -v): https://github.com/ggml-org/llama.cpp/issues/8101",
         SERVE + " -c 16000000", pre="ulimit -v 3000000 && "),
    # --- -hf downloads ----------------------------------------------------------------------------------------------
    _run("server-hf-no-network", ["download.incomplete"], "llama-server -hf on a host that cannot reach the hub"
         " (HF_ENDPOINT a closed port): the repo is not resolved and no model is loaded:"
         " https://github.com/ggml-org/llama.vscode/issues/23",
         "{bin}/llama-server -hf ggml-org/gemma-3-1b-it-GGUF:Q4_K_M --host 127.0.0.1 --port {port} -t 1 -c 128"),
    _run("server-hf-offline-not-cached", ["download.incomplete"], "llama-server -hf --offline for a model that was"
         " never downloaded into the cache: https://github.com/ggml-org/llama.cpp/issues/13128",
         "{bin}/llama-server -hf ggml-org/gemma-3-1b-it-GGUF --offline --host 127.0.0.1 --port {port} -t 1 -c 128"),
    # --- round 2 (issue 26): launch flags, bind errors, request-time refusals, more healthy warnings ------------------
    _run("server-port-in-use", ["server.port_in_use"], "a second llama-server started on a port another process already"
         " listens on: https://github.com/ggml-org/llama.cpp/issues/9186",
         SERVE + " -c 128",
         pre="{python} -c 'import socket, time; s = socket.socket(); s.bind((\"127.0.0.1\", {port})); s.listen();"
             " time.sleep(90)' & sleep 2 && "),
    _run("server-model-path-missing", ["model.file_missing"], "-m names a GGUF path that does not exist (a typo in"
         " the quant suffix): https://github.com/ggml-org/llama.cpp/issues/9521",
         "{bin}/llama-server -m models/tiny-Q4_K_M.gguf --host 127.0.0.1 --port {port} -t 1 -c 128"),
    _run("server-flash-attn-bare-flag", ["config.bad_argument"], "-fa as a bare switch from an older guide: this build"
         " wants on|off|auto and takes the next argument as its value: https://github.com/ggml-org/llama.cpp/issues/15650",
         SERVE + " -fa -c 128"),
    _run("server-unknown-argument", ["config.bad_argument"], "--context-length (a vLLM-style flag) for --ctx-size:"
         " 'invalid argument': https://github.com/ggml-org/llama.cpp/issues/11983",
         SERVE + " --context-length 128"),
    _run("server-cache-type-unsupported", ["config.bad_argument"], "--cache-type-k q3_K, a type the KV cache does not"
         " allow: https://github.com/ggml-org/llama.cpp/issues/11200",
         SERVE + " -c 128 --cache-type-k q3_K"),
    _run("server-numa-invalid", ["config.bad_argument"], "--numa with a value it does not take (on):"
         " https://github.com/ggml-org/llama.cpp/issues/1437",
         SERVE + " -c 128 --numa on"),
    _run("server-rope-scaling-invalid", ["config.bad_argument"], "--rope-scaling dynamic (an HF rope_scaling type) for"
         " none|linear|yarn: https://github.com/ggml-org/llama.cpp/issues/4041",
         SERVE + " -c 128 --rope-scaling dynamic"),
    _run("server-grammar-file-missing", ["config.bad_argument"], "--grammar-file names a GBNF file that is not there:"
         " https://github.com/ggml-org/llama.cpp/issues/7703",
         SERVE + " -c 128 --grammar-file grammars/json.gbnf"),
    _run("server-mmproj-not-projector", ["model.gguf_unsupported"], "--mmproj given the language model's own GGUF"
         " instead of the mmproj file (the CLIP loader cannot use it; at default verbosity no reason is printed): https://github.com/ggml-org/llama.cpp/issues/13282",
         SERVE + " -c 128 --mmproj tiny.gguf"),
    _served("server-ngl-cpu-build", ["runtime.no_gpu_visible"], "-ngl 99 on a CPU-only build: 'no usable GPU found,"
            " --gpu-layers option will be ignored', the layers stay on the CPU and /completion is answered (the server"
            " works, but not on the GPU asked for; labelled as shared/corpus-4 llamacpp-ngl-on-cpu-build is): https://github.com/ggml-org/llama.cpp/issues/12046",
            "-c 128 -ngl 99", _post("/completion", '{"prompt": "a b", "n_predict": 4}'), exit="ok"),
    _served("server-parallel-slots-healthy", [], "healthy: -np 4 -c 512 (128 tokens per slot) answers /completion:"
            " https://github.com/ggml-org/llama.cpp/discussions/4130",
            "-c 512 -np 4", _post("/completion", '{"prompt": "a b", "n_predict": 4}'), exit="ok"),
    _served("server-request-exceeds-context", ["memory.kv_cache_insufficient"], "a request whose prompt is longer"
            " than the slot context (-c 128, healthy server): HTTP 400 'exceeds the available context size':"
            " https://github.com/ggml-org/llama.cpp/issues/12136",
            "-c 128", _post("/completion", '{"prompt": "' + LONG * 4 + '", "n_predict": 4}')),
    _served("server-embeddings-pooling-none", ["config.bad_argument"], "/v1/embeddings on a server started with"
            " --embeddings --pooling none: 'Pooling type none is not OAI compatible':"
            " https://github.com/ggml-org/llama.cpp/issues/11847",
            "-c 128 --embeddings --pooling none", _post("/v1/embeddings", '{"input": "a b c"}')),
    _served("server-grammar-invalid-request", ["config.bad_argument"], "a /completion request with a GBNF grammar"
            " that does not parse: https://github.com/ggml-org/llama.cpp/issues/10321",
            "-c 128", _post("/completion", '{"prompt": "a b", "n_predict": 4, "grammar": "root ::= (\\"a\\""}')),
    _served("server-template-no-system-role-healthy", [], "healthy: --jinja with a chat template that raises on a system"
            " message (Gemma-style 'System role not supported'); the server folds the system message into the user turn and"
            " answers: https://github.com/ggml-org/llama.cpp/issues/13165",
            "-c 128 --jinja", _post("/v1/chat/completions", '{"messages": [{"role": "system", "content": "a"},'
                                    ' {"role": "user", "content": "a b"}], "max_tokens": 4}'),
            env={"TINY_TEMPLATE": "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception("
                 "'System role not supported') }}{% endif %}{{ m['content'] }}{% endfor %}"}, exit="ok"),
    _run("server-slot-save-dir-missing", ["config.bad_argument"], "--slot-save-path names a directory that does not"
         " exist on this host: https://github.com/ggml-org/llama.cpp/issues/7779",
         SERVE + " -c 128 --slot-save-path /srv/slots"),
    _run("server-split-mode-invalid", ["config.bad_argument"], "--split-mode rows (for row) in a multi-GPU launch:"
         " https://github.com/ggml-org/llama.cpp/issues/9946",
         SERVE + " -c 128 --split-mode rows"),
    _run("server-safetensors-given", ["model.format_mismatch"], "-m given the HF model.safetensors instead of a"
         " converted GGUF: https://github.com/ggml-org/llama.cpp/discussions/2948",
         "{bin}/llama-server -m model.safetensors --host 127.0.0.1 --port {port} -t 1 -c 128",
         pre="{python} -c 'import json, struct; h = json.dumps({\"w\": {\"dtype\": \"F32\", \"shape\": [2],"
             " \"data_offsets\": [0, 8]}}).encode(); open(\"model.safetensors\", \"wb\").write(struct.pack(\"<Q\","
             " len(h)) + h + bytes(8))' && "),
]

NEWEST = f"b{BUILD_NUMBER}"

# The older release: the tree llama-cpp-python 0.3.9's sdist vendors (its CHANGELOG: "Update llama.cpp to
# ggerganov/llama.cpp@8733e0cf6eefc7c7752297cc22d0836706f4222c", 2025-05-08), the llama-server of most reports of
# 2025. That sdist keeps the submodule's one-commit git link, so the binaries print ``version: 1 (8733e0c)``, as any
# build from it does; the label is that commit. It has no llama-completion (llama-cli still took -no-cnv then), and
# downloads through libcurl, which this machine has no headers for: built without it, as LLAMA_CURL=OFF builds are.
OLD_SDIST = "0.3.9"
OLD_COMMIT = "8733e0c"
OLD_TARGETS = [t for t in TARGETS if t != "llama-completion"]
OLD_CMAKE_ARGS = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                  "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_CURL=OFF"]

# The oldest release: llama-cpp-python 0.2.90's tree (August 2024; its git link says 1d1ccce), the llama-server whose
# log lines read `INFO [ main] ... | key="value"` and ` ERR [ load_model] ...`: the reports of 2024. Built like the one
# above (LLAMA_CURL was off by default then), except that its server and tools were still examples/: built with them.
OLDEST_SDIST = "0.2.90"
OLDEST_COMMIT = "1d1ccce"
OLDEST_CMAKE_ARGS = [a.replace("EXAMPLES=OFF", "EXAMPLES=ON") for a in OLD_CMAKE_ARGS]

# What the older releases cannot be driven into: llama-completion and the flags they do not have yet (--mmproj in the
# server, --models-dir, --offline), and what they still took and served (-no-cnv in llama-cli, a request longer than
# the context, which they shifted; a chat template they could not parse, which they replaced with chatml; a bare -fa;
# a missing --slot-save-path, checked only when a slot is saved)
NEWEST_ONLY = {
    "completion-ctx-over-train-healthy", "split-then-load-healthy", "completion-prompt-too-long", "cli-no-cnv-removed",
    "server-mmproj-missing", "server-mmproj-not-projector", "server-models-dir-missing", "server-hf-offline-not-cached",
    "server-gguf-template-broken", "server-chat-template-file-broken", "server-flash-attn-bare-flag",
    "server-slot-save-dir-missing", "server-request-exceeds-context",
}
# The oldest runs only the scenarios that end by themselves: its server does not stop on the SIGINT a served case ends
# with while it still serves (it waits for a second one), so every served case would time out; and llama-cli had no
# -st then.
NOT_OLDEST = {c.id for c in CASES if "kill -INT $SRV" in c.argv[-1]} | {"cli-single-turn-healthy"}
# What the older releases fail at for another reason: May 2025 still had --draft-max, so the missing draft model is
# what stops it, and August 2024 had no --draft-max yet (refused as an unknown argument, as on b11312); built without
# libcurl, both refuse -hf before any connection
OLDER_EXPECT = {
    "server-removed-draft-max": {OLDEST_COMMIT: ["config.bad_argument"], OLD_COMMIT: ["model.file_missing"]},
    "server-hf-no-network": {OLDEST_COMMIT: ["config.bad_argument"], OLD_COMMIT: ["config.bad_argument"]},
}
CASES = per_release(CASES, releases={**{i: (OLD_COMMIT, NEWEST) for i in NOT_OLDEST},
                                     **{i: (NEWEST,) for i in NEWEST_ONLY}}, expect_by=OLDER_EXPECT)


def _release(label: str, sdist: str, targets: list[str], args: list[str]) -> Release:
    return Release(label=label, requirements=["gguf==0.19.0", "numpy"],
                   after=[["{python}", "-c", BUILD, "{venv}", sdist, " ".join(targets), " ".join(args)]])


PROGRAM = Program(
    name="llamaserver",
    dist="llama.cpp",  # not a pip distribution: `program: llama.cpp b11312`
    releases=[
        _release(OLDEST_COMMIT, OLDEST_SDIST, OLD_TARGETS, OLDEST_CMAKE_ARGS),
        _release(OLD_COMMIT, OLD_SDIST, OLD_TARGETS, OLD_CMAKE_ARGS),
        _release(NEWEST, SDIST, TARGETS, CMAKE_ARGS),
    ],
    cases=CASES,
)
