"""check-model on real safetensors files: build them, then delete, truncate and corrupt them."""

from __future__ import annotations

import hashlib
import json
import os
import struct

import numpy as np
import pytest

from qwen_triage.preflight.model.check import ModelPathError, check_model, inspect_model

SHARD = "model-00002-of-00003.safetensors"


def classes_of(result):
    return [d.class_ for d in result.diagnoses]


def test_clean_model(model_dir, classes):
    r = inspect_model(model_dir, classes=classes)
    assert r.diagnoses == [] and r.format == "safetensors"
    shards = [f for f in r.files if f.kind == "safetensors"]
    assert len(shards) == 3 and all(f.ok and f.tensors for f in shards)
    assert check_model(model_dir, classes=classes) == []


def test_deleted_shard(model_dir, classes, build):
    (model_dir / SHARD).unlink()
    r = inspect_model(model_dir, classes=classes)
    d = build.find(r.diagnoses, "model.shard_missing")
    assert d.rule == "preflight.model.shard-missing" and SHARD in d.summary
    assert d.evidence[0].path.endswith(SHARD) and d.evidence[0].line == 0
    assert {"type": "redownload", "what": SHARD, "safety": "destructive"} in [f.action for f in d.fix]
    assert next(f for f in r.files if f.name == SHARD).detail == "missing"


def test_truncated_shard(model_dir, classes, build):
    path = model_dir / SHARD
    size = path.stat().st_size
    os.truncate(path, size - 100)
    r = inspect_model(model_dir, classes=classes)
    d = build.find(r.diagnoses, "model.shard_corrupt")
    assert d.rule == "preflight.model.shard-truncated"
    assert d.facts["missing_bytes"] == 100 and d.facts["file_bytes"] == size - 100
    assert "truncated" in d.summary and "100 bytes" in d.summary
    # The safetensors package's own words, which scan rules match in server logs.
    assert any("incomplete metadata" in e.text for e in d.evidence)


def test_truncated_inside_header(model_dir, classes, build):
    path = model_dir / SHARD
    os.truncate(path, 40)
    d = build.find(inspect_model(model_dir, classes=classes).diagnoses, "model.shard_corrupt")
    assert "inside its header" in d.summary


def test_garbage_header(model_dir, classes, build):
    path = model_dir / SHARD
    data = bytearray(path.read_bytes())
    data[8:24] = b"\x00\xff" * 8
    path.write_bytes(bytes(data))
    d = build.find(inspect_model(model_dir, classes=classes).diagnoses, "model.shard_corrupt")
    assert d.rule == "preflight.model.header-header-json"
    assert "Error while deserializing header" in d.evidence[0].text


def test_header_length_nonsense(model_dir, classes, build):
    path = model_dir / SHARD
    data = bytearray(path.read_bytes())
    data[0:8] = struct.pack("<Q", 2**40)
    path.write_bytes(bytes(data))
    d = build.find(inspect_model(model_dir, classes=classes).diagnoses, "model.shard_corrupt")
    assert "HeaderTooLarge" in d.summary


def test_git_lfs_pointer(model_dir, classes, build):
    (model_dir / SHARD).write_text(
        "version https://git-lfs.github.com/spec/v1\n"
        "oid sha256:4d0b6e3a3c8f1b0b7e6f7b3f6b2c9b7a0e7f4b0c3e2d1a0f9e8d7c6b5a4f3e2d\nsize 3945634208\n"
    )
    d = build.find(inspect_model(model_dir, classes=classes).diagnoses, "model.shard_corrupt")
    assert d.rule == "preflight.model.lfs-pointer" and "git lfs pull" in d.summary


def test_shard_from_another_revision(model_dir, classes, build):
    from safetensors.numpy import save_file

    weight_map = json.loads((model_dir / "model.safetensors.index.json").read_text())["weight_map"]
    names = sorted(n for n, s in weight_map.items() if s == SHARD)
    tensors = build.tensors()
    save_file({n: tensors[n] for n in names[1:]}, str(model_dir / SHARD))
    r = inspect_model(model_dir, classes=classes)
    d = build.find(r.diagnoses, "model.weights_mismatch")
    assert d.rule == "preflight.model.index-disagrees" and names[0] in d.summary


def test_small_sibling(tmp_path, classes, build):
    from safetensors.numpy import save_file

    weight_map = {}
    for k in range(1, 5):
        name = f"model-{k:05d}-of-00004.safetensors"
        n = 2000 if k == 2 else 32768  # shard 2 holds a fraction of what its siblings hold
        save_file({f"t{k}": np.ones(n, np.float16)}, str(tmp_path / name))
        weight_map[f"t{k}"] = name
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["X"], "model_type": "x"}))
    (tmp_path / "tokenizer.json").write_text("{}")
    r = inspect_model(tmp_path, classes=classes)
    d = build.find(r.diagnoses, "model.shard_corrupt")
    assert d.rule == "preflight.model.shard-small" and "model-00002-of-00004" in d.summary
    assert d.severity.value == "warning"


def test_series_without_index(model_dir, classes, build):
    (model_dir / "model.safetensors.index.json").unlink()
    (model_dir / "model-00003-of-00003.safetensors").unlink()
    d = build.find(inspect_model(model_dir, classes=classes).diagnoses, "model.shard_missing")
    assert "of the 3-part series" in d.summary


def test_dangling_hub_cache_link(model_dir, classes, build):
    target = model_dir / SHARD
    target.unlink()
    target.symlink_to(model_dir / "blobs" / "deadbeef")
    d = build.find(inspect_model(model_dir, classes=classes).diagnoses, "model.shard_missing")
    assert "dangling" in d.summary


