"""llama.cpp's own GGUF loader (through llama-cpp-python, which compiles it) on damaged and unsupported files:
bad magic, an HTML page saved as .gguf, a file cut inside its metadata or its tensor data, a GGUF version from the
future, an unknown architecture, a tensor of an unknown ggml type, a model missing tensors, a path that does not
exist. The files are written by gguf-py's ``GGUFWriter`` inside the case and damaged afterwards; the loader's
messages (``gguf_init_from_file_impl: ...``, ``llama_model_load: error loading model: ...``) are llama.cpp's.

Building the venv compiles llama.cpp with CMAKE_ARGS below (a minimal CPU build: ~45 min on one of two busy
cores); pip keeps the built wheel in its cache, so a rebuilt venv of the same pin reuses it.
"""

import gguf_damage as damage
from case import Case, Program, Release, per_release

# a minimal CPU build of llama.cpp: no native tuning, OpenMP, curl, tests, examples, tools or server
CMAKE_ARGS = ("-DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DGGML_BLAS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF"
              " -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAVA_BUILD=OFF"
              " -DLLAMA_BUILD_MTMD=OFF")

WRITE = """\
import os, struct, sys
import numpy as np
import gguf
ARCH = os.environ.get("TINY_ARCH", "llama")
w = gguf.GGUFWriter("tiny.gguf", ARCH)
w.add_name("tiny-llama")
w.add_context_length(128)
w.add_embedding_length(int(os.environ.get("TINY_E_META", "64")))
w.add_block_count(1)
w.add_feed_forward_length(128)
w.add_head_count(4)
w.add_head_count_kv(4)
w.add_layer_norm_rms_eps(1e-5)
w.add_file_type(0)
w.add_tokenizer_model(os.environ.get("TINY_TOKENIZER", "llama"))
if os.environ.get("TINY_PRE"):
    w.add_tokenizer_pre(os.environ["TINY_PRE"])
toks = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)] + ["a", "b", "c", "d", "e"]
if not os.environ.get("TINY_NO_VOCAB"):
    w.add_token_list(toks)
    w.add_token_scores([0.0] * len(toks))
    w.add_token_types([2, 3, 3] + [6] * 256 + [1] * 5)
    if os.environ.get("TINY_TOKENIZER") == "gpt2":
        w.add_token_merges(["a b"])
w.add_bos_token_id(1)
w.add_eos_token_id(2)
rng = np.random.default_rng(0)
V, E, F = len(toks), 64, 128
def t(name, *shape):
    w.add_tensor(name, rng.standard_normal(shape, dtype=np.float32) * 0.02)
t("token_embd.weight", V, E)
w.add_tensor("output_norm.weight", np.ones(E, dtype=np.float32))
t("output.weight", V, E)
if not os.environ.get("TINY_NO_BLOCKS"):
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
raw = open("tiny.gguf", "rb").read()
"""

LOAD = """\
import os
from llama_cpp import Llama
llm = Llama(model_path="%s", n_ctx=int(os.environ.get("N_CTX", "64")), n_threads=1, verbose=True)
prompt = os.environ.get("PROMPT", "a b")
if os.environ.get("CHAT"):
    out = llm.create_chat_completion([{"role": "user", "content": prompt}], max_tokens=4)
    print(out["choices"][0]["message"]["content"])
else:
    print(llm(prompt, max_tokens=4)["choices"][0]["text"])
"""


def _case(id: str, expect: list[str], damage: str, note: str, exit: str = "fail", env: dict | None = None,
          path: str = "tiny.gguf") -> Case:
    return Case(
        id=id,
        expect=expect,
        argv=["bash", "-c", "{python} write.py && exec {python} load.py"],
        files={"write.py": WRITE + damage + "\n", "load.py": LOAD % path},
        env=env or {},
        input="llama-cpp",
        note=note,
        exit=exit,
        timeout=120,
    )


