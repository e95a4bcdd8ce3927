"""The safetensors reader on damaged weight files: what a loader built on it prints when a shard is truncated,
its header length is absurd, its JSON header is broken, or the file is a Git LFS pointer. Each case writes a
valid file with the library itself, damages it, then opens it with ``safe_open`` (numpy framework: no torch).
"""

from case import Case, Program, Release

WRITE = """\
import json, os, struct, sys
import numpy as np
from safetensors.numpy import save_file
tensors = dict(embed=np.arange(4096, dtype=np.float32).reshape(64, 64), norm=np.ones(64, dtype=np.float32))
save_file(tensors, "model-00001-of-00002.safetensors", metadata=dict(format="np"))
p = "model-00001-of-00002.safetensors"
raw = open(p, "rb").read()
"""

OPEN = """
from safetensors import safe_open
print("loading", p)
with safe_open(p, framework="np") as f:
    for k in f.keys():
        print(k, f.get_tensor(k).shape)
"""


def _case(id: str, expect: list[str], damage: str, note: str, exit: str = "fail") -> Case:
    return Case(
        id=id,
        expect=expect,
        argv=["{python}", "load.py"],
        files={"load.py": WRITE + damage + "\n" + OPEN},
        input="transformers",
        note=note,
        exit=exit,
        timeout=60,
    )


CASES = [
    _case("open-ok-healthy", [], "", "healthy: a valid file opens and every tensor reads", exit="ok"),
    _case("truncated-data", ["model.shard_corrupt"], "open(p, 'wb').write(raw[: len(raw) - 5000])",
          "the tensor data is cut short (an interrupted download)"),
    _case("header-too-small", ["model.shard_corrupt"], "open(p, 'wb').write(raw[:5])",
          "the file is 5 bytes: not even the 8-byte header length"),
    _case("header-too-large", ["model.shard_corrupt"],
          "open(p, 'wb').write(struct.pack('<Q', 1 << 40) + raw[8:])",
          "the header length field says 1 TiB"),
    _case("header-cut", ["model.shard_corrupt"], "n = struct.unpack('<Q', raw[:8])[0]; open(p, 'wb').write(raw[: 8 + n // 2])",
          "the file stops in the middle of its JSON header"),
    _case("header-not-json", ["model.shard_corrupt"],
          "n = struct.unpack('<Q', raw[:8])[0]; open(p, 'wb').write(raw[:8] + b'#' * n + raw[8 + n:])",
          "the JSON header is overwritten with garbage of the same length"),
    _case("lfs-pointer", ["model.shard_corrupt"],
          "open(p, 'w').write('version https://git-lfs.github.com/spec/v1\\noid sha256:'"
          " + '4d1c0d3f' * 8 + '\\nsize 2147483648\\n')",
          "the shard is a Git LFS pointer file (cloned without git-lfs)"),
    _case("file-missing", ["model.shard_missing"], "os.unlink(p)",
          "the shard named by the index is not on disk"),
    # --- more of what users hit (issue 26) --------------------------------------------------------------
    _case("load-file-healthy", [], "from safetensors.numpy import load_file\nprint(sorted(load_file(p)))",
          "healthy: load_file of a valid file (the whole dict at once)", exit="ok"),
    _case("empty-file", ["model.shard_corrupt"], "open(p, 'wb').close()",
          "a zero-byte shard (a download that never started, a full disk)"),
    _case("html-instead", ["model.shard_corrupt"],
          "open(p, 'w').write('<!DOCTYPE html><html><head><title>Access denied</title></head></html>\\n' * 8)",
          "an HTML error page saved under the shard's name (a download behind a proxy or a login wall)"),
    _case("offsets-past-end", ["model.shard_corrupt"],
          "h = json.dumps({'embed': {'dtype': 'F32', 'shape': [64, 64], 'data_offsets': [0, 16384]},"
          " 'norm': {'dtype': 'F32', 'shape': [64], 'data_offsets': [16384, 1 << 30]}}).encode()\n"
          "open(p, 'wb').write(struct.pack('<Q', len(h)) + h + bytes(16640))",
          "the header names data far past the end of the file (a shard cut after its header was written)"),
    _case("unknown-dtype", ["model.shard_corrupt"],
          "h = json.dumps({'embed': {'dtype': 'F99', 'shape': [2], 'data_offsets': [0, 8]}}).encode()\n"
          "open(p, 'wb').write(struct.pack('<Q', len(h)) + h + bytes(8))",
          "a tensor whose dtype is not one safetensors knows (a damaged header byte)"),
    # --- genuine sweep 2: header fields that disagree, wrong keys, metadata, unreadable files --------------------
    _case("tensor-key-missing", ["model.weights_mismatch"],
          "from safetensors import safe_open\nwith safe_open(p, framework='np') as f:\n"
          "    print(sorted(f.keys()))\n    w = f.get_tensor('lm_head.weight')",
          "the loader asks the shard for a tensor it does not hold (a checkpoint of another model or a renamed key);"
          " https://github.com/QwenLM/Qwen3-VL-Embedding/issues/89"),
    _case("header-metadata-int", ["model.shard_corrupt"],
          "h = json.dumps({'__metadata__': {'format': 'np', 'step': 1200},"
          " 'embed': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}}).encode()\n"
          "open(p, 'wb').write(struct.pack('<Q', len(h)) + h + bytes(8))",
          "the header's __metadata__ holds a number where the format allows only strings (a file written by another"
          " tool); https://github.com/safetensors/safetensors/issues/278"),
    _case("bf16-numpy-framework", ["config.dtype_unsupported"],
          "h = json.dumps({'embed': {'dtype': 'BF16', 'shape': [4], 'data_offsets': [0, 8]}}).encode()\n"
          "open(p, 'wb').write(struct.pack('<Q', len(h)) + h + bytes(8))",
          "a bfloat16 checkpoint read through the numpy framework, which has no bfloat16 dtype;"
          " https://github.com/safetensors/safetensors/issues/598"),
    _case("trailing-bytes", ["model.shard_corrupt"], "open(p, 'ab').write(bytes(4096))",
          "4 KiB of zeros after the last tensor (a resumed download that appended past the end, a padded copy);"
          " https://github.com/Comfy-Org/ComfyUI/issues/15602"),
    _case("metadata-read-healthy", [],
          "from safetensors import safe_open as so\nwith so(p, framework='np') as g:\n"
          "    print(g.metadata(), [g.get_slice(k).get_shape() for k in g.keys()])",
          "healthy: metadata and per-tensor slices read from a valid file", exit="ok"),
]

