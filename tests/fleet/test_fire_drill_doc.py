"""Issue 29 §3: docs/fleet.md's fire drill works verbatim: Xid → textfile series → clear → series gone."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def doc_block(name: str) -> list[str]:
    """The commands (``# …`` lines) of the console block between ``<!-- name -->`` and ``<!-- /name -->``."""
    text = (ROOT / "docs" / "fleet.md").read_text()
    block = re.search(rf"<!-- {name} -->\n```console\n(.*?)```\n<!-- /{name} -->", text, re.S)
    assert block, f"docs/fleet.md has no {name} block"
    return [line[2:].split("  #", 1)[0].rstrip() for line in block[1].splitlines() if line.startswith("# ")]


def test_the_fire_drill_runs_verbatim(tmp_path: Path) -> None:
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "qwen-triage").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m qwen_triage "$@"\n')
    (shims / "qwen-triage").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("QWEN_TRIAGE_KMSG", "QWEN_TRIAGE_BOOT_ID_FILE")}
    env.update(PATH=f"{shims}{os.pathsep}{env['PATH']}", TMPDIR=str(tmp_path), PYTHONPATH=str(ROOT))
    script = "set -e\n" + "\n".join(doc_block("drill")) + "\n"
    cp = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=600,
                        stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, cp.stderr
    out = cp.stdout
    first, cleared = out.split("exit 1\n", 1)
    assert "status: problem" in first and "hardware.xid_fatal [kernel.xid" in first and "until reboot" in first
    assert "source kernel (kmsg)" in first  # the file it read, not /dev/kmsg
    assert 'class="hardware.xid_fatal"' in cleared.split("status: ok", 1)[0]  # the series was written
    assert "status: ok" in cleared and "cleared  hardware.xid_fatal" in cleared
    assert cleared.rstrip().splitlines()[-1] == "0"  # the textfile no longer has it