CASES = [
    _case("load-ok-healthy", [], "", "healthy: a tiny random llama GGUF loads and generates a few tokens", exit="ok"),
    _case("bad-magic", ["model.gguf_corrupt"], damage.BAD_MAGIC,
          "the first four bytes are not GGUF"),
    _case("html-instead-of-gguf", ["model.gguf_corrupt"],
          damage.HTML_PAGE,
          "an HTML error page saved under the .gguf name (a failed download)"),
    _case("truncated-data", ["model.gguf_corrupt"], damage.truncated("len(raw) - 20000"),
          "the file stops inside its tensor data (an interrupted download)"),
    _case("truncated-kv", ["model.gguf_corrupt"], damage.truncated("300"),
          "the file stops inside its key-value metadata"),
    _case("future-version", ["model.gguf_unsupported"],
          damage.FUTURE_VERSION,
          "a GGUF version this llama.cpp does not know (9)"),
    _case("unknown-architecture", ["model.gguf_unsupported"], "", "general.architecture names an architecture"
          " this llama.cpp does not have", env={"TINY_ARCH": "qwen9moe"}),
    _case("unknown-ggml-type", ["model.gguf_unsupported"],
          damage.UNKNOWN_GGML_TYPE,
          "a tensor whose ggml type (251) no release defines"),
    _case("missing-tensors", ["model.gguf_unsupported"], "",
          "the file lacks tensors this loader needs for its architecture (a conversion made for another llama.cpp)",
          env={"TINY_NO_BLOCKS": "1"}),
    _case("path-missing", ["model.file_missing"], "", "the model path does not exist", path="models/tiny-q4.gguf"),
    # --- more of what users hit (issue 26) --------------------------------------------------------------
    _case("context-above-train-healthy", [], "",
          "healthy: n_ctx 512 on a model trained with 128 (llama.cpp warns of a possible context overflow)",
          exit="ok", env={"N_CTX": "512"}),
    _case("chat-completion-healthy", [], "", "healthy: a chat completion (the GGUF has no chat template: the"
          " default format is used)", exit="ok", env={"CHAT": "1"}),
    _case("context-too-large-for-ram", ["memory.kv_cache_insufficient"], "",
          "n_ctx of 2^30 tokens: the KV cache needs far more host memory than the machine has",
          env={"N_CTX": str(1 << 30)}),
    _case("empty-file", ["model.gguf_corrupt"], "open('tiny.gguf', 'wb').close()",
          "a zero-byte file where the GGUF should be (a download that never started)"),
    _case("safetensors-given", ["model.format_mismatch"],
          "import json\nh = json.dumps({'w': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}}).encode()\n"
          "open('model.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + bytes(8))",
          "a safetensors checkpoint passed as the model file (another format than GGUF)", path="model.safetensors"),
    _case("unknown-tokenizer-model", ["model.gguf_unsupported"], "",
          "tokenizer.ggml.model names a tokenizer this llama.cpp does not have", env={"TINY_TOKENIZER": "tekken9"}),
    _case("unknown-pre-tokenizer", ["model.gguf_unsupported"], "",
          "tokenizer.ggml.pre names a pre-tokenizer this llama.cpp does not know (a model newer than the build)",
          env={"TINY_TOKENIZER": "gpt2", "TINY_PRE": "qwen9"}),
    _case("vocab-missing", ["model.gguf_unsupported"], "",
          "the GGUF has no tokenizer.ggml.tokens (a conversion that dropped the vocabulary)",
          env={"TINY_NO_VOCAB": "1"}),
]

# --- round 3 (genuine sweep): split models, LoRA adapters, chat formats, embeddings, mlock, GPU layers on a CPU
# build, duplicated keys / tensors in the GGUF tables ----------------------------------------------------------

# the same tiny model, written as a split GGUF (one tensor per file: tiny-0000N-of-0000M.gguf)
SPLIT = WRITE.replace('gguf.GGUFWriter("tiny.gguf", ARCH)', 'gguf.GGUFWriter("tiny.gguf", ARCH, split_max_tensors=4)').replace(
    'raw = open("tiny.gguf", "rb").read()\n', '')

