"""The console script leaves without the interpreter's teardown, and loses nothing by it."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import FIXTURES


def _leave(body: str) -> subprocess.CompletedProcess[str]:
    code = "import atexit, sys, threading, time\nfrom qwen_triage.cli.exiting import leave as _leave\n" + body
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_status_output_and_atexit_callbacks_all_survive_the_quick_exit() -> None:
    done = _leave("atexit.register(lambda: print('atexit ran'))\nsys.stdout.write('unflushed')\n_leave(4)\n")
    assert done.returncode == 4
    assert done.stdout == "unflushedatexit ran\n"


def test_a_message_status_is_printed_and_exits_1_as_python_does() -> None:
    done = _leave("_leave('qwen-triage: cannot read x')\n")
    assert (done.returncode, done.stderr) == (1, "qwen-triage: cannot read x\n")
    assert _leave("_leave(None)\n").returncode == 0


def test_with_another_thread_alive_the_normal_exit_waits_for_it() -> None:
    done = _leave("threading.Thread(target=lambda: (time.sleep(0.3), print('worker finished', flush=True))).start()\n"
                  "_leave(3)\n")
    assert (done.returncode, done.stdout) == (3, "worker finished\n")


def test_a_scan_reports_whole_and_exits_with_its_status() -> None:
    log = FIXTURES / "examples" / "qwen32b-tp6-vllm.log"
    done = subprocess.run([sys.executable, "-m", "qwen_triage", "scan", "--format", "json", str(log)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1  # a diagnosis
    assert done.stdout.rstrip().endswith("}") and '"diagnoses"' in done.stdout
