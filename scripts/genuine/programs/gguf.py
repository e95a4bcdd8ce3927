"""The gguf Python reader (``gguf-dump``, ``gguf.GGUFReader``) on damaged and unsupported GGUF files. Each case
writes a tiny valid llama GGUF with the library's own ``GGUFWriter`` and then damages it: bad magic, a file cut
inside its tensor data or its key-value table, a version from the future, a tensor of an unknown ggml type.
"""

from dataclasses import replace

import gguf_damage as damage
from case import Case, Program, Release

# A tiny llama GGUF written by gguf-py itself; DAMAGE runs on its bytes afterwards.
WRITE = """\
import os, struct, sys
import numpy as np
import gguf
w = gguf.GGUFWriter("tiny.gguf", "llama")
w.add_name("tiny-llama")
w.add_context_length(128)
w.add_embedding_length(64)
w.add_block_count(1)
w.add_feed_forward_length(128)
w.add_head_count(4)
w.add_head_count_kv(4)
w.add_layer_norm_rms_eps(1e-5)
w.add_file_type(0)
rng = np.random.default_rng(0)
w.add_tensor("token_embd.weight", rng.standard_normal((32, 64), dtype=np.float32))
w.add_tensor("output_norm.weight", np.ones(64, dtype=np.float32))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
raw = open("tiny.gguf", "rb").read()
"""


def _case(id: str, expect: list[str], damage: str, note: str, exit: str = "fail", flags: str = "") -> Case:
    return Case(
        id=id,
        expect=expect,
        argv=["bash", "-c", "{python} write.py && exec {bin}/gguf-dump %stiny.gguf" % flags],
        files={"write.py": WRITE + damage + "\n"},
        input="llama-cpp",
        note=note,
        exit=exit,
        timeout=60,
    )


CASES = [
    _case("dump-ok-healthy", [], "", "healthy: gguf-dump lists the metadata and tensors of a valid file", exit="ok"),
    _case("bad-magic", ["model.gguf_corrupt"], damage.BAD_MAGIC,
          "the first four bytes are not GGUF"),
    _case("html-instead-of-gguf", ["model.gguf_corrupt"],
          damage.HTML_PAGE,
          "an HTML error page saved under the .gguf name (a failed download)"),
    _case("truncated-data", ["model.gguf_corrupt"], damage.truncated("len(raw) - 4096"),
          "the file stops inside its tensor data (an interrupted download)"),
    _case("truncated-kv", ["model.gguf_corrupt"], damage.truncated("120"),
          "the file stops inside its key-value metadata"),
    _case("future-version", ["model.gguf_unsupported"],
          damage.FUTURE_VERSION,
          "a GGUF version this reader does not know (9)"),
    _case("unknown-ggml-type", ["model.gguf_unsupported"],
          damage.UNKNOWN_GGML_TYPE,
          "a tensor whose ggml type (251) no release defines"),
    # --- more of what users hit (issue 26) --------------------------------------------------------------
    _case("dump-json-healthy", [], "", "healthy: gguf-dump --json of a valid file", exit="ok", flags="--json "),
    _case("empty-file", ["model.gguf_corrupt"], "open('tiny.gguf', 'wb').close()",
          "a zero-byte file where the GGUF should be (a download that never started)"),
]

# --- round 3 (genuine sweep): another format, a missing path, duplicated keys / tensors, an unknown value type,
# the metadata editor, a big-endian file ---------------------------------------------------------------------


def _cmd(id: str, expect: list[str], damage: str, note: str, cmd: str, exit: str = "fail") -> Case:
    return Case(
        id=id,
        expect=expect,
        argv=["bash", "-c", "{python} write.py && exec " + cmd],
        files={"write.py": WRITE + damage + "\n"},
        input="llama-cpp",
        note=note,
        exit=exit,
        timeout=60,
    )


CASES += [
    _cmd("path-missing", ["model.file_missing"], "", "gguf-dump on a path where no file was downloaded:"
         " https://github.com/ggml-org/llama.cpp/issues/15164", "{bin}/gguf-dump models/tiny-q4_k_m.gguf"),
    _cmd("safetensors-given", ["model.format_mismatch"],
         "import json\nh = json.dumps({'w': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}}).encode()\n"
         "open('model.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + bytes(8))",
         "a safetensors checkpoint given to the GGUF reader: https://github.com/ggml-org/llama.cpp/issues/3953",
         "{bin}/gguf-dump model.safetensors"),
    # gguf 0.10.0 reads a duplicated key without a word (the later value wins): only 0.19.0 refuses the file
    replace(_case("duplicate-key", ["model.gguf_corrupt"],
                  "open('tiny.gguf', 'wb').write(raw.replace(b'general.file_type', b'llama.block_count'))",
                  "a metadata key appears twice in the key-value table: https://github.com/ggml-org/llama.cpp/pull/4062"),
            releases=("0.19.0",)),
    _case("duplicate-tensor", ["model.gguf_corrupt"],
          "w = gguf.GGUFWriter('tiny.gguf', 'llama')\n"
          "w.add_name('tiny-llama')\n"
          "w.add_tensor('blk.0.attn_q.weight', np.ones((8, 8), dtype=np.float32))\n"
          "w.add_tensor('blk.0.attn_k.weight', np.ones((8, 8), dtype=np.float32))\n"
          "w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()\n"
          "raw = open('tiny.gguf', 'rb').read()\n"
          "open('tiny.gguf', 'wb').write(raw.replace(b'blk.0.attn_k.weight', b'blk.0.attn_q.weight'))",
          "two tensors carry one name (a badly merged file): https://github.com/ggml-org/llama.cpp/issues/6836"),
    _case("unknown-value-type", ["model.gguf_corrupt"],
          "i = raw.index(b'general.name') + len('general.name')\n"
          "open('tiny.gguf', 'wb').write(raw[:i] + struct.pack('<I', 99) + raw[i + 4:])",
          "a metadata value whose type code (99) GGUF does not define (damaged key-value table)"),
    _cmd("set-metadata-missing-key", ["config.bad_argument"], "",
         "gguf-set-metadata on a key the file does not have (a typo in the key name):"
         " https://github.com/ggml-org/llama.cpp/pull/4062",
         "{bin}/gguf-set-metadata --force tiny.gguf llama.rope.freq_base_typo 10000"),
    _cmd("set-metadata-healthy", [], "", "healthy: gguf-set-metadata changes general.file_type in place",
         "{bin}/gguf-set-metadata --force tiny.gguf general.file_type 1", exit="ok"),
    _cmd("big-endian-healthy", [],
         "w = gguf.GGUFWriter('big.gguf', 'llama', endianess=gguf.GGUFEndian.BIG)\n"
         "w.add_name('tiny-llama-be')\n"
         "w.add_tensor('token_embd.weight', np.ones((8, 8), dtype=np.float32).byteswap())\n"
         "w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()",
         "healthy: gguf-dump of a big-endian GGUF on a little-endian host (it says so, and reads it)",
         "{bin}/gguf-dump big.gguf", exit="ok"),
]

PROGRAM = Program(
    name="gguf",
    releases=[
        Release(label="0.10.0", requirements=["gguf==0.10.0", "numpy<2", "sentencepiece"]),
        Release(label="0.19.0", requirements=["gguf==0.19.0", "numpy"]),
    ],
    cases=CASES,
)