# a LoRA adapter for the tiny model, as convert_lora_to_gguf.py writes it (general.type adapter, adapter.type
# lora, A/B pairs); LORA_E sets the width it was trained for, LORA_ARCH its architecture
LORA = """\
import os
import numpy as np
import gguf
E, R = int(os.environ.get("LORA_E", "64")), 4
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
"""

# Llama() with the keyword arguments of KWARGS (a Python dict literal), then CALL on it
LOAD_KW = """\
import os
from llama_cpp import Llama
llm = Llama(model_path=os.environ.get("MODEL", "tiny.gguf"), n_ctx=64, n_threads=1, verbose=True, **%s)
%s
"""
GEN = 'print(llm(os.environ.get("PROMPT", "a b"), max_tokens=4)["choices"][0]["text"])'


def _kw(id: str, expect: list[str], note: str, kwargs: str = "{}", call: str = GEN, write: str = WRITE,
        extra: str = "", exit: str = "fail", env: dict | None = None, shell: str = "") -> Case:
    files = {"write.py": write + extra + "\n", "load.py": LOAD_KW % (kwargs, call)}
    if "lora" in kwargs:
        files["lora.py"] = LORA
    pre = "{python} lora.py && " if "lora" in kwargs else ""
    return Case(
        id=id,
        expect=expect,
        argv=["bash", "-c", shell + "{python} write.py && " + pre + "exec {python} load.py"],
        files=files,
        env=env or {},
        input="llama-cpp",
        note=note,
        exit=exit,
        timeout=120,
    )


