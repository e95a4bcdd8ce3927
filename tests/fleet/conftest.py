from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

XID79 = "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus.\n"
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.15 GiB of which 1.2 GiB is free.\n")
QUIET = "vllm serve: INFO 01-07 10:00:00 engine.py:267] Added request chatcmpl-1.\n"


class BootId:
    """A boot id file the check reads instead of /proc (QWEN_TRIAGE_BOOT_ID_FILE)."""

    def __init__(self, path: Path):
        self.path = path
        self.reboot()

    def reboot(self) -> str:
        self.value = str(uuid.uuid4())
        self.path.write_text(self.value + "\n")
        return self.value


@pytest.fixture
def boot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> BootId:
    b = BootId(tmp_path / "boot_id")
    monkeypatch.setenv("QWEN_TRIAGE_BOOT_ID_FILE", str(b.path))
    return b


def check_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "qwen_triage", "check", *args]


def run_check_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(check_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def warm_cli(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Compile the rule pack once into the session's cache, so timed runs measure a check, not the compile."""
    d = tmp_path_factory.mktemp("warm")
    (d / "x.log").write_text(QUIET)
    # `check --timeout` covers loading: warm the whole pack first, as the NPD image does
    subprocess.run([sys.executable, "-m", "qwen_triage", "rules", "warm"], capture_output=True, timeout=600,
                   stdin=subprocess.DEVNULL, check=False)
    run_check_cli("--file", str(d / "x.log"), "--state", str(d / "state"), timeout=300)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "components: starts real node_exporter, Prometheus or Slurm daemons on 127.0.0.1")


def bundled_policy():  # type: ignore[no-untyped-def]
    """The node policy of the bundled class catalogue (rules/classes.yaml), as a check's pack gives it."""
    from qwen_triage.fleet.policy import NodePolicy
    from qwen_triage.rulepack.pack import load_classes
    from qwen_triage.rulepack.paths import CLASSES_FILE, bundled_rules_dir

    return NodePolicy.of(load_classes(bundled_rules_dir() / CLASSES_FILE))
