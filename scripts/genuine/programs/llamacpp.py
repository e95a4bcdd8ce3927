"""llama.cpp's own GGUF loader (through llama-cpp-python, which compiles it) on damaged and unsupported files:
bad magic, an HTML page saved as .gguf, a file cut inside its metadata or its tensor data, a GGUF version from the
future, an unknown architecture, a tensor of an unknown ggml type, a model missing tensors, a path that does not
exist. The files are written by gguf-py's ``GGUFWriter`` inside the case and damaged afterwards; the loader's
messages (``gguf_init_from_file_impl: ...``, ``llama_model_load: error loading model: ...``) are llama.cpp's.

Building the venv compiles llama.cpp with CMAKE_ARGS below (a minimal CPU build: ~45 min on one of two busy
cores); pip keeps the built wheel in its cache, so a rebuilt venv of the same pin reuses it.
"""

import gguf_damage as damage
from case import Case, Program, Release

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
w.add_embedding_length(64)
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

PROGRAM = Program(
    name="llamacpp",
    releases=[
        Release(
            label="0.3.36",
            requirements=["llama-cpp-python==0.3.36", "gguf==0.19.0", "numpy"],
            pip_env={"CMAKE_ARGS": CMAKE_ARGS, "CMAKE_BUILD_PARALLEL_LEVEL": "2"},
        )
    ],
    cases=CASES,
)