CASES += [
    _kw("split-ok-healthy", [], "healthy: a model split into several GGUF files (gguf-split layout) loads from its"
        " first part and generates", write=SPLIT, exit="ok", env={"MODEL": "tiny-00001-of-00003.gguf"}),
    _kw("split-part-missing", ["model.shard_missing"], "a split GGUF whose second part was never downloaded:"
        " https://github.com/ggml-org/llama.cpp/issues/15164", write=SPLIT,
        extra="os.remove('tiny-00002-of-00003.gguf')", env={"MODEL": "tiny-00001-of-00003.gguf"}),
    _kw("split-not-first", ["config.bad_argument"], "the model path names the last part of a split GGUF, not the"
        " first: https://github.com/ngxson/wllama/issues/135", write=SPLIT, env={"MODEL": "tiny-00003-of-00003.gguf"}),
    _kw("lora-ok-healthy", [], "healthy: a LoRA adapter converted for this base model is applied (mmap is turned"
        " off for it)", kwargs='{"lora_path": "lora.gguf"}', exit="ok"),
    _kw("lora-path-missing", ["model.file_missing"], "lora_path names an adapter file that is not there:"
        " https://github.com/kherud/java-llama.cpp/issues/15",
        kwargs='{"lora_path": "adapters/my-lora.gguf"}'),
    _kw("lora-wrong-base", ["model.weights_mismatch"], "a LoRA adapter trained for a wider model (another base):"
        " https://github.com/ggml-org/llama.cpp/issues/9114", kwargs='{"lora_path": "lora.gguf"}',
        env={"LORA_E": "32"}),
    _kw("lora-other-architecture", ["model.weights_mismatch"], "a LoRA adapter converted for another architecture"
        " (qwen2) applied to a llama model: https://github.com/ggml-org/llama.cpp/issues/9114",
        kwargs='{"lora_path": "lora.gguf"}', env={"LORA_ARCH": "qwen2"}),
    _kw("lora-safetensors-given", ["model.format_mismatch"], "the PEFT adapter_model.safetensors passed as"
        " lora_path instead of a converted GGUF adapter: https://github.com/ollama/ollama/issues/1965", kwargs='{"lora_path": "adapter_model.safetensors"}',
        extra="import json\nh = json.dumps({'base_model.model.layers.0.self_attn.q_proj.lora_A.weight': {'dtype':"
              " 'F32', 'shape': [4, 64], 'data_offsets': [0, 1024]}}).encode()\n"
              "open('adapter_model.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + bytes(1024))"),
    _kw("lora-base-model-given", ["config.bad_argument"], "a base model GGUF passed as the LoRA adapter (general.type"
        " is not adapter): https://github.com/ggml-org/llama.cpp/issues/3953", kwargs='{"lora_path": "tiny.gguf"}'),
    _kw("chat-format-unknown", ["config.bad_argument"], "chat_format names a format this llama-cpp-python does not"
        " register: https://github.com/abetlen/llama-cpp-python/issues/1996", kwargs='{"chat_format": "llama-9"}',
        call='print(llm.create_chat_completion([{"role": "user", "content": "a b"}], max_tokens=4))'),
    _kw("embed-without-embedding", ["config.bad_argument"], "embed() on a Llama created without embedding=True:"
        " https://github.com/JamePeng/llama-cpp-python/issues/45", call='print(len(llm.embed("a b")))'),
    _kw("prompt-exceeds-context", ["memory.kv_cache_insufficient"], "a prompt longer than n_ctx (64 tokens):"
        " https://github.com/rllm-team/rllm/issues/55", env={"PROMPT": "a b c d e " * 40}),
    _kw("chat-template-generation-tags-healthy", [], "healthy: the GGUF's chat template uses HuggingFace's {%"
        " generation %} tags (SmolLM3), which 0.3.36 passes through (earlier releases raised TemplateSyntaxError):"
        " https://github.com/abetlen/llama-cpp-python/issues/2225", write=WRITE.replace(
            "w.add_bos_token_id(1)\n", "w.add_chat_template(\"{% for m in messages %}{{ m['role'] }}: {% generation %}"
            "{{ m['content'] }}{% endgeneration %}\\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}\")"
            "\nw.add_bos_token_id(1)\n"),
        call='print(llm.create_chat_completion([{"role": "user", "content": "a b"}], max_tokens=4))', exit="ok"),
    _kw("gpu-layers-on-cpu-build-healthy", [], "healthy: n_gpu_layers=-1 on a CPU-only build (everything stays on"
        " the CPU)", kwargs='{"n_gpu_layers": -1}', exit="ok"),
    _kw("mlock-limit-healthy", [], "healthy: use_mlock under `ulimit -l 0` (load_mode mmap+mlock; as root the lock is"
        " allowed, so no RLIMIT_MEMLOCK warning here): https://github.com/abetlen/llama-cpp-python/issues/618", kwargs='{"use_mlock": True}', exit="ok", shell="ulimit -l 0; "),
    _kw("duplicate-tensor-name", ["model.gguf_corrupt"], "two tensors of the GGUF carry one name (a damaged or"
        " badly merged file): https://github.com/ggml-org/llama.cpp/issues/6836", extra="open('tiny.gguf', 'wb').write(raw.replace(b'blk.0.attn_k.weight',"
        " b'blk.0.attn_q.weight'))"),
    _kw("duplicate-metadata-key", ["model.gguf_corrupt"], "a metadata key appears twice in the GGUF key-value table:"
        " https://github.com/ggml-org/llama.cpp/pull/4062",
        extra="open('tiny.gguf', 'wb').write(raw.replace(b'general.file_type', b'llama.block_count'))"),
    # --- round 4 (issue 26): more damaged headers and tensor tables ----------------------------------------------
    _case("zero-filled-file", ["model.gguf_corrupt"], "open('tiny.gguf', 'wb').write(bytes(len(raw)))",
          "a file of the right size but all zero bytes (a preallocated download that never got its data):"
          " https://github.com/ggml-org/llama.cpp/issues/12516"),
    _case("tensor-count-overflow", ["model.gguf_corrupt"],
          "open('tiny.gguf', 'wb').write(raw[:8] + struct.pack('<Q', 1 << 61) + raw[16:])",
          "the header's tensor count is garbage (a bit flip / a header written by a broken converter):"
          " https://github.com/ggml-org/llama.cpp/issues/8385"),
    _case("kv-count-overflow", ["model.gguf_corrupt"],
          "open('tiny.gguf', 'wb').write(raw[:16] + struct.pack('<Q', 1 << 40) + raw[24:])",
          "the header's key-value count is garbage: the metadata cannot be read:"
          " https://github.com/ggml-org/llama.cpp/issues/8385"),
    _case("tensor-dims-invalid", ["model.gguf_corrupt"],
          "i = raw.index(b'token_embd.weight') + len('token_embd.weight')\nopen('tiny.gguf', 'wb').write(raw[:i] + struct.pack('<I', 7) + raw[i + 4:])",
          "a tensor info claims 7 dimensions (more than GGML_MAX_DIMS): a damaged tensor table:"
          " https://github.com/ggml-org/llama.cpp/pull/4062"),
    _case("hparams-tensor-shape-mismatch", ["model.gguf_unsupported"], "",
          "check_tensor_dims: the metadata's embedding_length (32) disagrees with the tensors (64 wide), labelled as the pack"
          " labels every wrong-shape load (llamacpp.tensor-layout-mismatch): a"
          " conversion with edited or wrong hyperparameters: https://github.com/ggml-org/llama.cpp/issues/7439",
          env={"TINY_E_META": "32"}),
]

