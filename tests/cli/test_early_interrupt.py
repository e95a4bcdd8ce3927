"""A Ctrl-C that Python swallows during start-up still stops `relaunch` and `run`.

Python raises KeyboardInterrupt wherever the main thread is; inside a weakref callback (the import
machinery has them) the interpreter prints "Exception ignored" and goes on. Seen for real: Ctrl-C
0.44 s after `qwen-triage relaunch --apply …` started, and the server came up and served. Here the
swallowing is made certain: the signal is delivered inside a weakref callback before the command runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from qwen_triage import interrupts
from tests.runner.helpers import FAKE_VLLM, free_port, make_model
from tests.sigint import default_sigint
from tests.timelimits import scaled

# The console script's first steps, then a SIGINT delivered where Python can only ignore it.
SWALLOW = """
import os, signal, sys, weakref
from qwen_triage import interrupts
interrupts.install()

class Gone:
    pass

g = Gone()
ref = weakref.ref(g, lambda _r: os.kill(os.getpid(), signal.SIGINT))
del g  # the handler runs inside the callback: KeyboardInterrupt is printed as ignored
print("still running after the swallowed Ctrl-C", file=sys.stderr, flush=True)
from qwen_triage.cli.main import main
sys.argv = ["qwen-triage", *sys.argv[1:]]
main()
"""


def _start(args: list[str], tmp_path) -> subprocess.Popen[str]:  # type: ignore[no-untyped-def]
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    return subprocess.Popen([sys.executable, "-c", SWALLOW, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=default_sigint)


def _finish(p: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        _, err = p.communicate(timeout=scaled(30))
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        _, err = p.communicate()
        raise AssertionError(f"the swallowed Ctrl-C was lost: still running\n{err}") from None
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # whatever it started, if anything was left
        except ProcessLookupError:
            pass
    return p.returncode, err


def test_relaunch_launches_nothing_after_a_swallowed_ctrl_c(tmp_path) -> None:
    model = make_model(tmp_path / "good")
    p = _start(["relaunch", "--apply", "--no-preflight", "--env", "VLLM_TARGET_DEVICE=cpu", "--", str(FAKE_VLLM),
                "serve", str(model), "--host", "127.0.0.1", "--port", str(free_port())], tmp_path)
    code, err = _finish(p)
    assert "Exception ignored" in err and "still running after the swallowed Ctrl-C" in err  # it was swallowed
    assert code == 130, err
    assert "SIGINT: stopping" in err
    assert "attempt 1/" not in err and "serving on" not in err  # nothing launched


def test_run_stops_its_child_after_a_swallowed_ctrl_c(tmp_path) -> None:
    child = "import time; print('child up', flush=True); time.sleep(600)"
    p = _start(["run", "--log", str(tmp_path / "run.log"), "--", sys.executable, "-c", child], tmp_path)
    code, err = _finish(p)
    assert "still running after the swallowed Ctrl-C" in err
    # the Ctrl-C came before the child existed: it is not started at all (issue 29: exit 130, as later)
    assert "SIGINT before" in err and "not started" in err and "child up" not in err
    assert code == 128 + signal.SIGINT, err


def test_the_note_is_taken_once_and_python_behaviour_is_kept() -> None:
    assert interrupts.take_pending() is None
    with pytest.raises(KeyboardInterrupt):
        interrupts.note_and_raise(signal.SIGINT, None)
    assert interrupts.take_pending() == signal.SIGINT
    assert interrupts.take_pending() is None


# -- issue 29 §2: a Ctrl-C in the first second of `run` is exit 130, and nothing is left running ----------------

# the console script with a SIGINT delivered at one chosen point of its start-up
AT_POINT = """
import builtins, os, signal, sys
where, marker = sys.argv[1], sys.argv[2]
sys.argv = ["qwen-triage", "run", "--", sys.executable, "-c", "import time; time.sleep(600)", marker]
real_import = builtins.__import__
def hooked(name, *a, **k):
    if name == where:
        builtins.__import__ = real_import
        os.kill(os.getpid(), signal.SIGINT)
    return real_import(name, *a, **k)
builtins.__import__ = hooked
from qwen_triage.cli.entry import main
main()
"""


@pytest.mark.parametrize("where", [
    "qwen_triage.cli.main",  # the command line is still importing
    "qwen_triage.live.run",  # click is inside the `run` command, before its handlers
    "qwen_triage.engine.scanner",  # the rule pack is loading, the handlers are in
])
def test_ctrl_c_at_start_up_is_130_and_starts_no_child(tmp_path, where: str) -> None:  # type: ignore[no-untyped-def]
    marker = f"qt-early-{os.getpid()}-{where}"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    p = subprocess.Popen([sys.executable, "-c", AT_POINT, where, marker], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=default_sigint)
    code, err = _finish(p)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert code == 130, err
    assert "Traceback" not in err
    assert left == [], f"a child was left running: {left}"
