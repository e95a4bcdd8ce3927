"""Is the server really up? ``/health``, ``/v1/models``, one tiny completion, and every GPU busy.

Every request has a timeout: a port held by a process that accepts and never
answers makes a bare request hang forever. Proxies from the environment are
ignored, because ``HTTP_PROXY`` would send a request for 127.0.0.1 to the
proxy. vLLM can exit 0 after its engine died, so only these answers count as
"ready", never an exit status.

The GPU check asks NVML (through :class:`qwen_triage.preflight.machine.nvml.GpuProbe`,
replayable in tests) whether every GPU of the layout holds memory for the
server's process tree. Where NVML reports no pids (some containers), memory
that grew since before the launch counts instead.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from qwen_triage.preflight.machine.nvml import GpuProbe, GpuSnapshot, NvmlUnavailable
from qwen_triage.runner.vllm.argv import VllmLaunch

# A GPU "holds memory for the server" when it grew this much since before the launch.
GROWTH_BYTES = 256 * 2**20


class Endpoint(BaseModel):
    base: str = Field(description="scheme://host:port, no trailing slash")
    health_path: str = "/health"
    api_key: str | None = None

    def url(self, path: str) -> str:
        return self.base + path

    @property
    def port(self) -> int:
        parts = urlsplit(self.base)
        return parts.port or (443 if parts.scheme == "https" else 80)


def _probe_host(host: str | None) -> str:
    if host in (None, "", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def endpoint_for(launch: VllmLaunch, env: Mapping[str, str], health_url: str | None = None) -> Endpoint:
    """Where the server answers: ``health_url`` when given, else its --host/--port on this machine."""
    key = launch.get("--api-key") or env.get("VLLM_API_KEY")
    if health_url:
        parts = urlsplit(health_url)
        return Endpoint(base=f"{parts.scheme}://{parts.netloc}", health_path=parts.path or "/health", api_key=key)
    return Endpoint(base=f"http://{_probe_host(launch.host)}:{launch.effective_port}", api_key=key)


class HttpResult(BaseModel):
    status: int | None = None  # None: no HTTP answer (refused, reset, timeout)
    body: str = ""
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def request(url: str, *, timeout: float, data: dict | None = None, api_key: str | None = None) -> HttpResult:
    headers = {"Accept": "application/json"}
    body = None
    if data is not None:
        body = json.dumps(data).encode()
        headers["Content-Type"] = "application/json"
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    req = urllib.request.Request(url, data=body, headers=headers, method="POST" if body is not None else "GET")
    t0 = time.monotonic()
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            text = resp.read(1 << 20).decode("utf-8", "replace")
            return HttpResult(status=resp.status, body=text, seconds=time.monotonic() - t0)
    except urllib.error.HTTPError as exc:
        try:
            text = exc.read(1 << 16).decode("utf-8", "replace")
        except Exception:  # noqa: BLE001
            text = ""
        return HttpResult(status=exc.code, body=text, error=f"HTTP {exc.code}", seconds=time.monotonic() - t0)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return HttpResult(error=str(reason) or type(exc).__name__, seconds=time.monotonic() - t0)


def health(ep: Endpoint, timeout: float) -> HttpResult:
    return request(ep.url(ep.health_path), timeout=timeout, api_key=ep.api_key)


class ReadyProof(BaseModel):
    ok: bool
    step: str = Field(description="health, models, completion or gpus: the last step tried")
    detail: str = ""
    model_id: str | None = None
    completion: str | None = None


def prove_api(ep: Endpoint, *, timeout: float, completion: bool, completion_timeout: float) -> ReadyProof:
    """After /health answered 200: /v1/models, then one completion of a few tokens."""
    models = request(ep.url("/v1/models"), timeout=timeout, api_key=ep.api_key)
    if not models.ok:
        return ReadyProof(ok=False, step="models", detail=f"/v1/models: {models.error or models.status}")
    try:
        data = json.loads(models.body).get("data") or []
        model_id = data[0]["id"]
    except (ValueError, AttributeError, LookupError, TypeError):
        return ReadyProof(ok=False, step="models", detail="/v1/models lists no model")
    if not completion:
        return ReadyProof(ok=True, step="models", detail=f"serves {model_id}", model_id=model_id)
    res = request(
        ep.url("/v1/completions"),
        timeout=completion_timeout,
        data={"model": model_id, "prompt": "Hello", "max_tokens": 4, "temperature": 0},
        api_key=ep.api_key,
    )
    if not res.ok:
        return ReadyProof(ok=False, step="completion", detail=f"/v1/completions: {res.error or res.status} {res.body[:200]}",
                          model_id=model_id)
    try:
        text = json.loads(res.body)["choices"][0].get("text", "")
    except (ValueError, LookupError, TypeError, AttributeError):
        return ReadyProof(ok=False, step="completion", detail="/v1/completions answered without choices", model_id=model_id)
    return ReadyProof(ok=True, step="completion", detail=f"completed {len(text)} characters in {res.seconds:.1f} s",
                      model_id=model_id, completion=text)


# --- GPUs -------------------------------------------------------------------------------


class GpuUsage(BaseModel):
    """Which GPUs of the layout hold memory for the server."""

    checked: bool
    busy: list[int] = Field(default_factory=list)
    idle: list[int] = Field(default_factory=list)
    detail: str = ""


def snapshot_or_none(probe: GpuProbe | None) -> GpuSnapshot | None:
    if probe is None:
        return None
    try:
        return probe.snapshot()
    except (NvmlUnavailable, ValueError, OSError):
        return None


def gpu_usage(
    snap: GpuSnapshot | None,
    gpus: Iterable[int],
    pids: set[int],
    baseline_used: Mapping[int, int] | None = None,
) -> GpuUsage:
    """``gpus`` are NVML indices; ``pids`` the server's process tree; ``baseline_used`` memory before launch."""
    if snap is None:
        return GpuUsage(checked=False, detail="no NVML: per-GPU memory not checked")
    by_index = {g.index: g for g in snap.gpus}
    busy: list[int] = []
    idle: list[int] = []
    for i in gpus:
        g = by_index.get(i)
        if g is None:
            idle.append(i)
            continue
        ours = any(p.pid in pids for p in g.processes)
        grew = baseline_used is not None and i in baseline_used and g.memory.used - baseline_used[i] >= GROWTH_BYTES
        (busy if ours or grew else idle).append(i)
    detail = "every GPU of the layout holds memory for the server" if not idle else (
        f"GPU(s) {', '.join(map(str, idle))} hold no memory of the server (busy: {', '.join(map(str, busy)) or 'none'})"
    )
    return GpuUsage(checked=True, busy=busy, idle=idle, detail=detail)


