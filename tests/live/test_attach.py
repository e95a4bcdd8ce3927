"""`qwen-triage attach PID` against real processes writing to a file, a pipe, a terminal, a socket."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from qwen_triage.inputs.process import OutputTarget, parse_cgroup
from qwen_triage.live.attach import plan_attach, run_line
from tests.live.helpers import BANNER, FAKEBIN, LIVE, RULES, Live, env_with, fixture, qt_argv, read_pids


def test_cgroup_to_unit() -> None:
    assert parse_cgroup("0::/system.slice/ollama.service\n") == ("ollama.service", False)
    assert parse_cgroup("0::/user.slice/user-1000.slice/user@1000.service/app.slice/vllm.service\n") == (
        "vllm.service", True)
    assert parse_cgroup("12:pids:/\n1:name=systemd:/system.slice/vllm@2.service\n0::/\n") == ("vllm@2.service", False)
    assert parse_cgroup("0::/system.slice/ollama.service/runner\n") == ("ollama.service", False)
    assert parse_cgroup("0::/system.slice/docker-4f1e.scope\n") == (None, False)
    assert parse_cgroup("0::/user.slice/user-1000.slice/session-3.scope\n") == (None, False)


def test_plan() -> None:
    f1 = OutputTarget(1, "/var/log/ollama.log", "file", "/proc/9/fd/1", (1, 2))
    f2 = OutputTarget(2, "/var/log/ollama.log", "file", "/proc/9/fd/2", (1, 2))
    plan = plan_attach([f1, f2], None, has_journal=True)
    assert plan.files == [f1] and not plan.journal  # 2>&1: one file, followed once
    sock = OutputTarget(1, "socket:[77]", "socket", "/proc/9/fd/1")
    assert plan_attach([sock, sock], "ollama.service", True).journal
    assert not plan_attach([sock], "ollama.service", False).readable
    tty = OutputTarget(1, "/dev/pts/3", "terminal", "/proc/9/fd/1")
    pipe = OutputTarget(2, "pipe:[5]", "pipe", "/proc/9/fd/2")
    plan = plan_attach([tty, pipe], None, True)
    assert not plan.readable
    assert "terminal" in plan.messages[0] and "pipe" in plan.messages[1]
    assert run_line(["ollama", "serve"]) == "qwen-triage run -- ollama serve"


def test_attach_to_a_server_logging_to_a_file(tmp_path) -> None:
    logfile, pidfile, go = tmp_path / "ollama.log", tmp_path / "pids", tmp_path / "go"
    with open(logfile, "ab") as out:  # `ollama serve >> ollama.log 2>&1`
        server = subprocess.Popen(fixture("ollama_to_file.py", "--pidfile", str(pidfile), "--go", str(go)),
                                  stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        read_pids(pidfile, 1, proc=server)
        live = Live(qt_argv("attach", str(server.pid), "--rules", str(RULES), "--format", "json"))
        live.err.wait_for("attached to", timeout=30)
        go.touch()  # now the server loads a model: its runner starts, fails and exits
        rc = live.wait(30)  # attach ends when the server does; the server stays unreaped until then
    finally:
        server.kill()
        server.wait()
    pids = {role: pid for pid, role in read_pids(pidfile, 2).items()}
    err = live.err.text
    assert rc == 1, err
    assert f"following {logfile}" in err
    assert BANNER in err and "memory.gpu_oom" in err
    assert f"child process {pids['runner']} (" in err and ") exited with status 2" in err
    assert f"the attached process {server.pid} (" in err and ") exited with status 3" in err
    report = json.loads(live.out.data)
    assert "memory.gpu_oom" in [d["class"] for d in report["diagnoses"]]
    assert report["inputs"][0]["name"] == str(logfile)
    assert any("exited with status 3" in n for n in report["notes"])


def test_attach_to_a_terminal_and_a_pipe_says_what_would_have_worked(tmp_path) -> None:
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--port", "8000"],
                            stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(slave)
    try:
        out = subprocess.run(qt_argv("attach", str(proc.pid)), capture_output=True, timeout=60)
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    assert out.returncode == 2
    err = out.stderr.decode()
    assert "fd 1 (stdout) is a terminal" in err and "fd 2 (stderr) is a pipe" in err
    assert f"qwen-triage run -- {sys.executable} -c 'import time; time.sleep(60)' --port 8000" in err


def test_attach_to_a_journal_stream_follows_journalctl(tmp_path) -> None:
    ours, theirs = socket.socketpair()  # a service's stdout is a socket to journald
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=theirs.fileno(),
                            stderr=theirs.fileno(), stdin=subprocess.DEVNULL)
    theirs.close()
    env = env_with(PATH=f"{FAKEBIN}:{os.environ['PATH']}", FAKE_JOURNALCTL_ARGS=str(tmp_path / "args"),
                   FAKE_JOURNALCTL_DATA=str(LIVE / "journal_ollama_kernel.json"))
    live = Live(qt_argv("attach", str(proc.pid), "--rules", str(RULES), "--format", "json"), env=env)
    try:
        live.err.wait_for("diagnosis 2")
        proc.kill()  # the server goes away: attach reports it and ends
        rc = live.wait(30)
    finally:
        proc.kill()
        proc.wait()
        ours.close()
        live.kill()
    assert rc == 1
    args = json.loads((tmp_path / "args").read_text().splitlines()[0])
    assert args[-1] == f"_PID={proc.pid}" and "--follow" in args and args[3].startswith("--since=@")
    assert f"the attached process {proc.pid}" in live.err.text
    assert "hardware.xid_fatal" in [d["class"] for d in json.loads(live.out.data)["diagnoses"]]


def test_attach_to_nothing() -> None:
    out = subprocess.run(qt_argv("attach", "999999999"), capture_output=True, timeout=60)
    assert out.returncode == 2 and b"no process 999999999" in out.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root may read every process")
def test_attach_without_permission() -> None:
    out = subprocess.run(qt_argv("attach", "1"), capture_output=True, timeout=60)
    assert out.returncode == 2
