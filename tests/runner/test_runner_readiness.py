"""Readiness probes: every request bounded, proxies ignored, GPU usage judged from NVML snapshots."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from qwen_triage.preflight.machine.nvml import ReplayProbe
from qwen_triage.runner.readiness import (
    endpoint_for,
    gpu_usage,
    health,
    listener_is_ours,
    prove_api,
    released,
)
from qwen_triage.runner.vllm.argv import parse_vllm_argv
from tests.timelimits import scaled

SNAP = Path(__file__).resolve().parents[2] / "fixtures" / "preflight"


class _Handler(BaseHTTPRequestHandler):
    health_code = 200
    models: dict = {"data": [{"id": "tiny"}]}
    completion: dict = {"choices": [{"text": " hi"}]}
    seen: list = []

    def log_message(self, *a):
        pass

    def _send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        type(self).seen.append((self.path, self.headers.get("Authorization")))
        if self.path == "/health":
            self._send(type(self).health_code, {})
        else:
            self._send(200, type(self).models)

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self._send(200, type(self).completion)


@pytest.fixture
def server():
    handler = type("H", (_Handler,), {"seen": []})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv, handler
    srv.shutdown()
    srv.server_close()


def _ep(port: int, *extra: str):
    return endpoint_for(parse_vllm_argv(["vllm", "serve", "m", "--host", "0.0.0.0", "--port", str(port), *extra]), {})


def test_endpoint_defaults_and_overrides():
    assert endpoint_for(parse_vllm_argv(["vllm", "serve", "m"]), {}).base == "http://127.0.0.1:8000"
    assert endpoint_for(parse_vllm_argv(["vllm", "serve", "m", "--host", "::"]), {}).base == "http://[::1]:8000"
    ep = endpoint_for(parse_vllm_argv(["vllm", "serve", "m", "--api-key", "k"]), {}, "http://box:9000/healthz")
    assert (ep.base, ep.health_path, ep.api_key, ep.port) == ("http://box:9000", "/healthz", "k", 9000)
    assert endpoint_for(parse_vllm_argv(["vllm", "serve", "m"]), {"VLLM_API_KEY": "e"}).api_key == "e"


def test_full_proof(server, monkeypatch):
    srv, h = server
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # must not be used
    ep = _ep(srv.server_address[1], "--api-key", "sekret")
    assert health(ep, timeout=2).ok
    proof = prove_api(ep, timeout=2, completion=True, completion_timeout=2)
    assert proof.ok and proof.model_id == "tiny" and proof.completion == " hi"
    assert ("/v1/models", "Bearer sekret") in h.seen


def test_503_and_empty_models(server):
    srv, h = server
    ep = _ep(srv.server_address[1])
    h.health_code = 503
    r = health(ep, timeout=2)
    assert r.status == 503 and not r.ok
    h.models = {"data": []}
    proof = prove_api(ep, timeout=2, completion=False, completion_timeout=2)
    assert not proof.ok and proof.step == "models"


def test_a_listener_that_never_answers_times_out():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()  # accepts (kernel backlog) and never answers
        ep = _ep(s.getsockname()[1])
        t0 = time.monotonic()
        r = health(ep, timeout=0.5)
        assert r.status is None and r.error
        assert time.monotonic() - t0 < scaled(3)


def test_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = health(_ep(port), timeout=1)
    assert r.status is None and not r.ok


def test_gpu_usage_by_pid_and_by_growth():
    snap = ReplayProbe(SNAP / "snapshot-6x4090-busy.json").snapshot()
    # GPU 0 holds pid 2211 and GPU 3 pid 48213 in that snapshot
    u = gpu_usage(snap, [0, 1, 3], {2211, 48213})
    assert u.checked and u.busy == [0, 3] and u.idle == [1]
    assert "GPU(s) 1" in u.detail
    base = {g.index: g.memory.used - 2**30 for g in snap.gpus}  # every card grew by 1 GiB since
    assert gpu_usage(snap, [1, 2], set(), base).idle == []
    assert not gpu_usage(None, [0], set()).checked


def test_released():
    snap = ReplayProbe(SNAP / "snapshot-6x4090-busy.json").snapshot()
    ok, detail = released(snap, [0, 1], {2211})
    assert not ok and "GPU 0" in detail
    assert released(snap, [1, 2], {2211}) == (True, "GPU memory released")
    assert released(None, [0], {1})[0]


def test_listener_is_ours():
    import os

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert listener_is_ours(port, {os.getpid()}) in (True, None)
        assert listener_is_ours(port, {1}) in (False, None)
