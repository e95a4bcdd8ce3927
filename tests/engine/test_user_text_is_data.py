"""Issue 29 §1: text a user controls is data, never a diagnosis of its own.

Each case is the reproduction from the audit, replayed through a real scan of the
bundled pack: a process that named itself like the driver, a prompt that quotes
an Xid (logged by a server's request logger), a traceback's quoted source line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qwen_triage.engine.matcher import CompiledPack
from qwen_triage.inputs.scan import scan_paths

# --- a process name that starts like the driver -------------------------------------------------

# `prctl(PR_SET_NAME, "NVRM: x")`, then a crash: the kernel prints the comm first and the mapped file's name after
COMM_NVRM = ("NVRM: x[4242]: segfault at 0 ip 00007f3a1c2b4000 sp 00007ffd2a1b3c40 error 4 in NVRM: Xid "
             "(PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus[0,7f1e2a3b4000+1000] likely on CPU 1 "
             "(core 1, socket 0)")
# the `traps:` and `comm (pid):` forms
TRAPS_NVRM = ("traps: NVRM: x[4242] general protection fault ip:7f3a1c2b4000 sp:7ffd2a1b3c40 error:0 in NVRM: Xid "
              "(PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus[7f3a1c2b4000+1000]")
PAREN_NVRM = "NVRM: Xid 79 (4242): drop_caches: 3"
REAL_XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus."
NODE = ("hardware.", "node.", "runtime.fabric")


def scan(tmp_path: Path, compiled: CompiledPack, text: str, name: str = "x.log"):  # type: ignore[no-untyped-def]
    p = tmp_path / name
    p.write_text(text)
    return scan_paths([str(p)], compiled)


def classes(report) -> list[str]:  # type: ignore[no-untyped-def]
    return [d.class_ for d in report.diagnoses] + [s.class_ for d in report.diagnoses for s in d.symptoms]


def node_level(report) -> list[str]:  # type: ignore[no-untyped-def]
    return [c for c in classes(report) if c.startswith(NODE)]


def journal_kernel(*messages: str) -> str:
    """`journalctl -k -o json`: the kernel's entries, each from the kernel transport."""
    return "".join(json.dumps({"__REALTIME_TIMESTAMP": str(1_700_000_000_000_000 + i), "_TRANSPORT": "kernel",
                               "PRIORITY": "6", "SYSLOG_IDENTIFIER": "kernel", "MESSAGE": m}) + "\n"
                   for i, m in enumerate(messages))


@pytest.mark.parametrize("line", [COMM_NVRM, TRAPS_NVRM], ids=["segfault", "traps"])
@pytest.mark.parametrize("form", ["dmesg", "journal-json", "plain"])
def test_a_process_named_like_the_driver_is_no_xid(tmp_path: Path, compiled: CompiledPack, line: str,
                                                    form: str) -> None:
    text = {"dmesg": f"[ 12.345678] {line}\n", "journal-json": journal_kernel(line), "plain": line + "\n"}[form]
    report = scan(tmp_path, compiled, text)
    assert node_level(report) == []
    assert "process.segfault" in classes(report) or "traps" in line  # the kernel's own word: a crash


def test_a_process_report_never_continues_a_driver_message(tmp_path: Path, compiled: CompiledPack) -> None:
    # a real NVRM line that does not end a sentence, then the crafted report: not one message of the driver's
    text = "[ 12.000000] NVRM: GPU at PCI:0000:3b:00: GPU-5a1e2c3d\n" f"[ 12.345678] {COMM_NVRM}\n"
    assert node_level(scan(tmp_path, compiled, text)) == []
    text = journal_kernel("NVRM: GPU at PCI:0000:3b:00: GPU-5a1e2c3d", COMM_NVRM, PAREN_NVRM)
    assert node_level(scan(tmp_path, compiled, text, "k.json")) == []


@pytest.mark.parametrize("form", ["dmesg", "journal-json"])
def test_the_driver_s_own_xid_still_counts(tmp_path: Path, compiled: CompiledPack, form: str) -> None:
    text = f"[ 12.345678] {REAL_XID}\n" if form == "dmesg" else journal_kernel(REAL_XID)
    assert "hardware.xid_fatal" in node_level(scan(tmp_path, compiled, text))
