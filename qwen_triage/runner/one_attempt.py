"""One attempt of the relaunch loop: start the server, prove it ready, serve, stop it, triage what it left.

The loop (:mod:`qwen_triage.runner.loop`) decides *what* to launch; this
decides nothing about the next launch. It starts one command, waits for a
proven answer (``/health``, ``/v1/models``, one completion, every GPU of the
layout busy), serves in the foreground when asked, stops the whole process
group and waits for its GPU memory to be released, then reads the attempt's
log (and the kernel log) into diagnoses, adding what the runner itself saw
(a hang, idle GPUs, memory not given back).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qwen_triage.report.model import Diagnosis
from qwen_triage.runner import observed
from qwen_triage.runner.attempt import DetachedServer, Server, SupervisedServer, iso, stage_of, triage_attempt
from qwen_triage.runner.deps import Deps
from qwen_triage.runner.profile import RunSettings
from qwen_triage.runner.readiness import (
    Endpoint,
    endpoint_for,
    gpu_usage,
    health,
    listener_is_ours,
    prove_api,
    released,
    snapshot_or_none,
)
from qwen_triage.runner.render import command_text
from qwen_triage.runner.runlog import AttemptRecord, DiagnosisBrief, Journal, ReadyRecord
from qwen_triage.runner.vllm.argv import VllmLaunch
from qwen_triage.runner.vllm.diff import Change

if TYPE_CHECKING:
    from qwen_triage.engine.compiled import CompiledPack
    from qwen_triage.live.session import LiveEvent

# Outcomes after which the log is not triaged: the server worked, or the user stopped it.
_NOT_TRIAGED = ("ready", "detached", "stopped", "interrupted")


class AttemptRunner:
    """Runs attempts one at a time; :attr:`server` is the current one's server (None before the first)."""

    def __init__(self, settings: RunSettings, deps: Deps, *, run_id: str, journal: Journal, log_dir: Path,
                 compiled: Callable[[], "CompiledPack"]):
        self.s, self.deps, self.out = settings, deps, deps.printer
        self.run_id, self.journal, self.log_dir, self.compiled = run_id, journal, log_dir, compiled
        self.server: Server | None = None
        self.observations: list[str] = []  # info-level findings of the last triage
        self._idle: Any = None  # the GPU usage of an attempt that left GPUs idle
        self._not_released: str | None = None

    def sleep(self, seconds: float) -> bool:
        """Wait; True when Ctrl-C came meanwhile."""
        return self.deps.stop.wait(seconds)

    def make_server(self, n: int, launch: VllmLaunch, env: dict[str, str]) -> Server:
        log = self.log_dir / f"attempt-{n}.log"
        if self.s.detach:
            return DetachedServer(launch.to_argv(), env, log, stall=self.s.stall or None, grace=self.s.grace)
        return SupervisedServer(
            launch.to_argv(), env, log, compiled=self.compiled(), stall=self.s.stall or None, grace=self.s.grace,
            show_output=self.s.show_output, on_event=self._live_event,
        )

    def _live_event(self, ev: "LiveEvent") -> None:
        if ev.kind == "diagnosis" and ev.item is not None:
            self.out.item(f"live: {ev.severity.value}: [{ev.item.rule}] {ev.item.title}")

    def run(self, n: int, key: str, launch: VllmLaunch, env: dict[str, str], full_env: dict[str, str],
            gpus: list[int], changes: list[Change]) -> tuple[str, list[Diagnosis], AttemptRecord]:
        """Attempt ``n`` of ``launch`` with ``env`` (the runner's) over ``full_env`` (what the server gets)."""
        s = self.s
        ep = endpoint_for(launch, full_env, s.health_url)
        before = snapshot_or_none(self.deps.gpu_probe) if gpus else None
        baseline = {g.index: g.memory.used for g in before.gpus} if before else None
        server = self.make_server(n, launch, full_env)
        self.server = server
        self.out.say(f"attempt {n}/{s.attempts}: {command_text(launch, env)}")
        self.out.item(f"log: {server.log_path}")
        rec = AttemptRecord(run=self.run_id, attempt=n, key=key, argv=launch.to_argv(), env=env,
                            changes=changes, started=iso(time.time()), outcome="running")
        t0 = time.monotonic()
        try:
            server.start()
        except OSError as exc:
            rec.outcome, rec.notes = "not-started", [f"cannot start: {exc.strerror or exc}"]
            self.out.item(rec.notes[0])
            self.journal.append(rec)
            return "not-started", [], rec
        rec.pid, rec.log = server.pid, str(server.log_path)
        pids: set[int] = set()
        outcome = self.until_done(server, rec, ep, t0, pids, gpus, baseline)
        if outcome != "detached":
            self.stop_and_release(server, rec, pids, gpus, baseline)
        rec.seconds = round(time.monotonic() - t0, 1)
        rec.exit_status = server.exit_status if outcome != "detached" else None
        diagnoses: list[Diagnosis] = []
        if outcome not in _NOT_TRIAGED:
            diagnoses = self.triage(server, rec, outcome)
        rec.outcome = outcome
        rec.diagnoses = [DiagnosisBrief.of(d) for d in diagnoses]
        self.journal.append(rec)
        return outcome, diagnoses, rec

    def until_done(self, server: Server, rec: AttemptRecord, ep: Endpoint, t0: float, pids: set[int],
                   gpus: list[int], baseline: dict[int, int] | None) -> str:
        """Wait for ready; once ready, journal it and detach, stop, or serve as the settings say."""
        s = self.s
        outcome, detail = self.wait_ready(server, ep, t0, pids, gpus, baseline)
        if outcome != "ready":
            if detail:
                self.out.item(detail)
            return outcome
        rec.ready_after = round(time.monotonic() - t0, 1)
        self.out.say(f"attempt {rec.attempt} is ready after {rec.ready_after:g} s: {detail}")
        self.journal.append(ReadyRecord(run=self.run_id, attempt=rec.attempt, time=iso(time.time()),
                                        ready_after=rec.ready_after, pid=server.pid, argv=rec.argv,
                                        env=rec.env, proof=detail))
        if s.detach:
            return "detached"
        if s.stop_when_ready:
            self.out.item("--stop-when-ready: stopping the server")
            return outcome
        self.out.say(f"serving on {ep.base} (pid {server.pid}); Ctrl-C stops it")
        return self.serve(server, ep, pids)

    def wait_ready(
        self, server: Server, ep: Endpoint, t0: float, pids: set[int], gpus: list[int], baseline: dict[int, int] | None
    ) -> tuple[str, str]:
        s = self.s
        deadline = t0 + s.ready_timeout
        last_members = 0.0
        while True:
            now = time.monotonic()
            if now - last_members >= 0.5:
                pids.update(server.members())
                last_members = now
            ended = self.ended_before_ready(server, now, deadline)
            if ended is not None:
                return ended
            # Short: a foreign process holding the port accepts and never answers.
            r = health(ep, timeout=min(s.request_timeout, 2.0))
            if r.ok:
                pids.update(server.members())
                if listener_is_ours(ep.port, pids) is False:
                    # Someone else answers on our port: not our server's answer.
                    self.sleep(1.0)
                    continue
                proven = self.prove(ep, pids, gpus, baseline)
                if proven is not None:
                    return proven
                if server.done:
                    continue
            if self.sleep(1.0):
                continue

    def ended_before_ready(self, server: Server, now: float, deadline: float) -> tuple[str, str] | None:
        """Why waiting for ready is over without an answer (Ctrl-C, exit, stall, timeout); None: keep waiting."""
        if self.deps.stop.is_set():
            return "interrupted", "interrupted (Ctrl-C)"
        if server.done:
            why, status = server.stop_reason, server.exit_status
            if why and status is not None and status >= 128:
                return "exited", f"stopped by the runner ({why}) before it was ready"
            return "exited", f"the server exited with status {server.exit_status} before it was ready"
        if server.stall is not None:
            return "stalled", f"stall: {server.stall.describe()}"
        if now >= deadline:
            return "ready-timeout", f"not ready after {self.s.ready_timeout:g} s (--ready-timeout)"
        return None

    def prove(self, ep: Endpoint, pids: set[int], gpus: list[int], baseline: dict[int, int] | None
              ) -> tuple[str, str] | None:
        """A healthy server's API and GPUs put to the proof: ready, gpus-idle, or None (not yet)."""
        s = self.s
        proof = prove_api(ep, timeout=s.request_timeout, completion=s.completion,
                          completion_timeout=s.completion_timeout)
        if not proof.ok:
            return None
        detail = f"/health 200, /v1/models serves {proof.model_id}, {proof.detail}"
        if gpus:
            usage = gpu_usage(snapshot_or_none(self.deps.gpu_probe), gpus, pids, baseline)
            if usage.checked and usage.idle:
                self._idle = usage
                return "gpus-idle", usage.detail
            detail += f"; {usage.detail}"
        return "ready", detail

    def serve(self, server: Server, ep: Endpoint, pids: set[int]) -> str:
        """In the foreground after ready: poll /health, keep triaging (live); until Ctrl-C or death."""
        failures = 0
        while True:
            if self.sleep(self.s.health_interval):
                return "stopped"
            pids.update(server.members())
            if server.done:
                self.out.say(f"the server exited with status {server.exit_status} while serving")
                return "died-after-ready"
            r = health(ep, timeout=self.s.request_timeout)
            if r.status == 503:
                # vLLM answers 503 once its engine core is dead (and exits, with status 0, seconds later).
                self.out.say("/health answers 503: the engine died while serving")
                return "died-after-ready"
            failures = 0 if r.ok else failures + 1
            if failures >= 3:
                self.out.say(f"/health failed {failures} times in a row ({r.error or r.status})")
                return "died-after-ready"

    def stop_and_release(
        self, server: Server, rec: AttemptRecord, pids: set[int], gpus: list[int], baseline: dict[int, int] | None
    ) -> None:
        """Stop the server's whole process group; wait for its GPU memory to be released."""
        pids.update(server.members())
        if not server.done:
            server.request_stop("relaunch runner: stopping the attempt")
        limit = self.s.grace + self.s.release_timeout
        t = time.monotonic()
        while server.wait(0.5) is None:
            if self.deps.kill.is_set():
                server.kill_now()  # a second Ctrl-C: no more grace
            if time.monotonic() - t > limit:
                server.kill_now()
                server.wait(10)
                break
        left = [p for p in pids if _alive(p)]
        deadline = time.monotonic() + self.s.release_timeout
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = [p for p in left if _alive(p)]
        if left:
            rec.notes.append(f"processes still alive after the stop: {', '.join(map(str, left))}")
        ok, detail = True, ""
        while gpus:
            ok, detail = released(snapshot_or_none(self.deps.gpu_probe), gpus, pids, baseline)
            if ok or time.monotonic() >= deadline:
                break
            time.sleep(1.0)
        if not ok:
            rec.notes.append(detail)
            self._not_released = detail

    def triage(self, server: Server, rec: AttemptRecord, outcome: str) -> list[Diagnosis]:
        report, notes = triage_attempt(server.log_path, self.compiled(), server.started_wall, time.time(),
                                       kernel=self.deps.kernel_log)
        rec.notes += notes
        self.observations = [f"[{o.rule}] {o.title}" for o in report.observations]
        diagnoses = list(report.diagnoses)
        stage, label, hint = stage_of(server.log_path)
        rec.stage = stage
        if outcome in ("stalled", "ready-timeout") and not any(d.severity.rank <= 1 for d in diagnoses):
            stall = server.stall
            seconds = stall.quiet if stall is not None and outcome == "stalled" else self.s.ready_timeout
            diagnoses += observed.hang("stall" if outcome == "stalled" else "timeout", seconds, stage, label, hint,
                                       stall.stage_line if stall is not None else None)
        if outcome == "gpus-idle":
            u = self._idle
            diagnoses += observed.gpus_idle(u.idle if u else [], u.busy if u else [], u.detail if u else "")
        nr = self._not_released
        if nr:
            diagnoses += observed.not_released(nr)
            self._not_released = None
        return diagnoses


def _alive(pid: int) -> bool:
    from qwen_triage.live.procs import alive

    return alive(pid)
