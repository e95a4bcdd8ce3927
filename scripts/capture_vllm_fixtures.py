#!/usr/bin/env python3
"""Run the real vLLM (CPU build) in a set of failure scenarios and keep its logs.

Writes, for each scenario NAME, ``OUT/NAME.log`` (stdout and stderr merged, as
``vllm serve ... 2>&1 | tee NAME.log`` would keep them; trimmed to at most
~400 lines) and ``OUT/NAME.md`` (command line, environment, time to
ready/failure, exit status, the key error lines), plus ``OUT/summary.json``.

Needs the venv and tiny model made by ``scripts/setup-vllm.sh``. Stdlib only:
run it with any python3 (3.11+). Linux only (reads /proc).

    scripts/capture_vllm_fixtures.py                 # all scenarios
    scripts/capture_vllm_fixtures.py --only a,g      # some of them

Every vLLM it starts runs in its own session (process group); the group is
killed with SIGKILL when the scenario ends, and the script checks that no
process of it is left. Ports: 127.0.0.1:18300-18399.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "qwen-triage"
DEFAULT_VENV = Path(os.environ.get("QWEN_TRIAGE_VLLM_VENV", Path.home() / ".cache/qwen-triage/vllm-venv"))
DEFAULT_MODEL = Path(os.environ.get("QWEN_TRIAGE_TINY_MODEL", Path.home() / ".cache/qwen-triage/tiny-qwen2"))
MAX_LINES = 400

BASE_ENV = {"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1"}
COMMON_ARGS = ["--max-model-len", "256", "--enforce-eager", "--kv-cache-memory-bytes", "64M"]


# --- process helpers --------------------------------------------------------------


def _procs() -> list[tuple[int, int, int, str]]:
    """(pid, ppid, pgid, comm) of every process."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out.append((int(d), int(fields[1]), int(fields[2]), comm))
    return out


def group_members(pgid: int) -> list[tuple[int, str]]:
    return [(pid, comm) for pid, _pp, pg, comm in _procs() if pg == pgid]


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 10
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = group_members(pgid)
    if left:
        raise SystemExit(f"processes of group {pgid} still alive after SIGKILL: {left}")


def http_status(url: str, timeout: float = 1.0) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError, TimeoutError):
        return None


def http_json(url: str, body: dict | None = None, timeout: float = 30.0) -> tuple[int | None, str]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        return None, repr(e)


# --- scenarios ----------------------------------------------------------------------


@dataclass
class Ctx:
    venv: Path
    model: Path
    work: Path  # scratch dir for model variants (outside the source tree)

    @property
    def vllm(self) -> str:
        return str(self.venv / "bin" / "vllm")

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")


@dataclass
class Scenario:
    name: str
    title: str
    port: int
    argv: Callable[[Ctx], list[str]]
    env: dict[str, str] = field(default_factory=dict)
    prepare: Callable[[Ctx], str] | None = None  # returns a note of what was done
    after_ready: str | None = None  # "stop" (Ctrl-C) or "kill-engine"
    timeout: float = 150.0
    expect: list[str] = field(default_factory=list)  # regexes of the key lines
    occupy_port: bool = False


