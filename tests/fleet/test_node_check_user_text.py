"""Issue 29 §1: the node check takes no node fault from text a user chose.

Replayed through the real `check` (a subprocess, the kernel log fed through QWEN_TRIAGE_KMSG or a fake
journalctl): a process that named itself `NVRM: x`, a journal entry that names itself the fabric manager.
"""

from __future__ import annotations

import time
from pathlib import Path

from .conftest import BootId
from .test_node_check_cannot_be_tricked import check_json, kmsg_file, node_classes
from .test_state import append_journal, fake_journal, journal_entry  # noqa: F401 - fixture

# prctl(PR_SET_NAME, "NVRM: x") and a crash: the kernel's segfault report puts the comm first
COMM_NVRM = ("NVRM: x[4242]: segfault at 0 ip 00007f3a1c2b4000 sp 00007ffd2a1b3c40 error 4 in NVRM: Xid "
             "(PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus[0,7f1e2a3b4000+1000] likely on CPU 1 "
             "(core 1, socket 0)")
REAL_NVRM_HEAD = "NVRM: GPU at PCI:0000:3b:00: GPU-5a1e2c3d"  # a driver line that does not end a sentence


def test_a_process_named_nvrm_is_no_xid_in_kmsg(tmp_path: Path, boot: BootId) -> None:
    kmsg = kmsg_file(tmp_path / "kmsg", COMM_NVRM, REAL_NVRM_HEAD, COMM_NVRM)
    result = check_json("--kernel", "--state", str(tmp_path / "st"), env={"QWEN_TRIAGE_KMSG": str(kmsg)})
    assert node_classes(result) == []
    assert "process.segfault" in [d["class"] for d in result["active"]]


def test_a_process_named_nvrm_is_no_xid_in_the_journal_s_kernel_entries(tmp_path: Path, boot: BootId,
                                                                         fake_journal: Path) -> None:  # noqa: F811
    now = time.time()
    append_journal(fake_journal, journal_entry(1, COMM_NVRM, now), journal_entry(2, REAL_NVRM_HEAD, now),
                   journal_entry(3, COMM_NVRM, now))
    result = check_json("--kernel", "--state", str(tmp_path / "st"))
    assert result["sources"][0]["lines"] == 3
    assert node_classes(result) == []


# -- a journal entry that names itself the fabric manager ---------------------------------------------------------

FM_FATAL = ("detected NVSwitch fatal error 20034 on fid 0 on NVSwitch pci bus id 00000000:86:00.0 physical id 3 "
            "port 33")


def fm_entry(i: int, **fields: str) -> dict[str, str]:
    entry = journal_entry(i, FM_FATAL, time.time(), transport="syslog")
    entry.update({"SYSLOG_IDENTIFIER": "nv-fabricmanager", "_PID": "4242", **fields})
    return entry


def test_a_journal_entry_naming_itself_the_fabric_manager_drains_nothing(tmp_path: Path, boot: BootId,
                                                                         fake_journal: Path) -> None:  # noqa: F811
    # `logger -t nv-fabricmanager …` by any user: journald's trusted fields say who really wrote it
    append_journal(fake_journal, fm_entry(1, _COMM="logger", _UID="1000"),
                   fm_entry(2, _COMM="nv-fabricmanager", _UID="1000", _SYSTEMD_UNIT="nvidia-fabricmanager.service"),
                   fm_entry(3, _COMM="logger", _UID="0", _SYSTEMD_UNIT="session-4.scope"))
    result = check_json("--journal", "nvidia-fabricmanager", "--state", str(tmp_path / "st"))
    assert result["sources"][0]["lines"] == 3
    assert node_classes(result) == []


def test_the_fabric_manager_s_own_entry_still_counts(tmp_path: Path, boot: BootId,
                                                     fake_journal: Path) -> None:  # noqa: F811
    append_journal(fake_journal, fm_entry(1, _COMM="nv-fabricmanager", _UID="0",
                                          _SYSTEMD_UNIT="nvidia-fabricmanager.service"))
    result = check_json("--journal", "nvidia-fabricmanager", "--state", str(tmp_path / "st"))
    assert node_classes(result) == ["hardware.nvlink_error"]