# --- issue 26 (helper 3): writing a checkpoint where the disk or the file-size limit stops it ----------------
SAVE = """\
import numpy as np
from safetensors.numpy import save_file
tensors = {"model.embed_tokens.weight": np.zeros((1024, 1024), dtype=np.float32)}  # 4 MiB
print("saving checkpoint-500/model.safetensors")
save_file(tensors, "out/model.safetensors", metadata={"format": "pt"})
print("saved")
"""


def _save(id: str, expect: list[str], shell: str, note: str, exit: str = "fail") -> Case:
    return Case(id=id, expect=expect, argv=["bash", "-c", shell], files={"save.py": SAVE}, input="transformers",
                note=note, exit=exit, timeout=60)


CASES += [
    _save("save-disk-full", ["node.storage_error"],
          "exec unshare -m bash -c 'mkdir -p out && mount -t tmpfs -o size=1m tmpfs out && exec {python} save.py'",
          "save_file of a 4 MiB tensor into a directory whose filesystem is full (a 1 MiB tmpfs): a fine-tune's "
          "checkpoint save on a full disk; https://github.com/huggingface/safetensors/issues/349"),
    _save("save-file-size-limit", ["node.storage_error"],
          "mkdir -p out && ulimit -f 1024 && exec {python} save.py",
          "save_file of a 4 MiB tensor under a 1 MiB file-size limit (ulimit -f, set by a batch scheduler): "
          "EFBIG; https://github.com/huggingface/safetensors/issues/349"),
    _save("save-ok-healthy", [], "mkdir -p out && exec {python} save.py",
          "healthy: save_file of a 4 MiB tensor", exit="ok"),
]

PROGRAM = Program(
    name="safetensors",
    releases=[
        Release(label="0.4.5", requirements=["safetensors==0.4.5", "numpy"]),
        Release(label="0.8.0", requirements=["safetensors==0.8.0", "numpy"]),
    ],
    cases=CASES,
)
