"""Issue 29 §2: every token shape in every output — scan's three formats, `report`, `check`'s formats and textfile.

The log puts each secret both on an error line no rule explains (it reaches the "other errors" summary as a
template, where digits become ``<N>``) and on a diagnosed evidence line (an OOM), so both paths are held.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_triage.engine.unrecognised import template_of
from qwen_triage.redact import redact_text

SECRETS = {
    "slack bot": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "slack user": "xoxp-987654321098-9876543210987-ZyXwVuTsRqPoNmLkJiHgFeDc",
    "gitlab": "glpat-Ab3dEf6hIj9kLm2nOp5q",
    "google": "AIzaSyB1c2D3e4F5g6H7i8J9k0LmNoPqRsTuVwX",
    "npm": "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "redis password": "Hunt3r2redisPw",
}
LINES = [
    "ERROR 12-01 10:00:01 [notify.py:12] slack webhook failed with token {slack bot}",
    "ERROR 12-01 10:00:02 [notify.py:12] slack user token {slack user} rejected",
    "ERROR 12-01 10:00:03 [hub.py:40] clone with glpat {gitlab} refused",
    "ERROR 12-01 10:00:04 [geo.py:7] maps key {google} over quota",
    "ERROR 12-01 10:00:05 [pkg.py:3] registry token {npm} expired",
    "ERROR 12-01 10:00:06 [cache.py:9] cannot reach redis://:{redis password}@10.0.0.2:6379/0",
]
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.15 GiB of which 1.2 GiB is free. callback=redis://:{redis password}@10.0.0.2 key={google} {slack bot}")


def secret_log(path: Path) -> Path:
    path.write_text("".join(line.format(**SECRETS) + "\n" for line in [*LINES, OOM]))
    return path


def leaked(text: str) -> list[str]:
    return [name for name, secret in SECRETS.items() if secret in text]


@pytest.mark.parametrize("name", list(SECRETS))
def test_each_shape_is_masked_in_free_text_and_in_a_template(name: str) -> None:
    line = f"ERROR failed with {SECRETS[name]}" if name != "redis password" else \
        f"ERROR cannot reach redis://:{SECRETS[name]}@host:6379"
    assert SECRETS[name] not in redact_text(line)
    template = template_of(line)
    # no piece of the secret longer than its shape's prefix survives templating
    assert not any(part in template for part in SECRETS[name].split("-")[1:] if len(part) > 6), template
    assert "***" in template


def qt(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QWEN_TRIAGE_STATE": str(tmp / "state")}
    return subprocess.run([sys.executable, "-m", "qwen_triage", *args], capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL, env=env)


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_scan_outputs_hold_no_secret(tmp_path: Path, fmt: str) -> None:
    cp = qt("scan", "--format", fmt, str(secret_log(tmp_path / "server.log")), tmp=tmp_path)
    assert cp.returncode == 1, cp.stderr  # the OOM is diagnosed
    assert "out of memory" in cp.stdout.lower() or "memory" in cp.stdout.lower()
    assert leaked(cp.stdout + cp.stderr) == []


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_report_holds_no_secret(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"report.{fmt}"
    cp = qt("report", "--format", fmt, "--out", str(out), str(secret_log(tmp_path / "server.log")), tmp=tmp_path)
    assert cp.returncode in (0, 1), cp.stderr
    assert leaked(out.read_text() + cp.stdout + cp.stderr) == []


@pytest.mark.parametrize("fmt", ["npd", "text", "json"])
def test_check_outputs_and_textfile_hold_no_secret(tmp_path: Path, fmt: str) -> None:
    prom = tmp_path / "qwen_triage.prom"
    cp = qt("check", "--file", str(secret_log(tmp_path / "server.log")), "--state", str(tmp_path / "st"),
            "--textfile", str(prom), "--format", fmt, "--timeout", "120", tmp=tmp_path)
    assert cp.returncode in (0, 1), cp.stderr
    assert prom.exists()
    assert leaked(cp.stdout + cp.stderr + prom.read_text()) == []