def _two_shard_variant(ctx: Ctx, name: str) -> Path:
    d = ctx.work / name
    if d.exists():
        shutil.rmtree(d)
    subprocess.run(
        [ctx.python, str(REPO / "scripts" / "make_tiny_qwen.py"), str(d), "--shards", "2"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONNOUSERSITE": "1", "HF_HUB_OFFLINE": "1"},
    )
    return d


def prep_missing_shard(ctx: Ctx) -> str:
    d = _two_shard_variant(ctx, "tiny-qwen2-missing-shard")
    victim = d / "model-00002-of-00002.safetensors"
    victim.unlink()
    return f"made a 2-shard variant with `make_tiny_qwen.py {d} --shards 2`, then deleted `{victim.name}` (model.safetensors.index.json still names it)"


def prep_truncated_shard(ctx: Ctx) -> str:
    d = _two_shard_variant(ctx, "tiny-qwen2-truncated-shard")
    victim = d / "model-00002-of-00002.safetensors"
    size = victim.stat().st_size
    with open(victim, "r+b") as f:
        f.truncate(size // 2)
    return f"made a 2-shard variant with `make_tiny_qwen.py {d} --shards 2`, then truncated `{victim.name}` from {size} to {size // 2} bytes"


def _serve(ctx: Ctx, model: Path | str, port: int, *extra: str) -> list[str]:
    return [ctx.vllm, "serve", str(model), "--host", "127.0.0.1", "--port", str(port), *COMMON_ARGS, *extra]


SCENARIOS: list[Scenario] = [
    Scenario(
        "a-healthy",
        "healthy start until ready, one completion, then Ctrl-C",
        18301,
        lambda c: _serve(c, c.model, 18301),
        after_ready="stop",
        expect=[
            r"Starting vLLM server on", r"Application startup complete", r"trigger received signal=SIGINT",
            r"\[shutdown\] API server: shutdown triggered", r"Application shutdown complete",
        ],
    ),
    Scenario(
        "b-tp6-heads",
        "--tensor-parallel-size 6 on a model with 4 attention heads",
        18302,
        lambda c: _serve(c, c.model, 18302, "--tensor-parallel-size", "6"),
        expect=[r"ValidationError: ", r"divisible by tensor parallel size"],
    ),
    Scenario(
        "c-max-model-len",
        "--max-model-len 4096 above the model's max_position_embeddings (512)",
        18303,
        lambda c: [
            c.vllm, "serve", str(c.model), "--host", "127.0.0.1", "--port", "18303",
            "--max-model-len", "4096", "--enforce-eager", "--kv-cache-memory-bytes", "64M",
        ],
        expect=[r"ValidationError: ", r"User-specified max_model_len"],
    ),
    Scenario(
        "d-missing-shard",
        "a safetensors shard named by model.safetensors.index.json is missing",
        18304,
        lambda c: _serve(c, c.work / "tiny-qwen2-missing-shard", 18304),
        prepare=prep_missing_shard,
        expect=[
            r"WorkerProc failed to start", r"FileNotFoundError: ", r"EngineCore failed to start",
            r"^Exception: ", r"^RuntimeError: ",
        ],
    ),
    Scenario(
        "e-truncated-shard",
        "a safetensors shard truncated to half its size",
        18305,
        lambda c: _serve(c, c.work / "tiny-qwen2-truncated-shard", 18305),
        prepare=prep_truncated_shard,
        expect=[
            r"WorkerProc failed to start", r"SafetensorError: ", r"EngineCore failed to start",
            r"^Exception: ", r"^RuntimeError: ",
        ],
    ),
    Scenario(
        "f-port-in-use",
        "the port is already taken by another process listening on it",
        18306,
        lambda c: _serve(c, c.model, 18306),
        occupy_port=True,
        expect=[r"non-default args: ", r"in create_server_socket", r"^OSError: "],
    ),
    Scenario(
        "g-engine-sigkill",
        "healthy start, then SIGKILL to the VLLM::EngineCore process",
        18307,
        lambda c: _serve(c, c.model, 18307),
        after_ready="kill-engine",
        expect=[
            r"engine core exited unexpectedly", r"AsyncLLM output_handler failed", r"EngineDeadError: ",
            r'"GET /health HTTP/1.1" 503', r"Finished server process",
        ],
    ),
    Scenario(
        "h-api-server-entrypoint",
        "healthy start through `python -m vllm.entrypoints.openai.api_server --model`, then Ctrl-C",
        18308,
        lambda c: [
            c.python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(c.model),
            "--host", "127.0.0.1", "--port", "18308",
            "--max_model_len", "256", "--enforce-eager", "--kv-cache-memory-bytes=64M",
        ],
        after_ready="stop",
        expect=[r"DeprecationWarning: ", r"non-default args: ", r"Starting vLLM server on"],
    ),
]


# --- running one ----------------------------------------------------------------------


def trim(lines: list[str], limit: int = MAX_LINES) -> list[str]:
    if len(lines) <= limit:
        return lines
    head = limit // 2
    tail = limit - head - 1
    cut = len(lines) - head - tail
    return lines[:head] + [f"[... {cut} lines trimmed by capture_vllm_fixtures.py ...]\n"] + lines[-tail:]


def run_scenario(sc: Scenario, ctx: Ctx, out: Path) -> dict:
    prep_note = sc.prepare(ctx) if sc.prepare else ""
    argv = sc.argv(ctx)
    env_add = {**BASE_ENV, **sc.env}
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(env_add)
    env["PYTHONNOUSERSITE"] = "1"

    blocker = None
    if sc.occupy_port:
        blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        blocker.bind(("127.0.0.1", sc.port))
        blocker.listen(1)

    raw = ctx.work / f"{sc.name}.raw.log"
    events: list[str] = []
    result: dict = {"name": sc.name, "title": sc.title, "port": sc.port}
    t0 = time.monotonic()
    with open(raw, "wb") as logf:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, env=env, cwd=str(ctx.work),
            start_new_session=True,
        )
    pgid = proc.pid
    health = f"http://127.0.0.1:{sc.port}/health"
    try:
        ready_at = None
        while proc.poll() is None and time.monotonic() - t0 < sc.timeout:
            if http_status(health, timeout=0.5) == 200 and not sc.occupy_port:
                ready_at = time.monotonic() - t0
                break
            time.sleep(0.5)
        if ready_at is not None:
            result["ready_s"] = round(ready_at, 1)
            events.append(f"{ready_at:6.1f}s  GET /health -> 200 (ready)")
            if sc.after_ready == "stop":
                st, body = http_json(f"http://127.0.0.1:{sc.port}/v1/models")
                events.append(f"{time.monotonic() - t0:6.1f}s  GET /v1/models -> {st}")
                st, body = http_json(
                    f"http://127.0.0.1:{sc.port}/v1/completions",
                    {"model": str(argv[argv.index("--model") + 1] if "--model" in argv else argv[2]),
                     "prompt": "hello world", "max_tokens": 8},
                )
                events.append(f"{time.monotonic() - t0:6.1f}s  POST /v1/completions -> {st}")
                t_stop = time.monotonic() - t0
                events.append(f"{t_stop:6.1f}s  SIGINT to the process group (Ctrl-C)")
                os.killpg(pgid, signal.SIGINT)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    events.append("server did not exit within 60 s of SIGINT")
            elif sc.after_ready == "kill-engine":
                engines = [(p, c) for p, c in group_members(pgid) if c.startswith("VLLM::EngineCor")]
                if len(engines) != 1:
                    raise SystemExit(f"expected one EngineCore process, found {engines} in {group_members(pgid)}")
                epid = engines[0][0]
                t_kill = time.monotonic() - t0
                result["killed_at_s"] = round(t_kill, 1)
                events.append(f"{t_kill:6.1f}s  SIGKILL to VLLM::EngineCore pid {epid}")
                os.kill(epid, signal.SIGKILL)
                statuses: list[tuple[float, int | None]] = []
                last = "unset"
                while proc.poll() is None and time.monotonic() - t0 < t_kill + 60:
                    s = http_status(health, timeout=1.0)
                    now = time.monotonic() - t0
                    statuses.append((round(now - t_kill, 2), s))
                    if s != last:
                        events.append(f"{now:6.1f}s  GET /health -> {s if s is not None else 'connection refused'}")
                        last = s
                    time.sleep(0.25)
                result["health_after_kill"] = statuses
                result["exit_after_kill_s"] = round(time.monotonic() - t0 - t_kill, 1)
        else:
            try:
                proc.wait(timeout=max(0.0, sc.timeout - (time.monotonic() - t0)))
            except subprocess.TimeoutExpired:
                events.append(f"no exit and not ready after {sc.timeout:.0f} s: killed")
                result["hung"] = True
        rc = proc.poll()
        result["exit_status"] = rc
        result["elapsed_s"] = round(time.monotonic() - t0, 1)
        events.append(f"{result['elapsed_s']:6.1f}s  exit status {rc}")
        if rc is not None:
            # Does anything of the launch outlive the server (workers, trackers)?
            left = group_members(pgid)
            if left:
                events.append(f"{time.monotonic() - t0:6.1f}s  still in the process group: {left}")
                deadline = time.monotonic() + 5
                while left and time.monotonic() < deadline:
                    time.sleep(0.1)
                    left = group_members(pgid)
                events.append(f"{time.monotonic() - t0:6.1f}s  " + (f"still alive, killed: {left}" if left else "process group empty"))
                result["left_after_exit"] = left
    finally:
        kill_group(pgid)
        if blocker is not None:
            blocker.close()

    lines = raw.read_text(errors="replace").splitlines(keepends=True)
    result["lines_total"] = len(lines)
    kept = trim(lines)
    (out / f"{sc.name}.log").write_text("".join(kept))

    matched: list[str] = []
    for rx in sc.expect:
        hit = next((ln.rstrip("\n") for ln in lines if re.search(rx, ln)), None)
        if hit is None:
            matched.append(f"(no line matches `{rx}`)")
        elif hit not in matched:
            matched.append(hit)
    result["key_lines"] = matched
    write_note(sc, ctx, out, argv, env_add, prep_note, events, result)
    return result


def _display(argv: list[str], ctx: Ctx) -> str:
    s = shlex.join(argv)
    return s.replace(str(ctx.venv), "$VENV").replace(str(ctx.work), "$WORK").replace(str(ctx.model), "$MODEL")


def write_note(sc, ctx, out, argv, env_add, prep_note, events, result) -> None:
    env_s = " ".join(f"{k}={shlex.quote(v)}" for k, v in env_add.items())
    md = [
        f"# {sc.name}: {sc.title}",
        "",
        f"Captured with `scripts/capture_vllm_fixtures.py --only {sc.name.split('-')[0]}` (vLLM 0.32.0+cpu, torch 2.13.0+cpu,",
        "2-core x86_64, no GPU). Log: stdout and stderr merged through a pipe (not a TTY, so no colours),",
        f"{result['lines_total']} lines" + (f", trimmed to {MAX_LINES}." if result["lines_total"] > MAX_LINES else "."),
        "",
        "Command (`$VENV` = the venv of scripts/setup-vllm.sh, `$MODEL` = the tiny Qwen2 model,",
        "`$WORK` = ~/.cache/qwen-triage/fixture-work):",
        "",
        "```sh",
        f"{env_s} {_display(argv, ctx)}",
        "```",
        "",
    ]
    if prep_note:
        md += [f"Before: {prep_note.replace(str(ctx.work), '$WORK').replace(str(ctx.venv), '$VENV')}.", ""]
    if sc.occupy_port:
        md += [f"Before: a Python socket bound and listening on 127.0.0.1:{sc.port} for the whole run.", ""]
    md += ["Result:", ""]
    if "ready_s" in result:
        md.append(f"- ready (`/health` 200) after {result['ready_s']} s")
    if "exit_after_kill_s" in result:
        md.append(f"- server exited {result['exit_after_kill_s']} s after the SIGKILL to EngineCore")
    md.append(f"- exit status {result['exit_status']} after {result['elapsed_s']} s in all")
    md += ["", "Timeline:", "", "```", *events, "```", "", "Key lines (first match of each pattern, verbatim):", "", "```"]
    md += result["key_lines"]
    md += ["```", ""]
    (out / f"{sc.name}.md").write_text("\n".join(md))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    ap.add_argument("--out", type=Path, default=REPO / "fixtures" / "vllm-cpu")
    ap.add_argument("--work", type=Path, default=CACHE / "fixture-work")
    ap.add_argument("--only", default="", help="comma-separated scenario letters or names (default: all)")
    args = ap.parse_args(argv)

    ctx = Ctx(args.venv.resolve(), args.model.resolve(), args.work.resolve())
    if not (ctx.venv / "bin" / "vllm").exists():
        raise SystemExit(f"no vllm in {ctx.venv}: run scripts/setup-vllm.sh first")
    ctx.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)

    wanted = [w for w in args.only.split(",") if w]
    chosen = [s for s in SCENARIOS if not wanted or any(s.name == w or s.name.split("-")[0] == w for w in wanted)]
    summary_path = args.out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    for sc in chosen:
        print(f"== {sc.name}: {sc.title}", flush=True)
        res = run_scenario(sc, ctx, args.out)
        res.pop("health_after_kill", None) if len(res.get("health_after_kill", [])) > 200 else None
        summary[sc.name] = res
        print(json.dumps({k: v for k, v in res.items() if k != "health_after_kill"}, indent=1), flush=True)
        summary_path.write_text(json.dumps(dict(sorted(summary.items())), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