def test_missing_shard_explains_layer_mismatch(tmp_path, classes, build):
    # Without the index, a lost last shard shows as fewer layers than config.json says:
    # one root cause (shard missing), the layer count nested under it.
    d = tmp_path / "m"
    build.model(d, shards=4)
    (d / "model.safetensors.index.json").unlink()
    (d / "model-00004-of-00004.safetensors").unlink()
    r = inspect_model(d, classes=classes)
    root = build.find(r.diagnoses, "model.shard_missing")
    assert "model.weights_mismatch" in [s.class_ for s in root.symptoms]
    assert "model.weights_mismatch" not in classes_of(r)


def test_config_and_tokenizer(model_dir, classes, build):
    (model_dir / "tokenizer.json").unlink()
    r = inspect_model(model_dir, classes=classes)
    d = build.find(r.diagnoses, "model.format_mismatch")
    assert d.rule == "preflight.model.no-tokenizer" and d.severity.value == "warning"
    (model_dir / "config.json").unlink()
    d = build.find(inspect_model(model_dir, classes=classes).diagnoses, "model.format_mismatch")
    assert d.severity.value == "error" and "config.json" in d.summary


def test_config_disagrees_with_weights(model_dir, classes, build):
    cfg = json.loads((model_dir / "config.json").read_text())
    (model_dir / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 6, "vocab_size": 128}))
    d = build.find(inspect_model(model_dir, classes=classes).diagnoses, "model.weights_mismatch")
    assert d.count == 2 and "6 layers" in d.summary and "vocab_size 128" in d.summary


def test_architecture_disagrees(model_dir, classes, build):
    cfg = json.loads((model_dir / "config.json").read_text())
    (model_dir / "config.json").write_text(json.dumps({**cfg, "architectures": ["Qwen3ForCausalLM"]}))
    d = build.find(inspect_model(model_dir, classes=classes).diagnoses, "model.arch_unsupported")
    assert "Qwen2ForCausalLM" in d.summary


def test_zero_filled_tail(tmp_path, classes, build):
    from safetensors.numpy import save_file

    path = tmp_path / "model.safetensors"
    save_file({"w": np.ones(3 << 20, np.float16)}, str(path))  # 6 MiB of data
    (tmp_path / "config.json").write_text(json.dumps(build.TINY))
    (tmp_path / "tokenizer.json").write_text("{}")
    assert "model.shard_corrupt" not in classes_of(inspect_model(tmp_path, classes=classes))
    with path.open("r+b") as fh:
        fh.seek(-(1 << 20), os.SEEK_END)
        fh.write(bytes(1 << 20))
    d = build.find(inspect_model(tmp_path, classes=classes).diagnoses, "model.shard_corrupt")
    assert d.rule == "preflight.model.zero-tail"


def test_sha256_list(model_dir, tmp_path, classes, build):
    lines = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}" for p in sorted(model_dir.glob("*.safetensors"))]
    sums = tmp_path / "SHA256SUMS"
    sums.write_text("\n".join(lines) + "\n")
    r = inspect_model(model_dir, sha256_list=sums, classes=classes)
    assert r.diagnoses == [] and all(f.sha256 for f in r.files if f.kind == "safetensors")
    # Flip one byte in the data: the header still parses, the checksum does not match.
    path = model_dir / SHARD
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    d = build.find(inspect_model(model_dir, sha256_list=sums, classes=classes).diagnoses, "model.shard_corrupt")
    assert d.rule == "preflight.model.sha256-mismatch" and d.facts["file"] == SHARD


def test_sha256_list_names_a_missing_file(model_dir, tmp_path, classes, build):
    sums = tmp_path / "sums.txt"
    sums.write_text("0" * 64 + " *model-00009-of-00009.safetensors\n")
    d = build.find(inspect_model(model_dir, sha256_list=sums, classes=classes).diagnoses, "model.shard_missing")
    assert "listed in sums.txt" in d.summary


def test_bad_inputs(tmp_path):
    with pytest.raises(ModelPathError):
        inspect_model(tmp_path / "nope")
    bad = tmp_path / "sums"
    bad.write_text("not a checksum line\n")
    with pytest.raises(ModelPathError, match="sha256sum format"):
        inspect_model(tmp_path, sha256_list=bad)


def test_empty_directory(tmp_path, classes, build):
    d = build.find(inspect_model(tmp_path, classes=classes).diagnoses, "model.file_missing")
    assert d.rule == "preflight.model.no-weights"


def test_single_file(model_dir, classes):
    r = inspect_model(model_dir / SHARD, classes=classes)
    assert r.diagnoses == [] and [f.name for f in r.files] == [SHARD]


DEEP = "[" * 100_000 + "]" * 100_000  # issue 29: a stranger's JSON nested past the interpreter's recursion limit


@pytest.mark.parametrize("name", ["config.json", "model.safetensors.index.json", "tokenizer.json"])
def test_json_nested_too_deep_is_a_finding_not_a_crash(model_dir, classes, name):
    (model_dir / name).write_text(DEEP)
    r = inspect_model(model_dir, classes=classes)
    bad = [f for f in r.files if f.name == name]
    assert bad and not bad[0].ok and "nested too deep" in bad[0].detail


def test_relaunch_reads_a_config_nested_too_deep_as_unreadable(model_dir):
    from qwen_triage.runner.launch_checks import model_config_for
    from qwen_triage.runner.vllm.argv import parse_vllm_argv

    (model_dir / "config.json").write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    cfg, note = model_config_for(parse_vllm_argv(["vllm", "serve", str(model_dir)]))
    assert cfg is None and note and "nested too deep" in note
