"""Issue 10 item 3: no orphans. `kill -9` of the wrapper (`run`, or relaunch's launch of the server) leaves no
process of the child and no bound port; a double-forked `setsid` daemon does not survive a clean stop either.

The child (fixtures/live/daemon_port.py) listens on one port and leaves a daemon, in a session of its own, on
another: the cases the process group alone cannot reach.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time

import pytest

from tests.live.helpers import Live, assert_all_gone, eventually, fixture, qt_argv, read_pids

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process semantics")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def child(tmp_path, *extra: str) -> tuple[list[str], int, int]:
    port, dport = free_port(), free_port()
    argv = fixture("daemon_port.py", "--pidfile", str(tmp_path / "pids"), "--port", str(port),
                   "--daemon-port", str(dport), *extra)
    return argv, port, dport


def run_argv(tmp_path, argv: list[str]) -> list[str]:
    return qt_argv("run", "--stall", "0", "--grace", "1", "--log", str(tmp_path / "r.log"), "--", *argv)


def _sigkill_wrapper_and_check(tmp_path, live: Live, port: int, dport: int) -> None:
    try:
        pids = read_pids(tmp_path / "pids", 2, timeout=60, proc=live.proc)
        assert not port_free(port) and not port_free(dport)
        os.kill(live.proc.pid, signal.SIGKILL)  # the wrapper alone, as the OOM killer or `kill -9 PID` would
        live.wait(10)
        assert_all_gone(pids, timeout=5)  # (kills what is left, so a failure leaves nothing behind)
        assert eventually(lambda: port_free(port) and port_free(dport), timeout=5), "a port is still bound"
    finally:
        live.kill()


@pytest.mark.parametrize("ignore_term", [False, True])
def test_kill_9_of_run_leaves_no_process_and_no_port(tmp_path, ignore_term: bool) -> None:
    argv, port, dport = child(tmp_path, *(["--ignore-term"] if ignore_term else []))
    live = Live(run_argv(tmp_path, argv))
    _sigkill_wrapper_and_check(tmp_path, live, port, dport)


def test_clean_stop_of_run_stops_the_double_forked_daemon(tmp_path) -> None:
    argv, port, dport = child(tmp_path, "--ignore-term")
    live = Live(run_argv(tmp_path, argv))
    try:
        pids = read_pids(tmp_path / "pids", 2, timeout=60, proc=live.proc)
        live.proc.send_signal(signal.SIGTERM)
        rc = live.wait(20)
    finally:
        live.kill()
    assert rc == 128 + signal.SIGKILL  # the main process ignored SIGTERM: killed after the grace
    assert_all_gone(pids, timeout=3)
    assert port_free(port) and port_free(dport)


_SUPERVISE = """
import sys
from qwen_triage.live.supervisor import Supervisor
sup = Supervisor(sys.argv[1:], grace=0.5, subreaper=True)
sup.start()
print("status", sup.wait(30), flush=True)
"""


def test_daemon_is_stopped_when_the_child_exits_by_itself(tmp_path) -> None:
    """The child leaves only the daemon (another session, re-parented to the wrapper): it is found and stopped.

    In a process of its own: the subreaper bit would otherwise stay on pytest for the rest of the session.
    """
    port, dport = free_port(), free_port()
    pidfile = tmp_path / "pids"
    script = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, {fixture('daemon_port.py')[1]!r}, '--pidfile', {str(pidfile)!r},"
        f" '--port', '{port}', '--daemon-port', '{dport}'])\n"
        "time.sleep(1.5)\n"
    )
    live = Live([sys.executable, "-c", _SUPERVISE, sys.executable, "-c", script])
    try:
        pids = read_pids(pidfile, 2, timeout=60)
        assert live.wait(30) == 0
    finally:
        live.kill()
    assert "status 0" in live.out.text
    assert_all_gone(pids, timeout=3)
    assert port_free(port) and port_free(dport)


_RELAUNCH_LAUNCH = """
import sys, time
from pathlib import Path
from qwen_triage.live.procs import set_child_subreaper
from qwen_triage.runner.attempt import DetachedServer, SupervisedServer
set_child_subreaper()
argv, log = sys.argv[3:], Path(sys.argv[2])
import os
env = dict(os.environ)
if sys.argv[1] == "detached":
    server = DetachedServer(argv, env, log, stall=None, grace=1.0)
else:
    server = SupervisedServer(argv, env, log, compiled=None, stall=None, grace=1.0)
server.start()
print("started", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("kind", ["supervised", "detached"])
def test_kill_9_of_relaunch_leaves_no_process_and_no_port(tmp_path, kind: str) -> None:
    argv, port, dport = child(tmp_path, "--ignore-term")
    live = Live([sys.executable, "-c", _RELAUNCH_LAUNCH, kind, str(tmp_path / "attempt-1.log"), *argv])
    live.out.wait_for("started", timeout=60)
    _sigkill_wrapper_and_check(tmp_path, live, port, dport)


def test_detached_server_outlives_a_runner_that_exits_in_order(tmp_path) -> None:
    """--detach: a runner that ends normally leaves the (ready) server running: the guard is disarmed at exit."""
    argv, port, dport = child(tmp_path)
    script = _RELAUNCH_LAUNCH.replace("time.sleep(600)", "sys.exit(0)")
    live = Live([sys.executable, "-c", script, "detached", str(tmp_path / "attempt-1.log"), *argv])
    try:
        pids = read_pids(tmp_path / "pids", 2, timeout=60)
        assert live.wait(10) == 0
        time.sleep(1.0)
        assert not port_free(port) and not port_free(dport)
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        live.kill()