# What the older release (0.2.90, August 2024: its vendored ggml.c gguf_init_from_file, llama.cpp and
# llama_chat_format.py) cannot be driven into: it refuses only GGUF version 1 (a version 9 header loads and
# generates); it has no duplicate-key check (the doubled key loads); its Jinja2 chat formatter has no {% generation %}
# tag (TemplateSyntaxError: the healthy case fails there); and it takes the header's key-value count on trust up to
# SIZE_MAX/2, so a garbage count aborts in ggml_calloc ("failed to allocate   0.00 MB", then GGML_ABORT) with an output
# that names no GGUF damage at all, only a failed host allocation (the gguf_init_from_file frame shows only in a gdb
# backtrace)
NEWEST_ONLY = {"future-version", "duplicate-metadata-key", "chat-template-generation-tags-healthy", "kv-count-overflow"}
# What it fails at differently: llama_new_context_with_model does not catch the std::bad_alloc of the KV cache's
# cells (a vector of n_ctx entries), so the process dies of an uncaught "terminate called after throwing an instance
# of 'std::bad_alloc'" that names no context or KV cache: a host allocation failure is all the output says
OLDER_EXPECT = {"context-too-large-for-ram": {"0.2.90": ["memory.host_oom"]}}
CASES = per_release(CASES, releases={i: ("0.3.36",) for i in NEWEST_ONLY}, expect_by=OLDER_EXPECT)

PROGRAM = Program(
    name="llamacpp",
    releases=[
        # the oldest release the pack supports: August 2024, vendoring a llama.cpp of that month (its CMake knows
        # the GGML_* options above; the LLAMA_BUILD_TOOLS/MTMD ones it does not know are ignored)
        Release(
            label="0.2.90",
            requirements=["llama-cpp-python==0.2.90", "gguf==0.19.0", "numpy"],
            pip_env={"CMAKE_ARGS": CMAKE_ARGS, "CMAKE_BUILD_PARALLEL_LEVEL": "2"},
        ),
        Release(
            label="0.3.36",
            requirements=["llama-cpp-python==0.3.36", "gguf==0.19.0", "numpy"],
            pip_env={"CMAKE_ARGS": CMAKE_ARGS, "CMAKE_BUILD_PARALLEL_LEVEL": "2"},
        )
    ],
    cases=CASES,
)
