"""Never silent: error lines no rule explains become templates; `rules suggest` turns them into rules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_triage.engine.unrecognised import library_of, template_of
from tests.conftest import ROOT

UNKNOWN_LOG = """\
INFO 11-29 10:00:01 [api_server.py:1043] vLLM API server version 0.9.1
(VllmWorker rank=0 pid=101) Traceback (most recent call last):
(VllmWorker rank=0 pid=101)   File "/usr/lib/python3/dist-packages/frobnicate/core.py", line 12, in run
(VllmWorker rank=0 pid=101)     raise FrobnicatorError("flux capacitor 0x7f3a not charged after 12.5 s")
(VllmWorker rank=0 pid=101) frobnicate.core.FrobnicatorError: flux capacitor 0x7f3a not charged after 12.5 s
(VllmWorker rank=1 pid=102) frobnicate.core.FrobnicatorError: flux capacitor 0x7f3b not charged after 13.0 s
ERROR 11-29 10:00:05 [engine.py:88] Widget pool drained on host 10.0.0.2:4455
INFO 11-29 10:00:06 [engine.py:90] retrying
"""


def qt(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qwen_triage", *args], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.fixture()
def unknown_log(tmp_path: Path) -> Path:
    p = tmp_path / "unknown.log"
    p.write_text(UNKNOWN_LOG)
    return p


def test_templates_mask_what_varies() -> None:
    a = template_of("RuntimeError: CUDA error at 0x7f3a on cuda:0 after 12.5 s in /opt/x/y.py")
    b = template_of("RuntimeError: CUDA error at 0x11 on cuda:3 after 9 s in /home/u/z.py")
    assert a == b == "RuntimeError: CUDA error at <HEX> on cuda:<N> after <N> s in <PATH>"
    assert template_of("ValueError: Your setup doesn't support bf16/gpu.") == "ValueError: Your setup doesn't support bf16/gpu."
    assert library_of("/usr/lib/python3/dist-packages/torch/cuda/__init__.py") == "torch"
    assert library_of("/app/train.py") == "train"


def test_failing_log_without_a_rule_is_not_silent(unknown_log: Path) -> None:
    proc = qt("scan", "--format", "json", str(unknown_log))
    assert proc.returncode == 0  # no diagnosis: exit 0 unless asked otherwise
    report = json.loads(proc.stdout)
    assert report["diagnoses"] == []
    items = report["unrecognised"]
    assert [i["kind"] for i in items] == ["exception", "error"]
    exc = items[0]
    assert exc["template"] == "frobnicate.core.FrobnicatorError: flux capacitor <HEX> not charged after <N> s"
    assert exc["count"] == 2 and exc["raised_by"] == "frobnicate" and exc["exception"] == "FrobnicatorError"
    assert exc["evidence"]["line"] == 5
    text = qt("scan", str(unknown_log)).stdout
    assert "No known failure matched" in text and "FrobnicatorError" in text
    assert qt("scan", "--fail-on", "unrecognised", str(unknown_log)).returncode == 1


def test_explained_and_benign_lines_are_not_listed(tmp_path: Path) -> None:
    log = tmp_path / "k.log"
    log.write_text(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.64 GiB of which 0 bytes is free.\n"
        "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping further processing\n"
    )
    report = json.loads(qt("scan", "--format", "json", str(log)).stdout)
    assert report["diagnoses"][0]["class"] == "memory.gpu_oom"
    assert report["unrecognised"] == []


def test_suggest_drafts_rules_that_diagnose_the_log_once_the_class_is_filled(unknown_log: Path, tmp_path: Path) -> None:
    proc = qt("rules", "suggest", str(unknown_log))
    assert proc.returncode == 0, proc.stderr
    draft = proc.stdout
    assert draft.count("class: FILL-IN") == 2
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "draft.yaml").write_text(draft)
    assert qt("rules", "lint", str(rules / "draft.yaml")).returncode == 1  # the class is not filled in yet
    (rules / "draft.yaml").write_text(draft.replace("class: FILL-IN", "class: process.segfault"))
    lint = qt("rules", "lint", str(rules / "draft.yaml"))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    test = qt("rules", "test", str(rules / "draft.yaml"))
    assert test.returncode == 0 and "4 passed, 0 failed" in test.stdout
    report = json.loads(qt("scan", "--format", "json", "--rules", str(rules), str(unknown_log)).stdout)
    assert report["diagnoses"] == [] and report["observations"]  # a draft is experimental: an observation
    (rules / "draft.yaml").write_text((rules / "draft.yaml").read_text().replace("status: experimental",
                                                                                 "status: stable"))
    report = json.loads(qt("scan", "--format", "json", "--rules", str(rules), str(unknown_log)).stdout)
    assert report["diagnoses"][0]["class"] == "process.segfault"
    assert report["unrecognised"] == []
    # the numbers of this report are groups, not literals
    assert "0x7f3a" not in draft.split("match:")[1].split("examples:")[0]


HANG = (
    "INFO 03-05 18:05:51 utils.py:950] Found nccl from library libnccl.so.2\n"
    "INFO 03-05 18:05:51 pynccl.py:69] vLLM is using nccl==2.21.5\n"
    + "".join(f"DEBUG 03-05 18:06:{i:02d} client.py:191] Waiting for output from MQLLMEngine.\n" for i in range(10, 60, 10))
)


def test_a_hang_is_reported_where_it_stopped(tmp_path: Path) -> None:
    log = tmp_path / "hang.log"
    log.write_text(HANG)
    report = json.loads(qt("scan", "--format", "json", str(log)).stdout)
    assert report["diagnoses"] == []
    (item,) = report["unrecognised"]
    assert item["kind"] == "stall" and item["count"] == 5 and item["evidence"]["line"] == 7
    assert "NCCL / distributed init" in item["template"] and "NCCL_P2P_DISABLE" in item["hint"]
    text = qt("scan", str(log)).stdout
    assert text.count("(5x)") == 1, text  # the count is said once, not in the template and again after it


def test_heartbeats_the_launch_got_past_are_no_stall(tmp_path: Path) -> None:
    log = tmp_path / "ok.log"
    log.write_text(HANG + "".join(f"INFO 03-05 18:07:{i:02d} engine.py:1] step {i}\n" for i in range(60))
                   + "INFO:     Application startup complete.\n")
    assert json.loads(qt("scan", "--format", "json", str(log)).stdout)["unrecognised"] == []


@pytest.mark.parametrize("waits, ready", [
    # TGI's launcher polls its shards while they load, then a shard reports ready
    ("".join(f"2024-10-16T10:49:{i:02d}.389065Z  INFO shard-manager: text_generation_launcher: Waiting for shard to "
             f"be ready... rank={i % 4}\n" for i in range(8)),
     "2024-10-16T10:49:21.102335Z  INFO shard-manager: text_generation_launcher: Shard ready in 20.12s rank=0\n"),
    # Ollama's debug log while the runner loads, then the runner answers
    ("".join(f'time=2025-08-20T11:41:24.{i}79Z level=DEBUG source=server.go:1278 msg="model load progress 0.{i}7"\n'
             for i in range(6)),
     'time=2025-08-20T11:41:27.123Z level=INFO source=server.go:1272 msg="llama runner started in 5.27 seconds"\n'),
])
def test_a_ready_line_right_after_the_waits_ends_the_stall(tmp_path: Path, waits: str, ready: str) -> None:
    log = tmp_path / "waits.log"
    log.write_text(waits)
    (item,) = json.loads(qt("scan", "--format", "json", str(log)).stdout)["unrecognised"]
    assert item["kind"] == "stall"  # the input ends in the wait: where it stopped
    log.write_text(waits + ready)
    assert json.loads(qt("scan", "--format", "json", str(log)).stdout)["unrecognised"] == []
