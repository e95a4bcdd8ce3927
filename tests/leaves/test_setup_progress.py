"""Issue 29 §3: setup-vllm.sh's progress line says what pip is doing, not its last line over and over."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.conftest import ROOT

# pip as a slow install prints it: an uninstall, then a resolve and a long download with nothing after
FAKE_PIP = """
echo 'Found existing installation: setuptools 65.5.0'
echo '  Successfully uninstalled setuptools-65.5.0'
sleep 1.5
echo 'Collecting vllm==0.32.0'
echo '  Downloading torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl (190.2 MB)'
mkdir -p "$VENV/lib" && head -c 2097152 /dev/zero > "$VENV/lib/blob"
sleep 2.5
"""


def test_progress_names_pips_latest_action_with_time_and_venv_growth(tmp_path: Path) -> None:
    (tmp_path / "pip.sh").write_text(FAKE_PIP)
    script = f"""
set -euo pipefail
log() {{ printf '[setup-vllm] %s\\n' "$*" >&2; }}
die() {{ log "ERROR: $*"; exit 1; }}
setup_log={tmp_path / 'setup.log'}; venv={tmp_path / 'venv'}; PROGRESS_EVERY=1
export VENV="$venv"
. {ROOT / 'scripts' / 'setup-progress.sh'}
run_logged bash {tmp_path / 'pip.sh'}
"""
    cp = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    lines = [ln for ln in cp.stderr.splitlines() if "in this step" in ln]
    assert lines, cp.stderr
    grown = re.search(r"venv (\d+) MiB", lines[-1])
    assert "Downloading torch-2.13.0" in lines[-1] and grown and int(grown[1]) >= 2
    assert not any("Successfully uninstalled" in ln for ln in lines)  # an action line is shown instead
    seconds = [int(ln.split("... ", 1)[1].split("s in this step", 1)[0]) for ln in lines]
    assert seconds == sorted(seconds) and seconds[-1] >= 3