def released(
    snap: GpuSnapshot | None, gpus: Iterable[int], pids: set[int], baseline_used: Mapping[int, int] | None = None
) -> tuple[bool, str]:
    """True when none of ``pids`` holds memory on ``gpus`` and their memory is back near the baseline."""
    if snap is None:
        return True, "no NVML: GPU memory release not checked"
    by_index = {g.index: g for g in snap.gpus}
    held = []
    for i in gpus:
        g = by_index.get(i)
        if g is None:
            continue
        procs = [p.pid for p in g.processes if p.pid in pids]
        grew = baseline_used is not None and i in baseline_used and g.memory.used - baseline_used[i] >= GROWTH_BYTES
        if procs or grew:
            held.append(f"GPU {i}" + (f" (pids {', '.join(map(str, procs))})" if procs else f" ({g.memory.used >> 20} MiB used)"))
    return (not held), ("; ".join(held) if held else "GPU memory released")


def listener_is_ours(port: int, pids: set[int]) -> bool | None:
    """Whether the process listening on ``port`` belongs to the server (None: cannot tell)."""
    from qwen_triage.runner.probes import port_holders

    holders = port_holders(port)
    known = [h.pid for h in holders if h.pid is not None]
    if not known:
        return None
    return any(p in pids for p in known)
