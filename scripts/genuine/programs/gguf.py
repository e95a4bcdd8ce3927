"""The gguf Python reader (``gguf-dump``, ``gguf.GGUFReader``) on damaged and unsupported GGUF files. Each case
writes a tiny valid llama GGUF with the library's own ``GGUFWriter`` and then damages it: bad magic, a file cut
inside its tensor data or its key-value table, a version from the future, a tensor of an unknown ggml type.
"""

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

PROGRAM = Program(
    name="gguf",
    releases=[
        Release(label="0.10.0", requirements=["gguf==0.10.0", "numpy<2", "sentencepiece"]),
        Release(label="0.19.0", requirements=["gguf==0.19.0", "numpy"]),
    ],
    cases=CASES,
)
