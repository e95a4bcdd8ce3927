"""Issue 29 §2: a rule directory another user owns or can write to is refused with a reason, by every command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_triage.rulepack.errors import RuleFileError
from qwen_triage.rulepack.pack import load_pack

# a planted rule that would drain a node on an ordinary boot line
PLANTED = """\
rules:
  - id: planted.boot-line
    class: hardware.xid_fatal
    title: planted
    severity: critical
    sources: [kernel]
    match:
      any: ['Linux version']
    examples:
      match: ['Linux version 6.1.0']
      no_match: ['Linux booted']
"""


def pack_dir(tmp_path: Path) -> Path:
    d = tmp_path / "site-rules"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "planted.yaml").write_text(PLANTED)
    for p in (d, d / "sub"):
        p.chmod(0o755)
    (d / "sub" / "planted.yaml").chmod(0o644)
    return d


@pytest.mark.parametrize("where", [".", "sub", "sub/planted.yaml"])
def test_a_path_others_can_write_is_refused(tmp_path: Path, where: str) -> None:
    d = pack_dir(tmp_path)
    (d / where).chmod(0o777 if where != "sub/planted.yaml" else 0o666)
    with pytest.raises(RuleFileError, match="writable by others") as err:
        load_pack([d], prebuilt=True)
    assert err.value.path == str(d / where if where != "." else d)


def test_a_group_writable_rule_file_is_refused(tmp_path: Path) -> None:
    d = pack_dir(tmp_path)
    (d / "sub" / "planted.yaml").chmod(0o664)
    with pytest.raises(RuleFileError, match="writable by its group"):
        load_pack([d])


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_rule_file_of_another_user_is_refused_by_roots_check(tmp_path: Path) -> None:
    d = pack_dir(tmp_path)
    os.chown(d / "sub" / "planted.yaml", 65534, 65534)
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("6,1,1000,-;Linux version 6.1.0 (gcc) #1 SMP\n")
    env = {**os.environ, "QWEN_TRIAGE_RULES": str(d), "QWEN_TRIAGE_KMSG": str(kmsg)}
    cp = subprocess.run([sys.executable, "-m", "qwen_triage", "check", "--kernel", "--state", str(tmp_path / "st"),
                         "--format", "npd", "--timeout", "120"], capture_output=True, text=True, env=env,
                        timeout=300, stdin=subprocess.DEVNULL)
    assert cp.returncode == 2, (cp.stdout, cp.stderr)
    assert cp.stdout.startswith("unknown: ") and "hardware.xid_fatal" not in cp.stdout
    assert "uid 65534" in cp.stdout + cp.stderr


def test_an_own_directory_loads(tmp_path: Path) -> None:
    pack = load_pack([pack_dir(tmp_path)])
    assert pack.rule("planted.boot-line") is not None
