"""Issue 20: attacks on the fleet check, each replayed through the real check (or the real reader it uses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qwen_triage.fleet.slurm import NODE_CLASSES, apply

from .conftest import BootId, XID79, run_check_cli
from .test_state import append_journal, fake_journal, journal_entry  # noqa: F401 - fixture

# (a) a program maps a file named like an Xid message and crashes: the kernel prints its name
SEGFAULT_XID = ("python3[4242]: segfault at 0 ip 00007f3a1c2b4000 sp 00007ffd2a1b3c40 error 4 in "
                "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus"
                "[7f3a1c2b4000+1000]")
# the same with a task name chosen to read as an Oops (the kernel puts the comm first)
SEGFAULT_OOPS = "Oops: 0000 [#1][4242]: segfault at 0 ip 00007f3a1c2b4000 sp 00007ffd2a1b3c40 error 4 in libc.so.6"
# (b) a user's prompt quoting an Xid and a CUDA ECC error, logged by vLLM's request logger and by Ollama
VLLM_PROMPT = ("INFO 12-01 10:00:00 [logger.py:39] Received request cmpl-7f: prompt: 'my node said NVRM: Xid "
               "(PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus and CUDA error: uncorrectable "
               "ECC error encountered, what now?', params: SamplingParams(n=1, temperature=0.7)")
OLLAMA_PROMPT = ('time=2026-12-01T10:00:00.000Z level=DEBUG source=routes.go:1500 msg="chat request" '
                 'prompt="[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off '
                 'the bus. CUDA error: uncorrectable ECC error encountered"')


def kmsg_file(path: Path, *messages: str) -> Path:
    """A file in /dev/kmsg's record format, read by the check's real kmsg reader (QWEN_TRIAGE_KMSG)."""
    path.write_text("".join(f"3,{i + 1},{(i + 1) * 1000},-;{m}\n" for i, m in enumerate(messages)))
    return path


def check_json(*args: str, env: dict[str, str] | None = None) -> dict:
    cp = run_check_cli(*args, "--format", "json", env=env)
    assert cp.returncode in (0, 1), cp.stderr
    return json.loads(cp.stdout)


def node_classes(result: dict) -> list[str]:
    return [d["class"] for d in result["active"]
            if d["class"] in NODE_CLASSES or d["class"].startswith(("hardware.", "node."))]


class NoScontrol:
    """A stand-in for scontrol that answers `show node` and records any update: no real node is touched."""

    def __init__(self) -> None:
        self.updates: list[list[str]] = []

    def __call__(self, args):  # type: ignore[no-untyped-def]
        if list(args[:3]) == ["scontrol", "show", "node"]:
            return subprocess.CompletedProcess(args, 0, "NodeName=gpu-7 State=IDLE Reason=(null)\n", "")
        self.updates.append(list(args))
        return subprocess.CompletedProcess(args, 0, "", "")


def test_segfault_report_naming_an_xid_drains_nothing(tmp_path: Path, boot: BootId) -> None:
    kmsg = kmsg_file(tmp_path / "kmsg", SEGFAULT_XID, SEGFAULT_OOPS)
    result = check_json("--kernel", "--state", str(tmp_path / "st"), env={"QWEN_TRIAGE_KMSG": str(kmsg)})
    assert node_classes(result) == []
    assert "process.segfault" in [d["class"] for d in result["active"]]  # the kernel's own word: a crash
    from qwen_triage.fleet.state import ActiveDiagnosis

    runner = NoScontrol()
    outcome = apply([ActiveDiagnosis.model_validate(d) for d in result["active"]], "gpu-7", runner=runner)
    assert outcome.action == "none" and runner.updates == []


def test_a_real_kernel_xid_still_drains(tmp_path: Path, boot: BootId) -> None:
    kmsg = kmsg_file(tmp_path / "kmsg", XID79.split("] ", 1)[1].strip())
    result = check_json("--kernel", "--state", str(tmp_path / "st"), env={"QWEN_TRIAGE_KMSG": str(kmsg)})
    assert node_classes(result) == ["hardware.xid_fatal"]
    assert result["active"][0]["until_boot"] is True


@pytest.mark.parametrize("line", [VLLM_PROMPT, OLLAMA_PROMPT], ids=["vllm-request-logger", "ollama"])
def test_a_quoted_xid_in_a_server_log_file_is_not_node_level(tmp_path: Path, boot: BootId, line: str) -> None:
    log = tmp_path / "server.log"
    log.write_text(line + "\n")
    result = check_json("--file", str(log), "--state", str(tmp_path / "st"))
    assert node_classes(result) == []
    assert any("node-level classes come only from the kernel" in n for n in result["notes"])


@pytest.mark.parametrize("line", [VLLM_PROMPT, OLLAMA_PROMPT], ids=["vllm-request-logger", "ollama"])
def test_a_quoted_xid_in_a_server_journal_unit_is_not_node_level(tmp_path: Path, boot: BootId, fake_journal: Path,  # noqa: F811
                                                                 line: str) -> None:
    entry = journal_entry(1, line, time.time(), transport="stdout")
    entry.update({"SYSLOG_IDENTIFIER": "ollama", "_SYSTEMD_UNIT": "ollama.service", "_PID": "812"})
    append_journal(fake_journal, entry)
    # a process that names itself "kernel" is not the kernel either
    spoof = journal_entry(2, XID79.split("] ", 1)[1].strip(), time.time(), transport="syslog")
    spoof.update({"SYSLOG_IDENTIFIER": "kernel", "_PID": "4242", "_COMM": "logger"})
    append_journal(fake_journal, spoof)
    result = check_json("--journal", "ollama", "--state", str(tmp_path / "st"))
    assert result["sources"][0]["lines"] == 2
    assert node_classes(result) == []


def test_one_xid_line_counts_once(tmp_path: Path, boot: BootId) -> None:
    log = tmp_path / "kern.log"
    log.write_text(XID79)  # two rules read it (the Xid table and "fallen off the bus"): one line of evidence
    result = check_json("--file", str(log), "--state", str(tmp_path / "st"))
    assert [(d["class"], d["count"]) for d in result["active"]] == [("hardware.xid_fatal", 1)]
    with open(log, "a") as fh:
        fh.write(XID79)
    result = check_json("--file", str(log), "--state", str(tmp_path / "st"))
    assert [(d["class"], d["count"]) for d in result["active"]] == [("hardware.xid_fatal", 2)]
