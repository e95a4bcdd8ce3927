"""check-model on real GGUF files written with the gguf package, then damaged."""

from __future__ import annotations

import hashlib
import os
import shutil
import struct

from qwen_triage.preflight.model.check import inspect_model
from qwen_triage.preflight.model.gguf_check import read_header


def test_clean_gguf(gguf_file, classes):
    r = inspect_model(gguf_file, classes=classes)
    assert r.diagnoses == [] and r.format == "gguf"
    info = next(o for o in r.observations if o.rule == "preflight.model.gguf-info")
    assert info.facts["architecture"] == "qwen2"
    assert info.facts["file_type"] == "MOSTLY_Q8_0"
    assert info.facts["tensor_types"] == {"Q8_0": 2, "F32": 3, "F16": 2}
    header = read_header(gguf_file)
    assert header.version == 3 and header.array_lengths["tokenizer.ggml.tokens"] == 100
    assert header.data_end == gguf_file.stat().st_size


def test_truncated_download(gguf_file, classes, build):
    size = gguf_file.stat().st_size
    os.truncate(gguf_file, size - 1000)
    d = build.find(inspect_model(gguf_file, classes=classes).diagnoses, "model.gguf_corrupt")
    assert d.rule == "preflight.model.gguf-truncated"
    assert d.facts["missing_bytes"] == 1000 and d.facts["needed_bytes"] == size
    assert "truncated download" in d.summary
    assert "data is not within the file bounds" in d.evidence[0].text


def test_truncated_inside_metadata(gguf_file, classes, build):
    os.truncate(gguf_file, 300)
    d = build.find(inspect_model(gguf_file, classes=classes).diagnoses, "model.gguf_corrupt")
    assert "inside the metadata" in d.summary and d.facts["file_bytes"] == 300


def test_bad_magic(gguf_file, classes, build):
    data = bytearray(gguf_file.read_bytes())
    data[:4] = b"\x00\x00\x00\x00"
    gguf_file.write_bytes(bytes(data))
    d = build.find(inspect_model(gguf_file, classes=classes).diagnoses, "model.gguf_corrupt")
    assert d.rule == "preflight.model.gguf-magic"


def test_html_instead_of_model(tmp_path, classes, build):
    path = tmp_path / "model.gguf"
    path.write_text("<!DOCTYPE html><html><body>Access denied</body></html>")
    d = build.find(inspect_model(path, classes=classes).diagnoses, "model.gguf_corrupt")
    assert "HTML page" in d.summary


def test_legacy_ggml(tmp_path, classes, build):
    path = tmp_path / "old.gguf"
    path.write_bytes(b"tjgg" + struct.pack("<I", 3) + bytes(64))
    d = build.find(inspect_model(path, classes=classes).diagnoses, "model.gguf_unsupported")
    assert "GGJT" in d.summary


def test_old_version(gguf_file, classes, build):
    data = bytearray(gguf_file.read_bytes())
    data[4:8] = struct.pack("<I", 1)
    gguf_file.write_bytes(bytes(data))
    d = build.find(inspect_model(gguf_file, classes=classes).diagnoses, "model.gguf_unsupported")
    assert d.facts["version"] == 1


def test_unknown_tensor_type(gguf_file, classes, build):
    data = bytearray(gguf_file.read_bytes())
    name = b"blk.0.attn_q.weight"
    at = data.index(name) + len(name)
    (n_dims,) = struct.unpack_from("<I", data, at)
    struct.pack_into("<I", data, at + 4 + 8 * n_dims, 250)
    gguf_file.write_bytes(bytes(data))
    d = build.find(inspect_model(gguf_file, classes=classes).diagnoses, "model.gguf_unsupported")
    assert d.rule == "preflight.model.gguf-type" and "type 250" in d.evidence[0].text


def test_missing_split_part(tmp_path, classes, build):
    kv = {"split.no": ("uint16", 0), "split.count": ("uint16", 3), "split.tensors.count": ("int32", 7)}
    build.gguf(tmp_path / "qwen-00001-of-00003.gguf", kv=kv)
    shutil.copy(tmp_path / "qwen-00001-of-00003.gguf", tmp_path / "qwen-00002-of-00003.gguf")
    r = inspect_model(tmp_path, classes=classes)
    d = build.find(r.diagnoses, "model.shard_missing")
    assert d.facts["missing"] == ["qwen-00003-of-00003.gguf"]
    assert any(o.rule == "preflight.model.gguf-only" for o in r.observations)


def test_ollama_blob_digest(gguf_file, tmp_path, classes, build):
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    digest = hashlib.sha256(gguf_file.read_bytes()).hexdigest()
    good = blobs / f"sha256-{digest}"
    shutil.copy(gguf_file, good)
    r = inspect_model(good, hash_files=True, classes=classes)
    assert r.diagnoses == [] and r.files[0].sha256 == digest and r.format == "gguf"
    bad = blobs / f"sha256-{'0' * 64}"
    shutil.copy(gguf_file, bad)
    d = build.find(inspect_model(bad, hash_files=True, classes=classes).diagnoses, "model.gguf_corrupt")
    assert d.rule == "preflight.model.sha256-mismatch"
