"""The relaunch loop: preflight, launch, prove, triage, fix, relaunch — bounded, journaled.

One :class:`Run` per ``qwen-triage relaunch``. It owns no global state: the
dependencies that touch the machine (the NVML probe, the rule pack, the port
check) come in through :class:`Deps`, and Ctrl-C arrives as an event.

Rules the loop keeps:

* exit status never means success; a proven answer (``/health``, ``/v1/models``,
  one completion, every GPU of the layout busy) does;
* a relaunch waits until the previous attempt's processes are all gone and
  its GPU memory is free (with a timeout);
* a launch identical to one that failed before it became ready is never
  started again (a command that was proven ready and then died may be
  restarted: it works, something killed it);
* at most ``attempts`` launches, with backoff; the run stops when no automatic
  fix is left (exit 1) or only the user can fix it (exit 3).
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from qwen_triage.report.model import Diagnosis
from qwen_triage.runner import observed
from qwen_triage.runner import probes
from qwen_triage.runner.attempt import (
    DetachedServer,
    Server,
    SupervisedServer,
    iso,
    stage_of,
    triage_attempt,
)
from qwen_triage.runner.fixplan import (
    FixPlan,
    PlanContext,
    attempt_key,
    build_fix_plan,
    verified,
)
from qwen_triage.runner.runlog import (
    AttemptRecord,
    DiagnosisBrief,
    Journal,
    ReadyRecord,
    RunRecord,
)
from qwen_triage.runner.layout import requested, visible_indices
from qwen_triage.runner.launch_checks import (
    Machine,
    PreflightResult,
    model_config_for,
    plan_context,
    probe_machine,
    run_preflight,
)
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
from qwen_triage.runner.render import Printer, command_text
from qwen_triage.runner.vllm.argv import VllmLaunch
from qwen_triage.runner.vllm.diff import Change

if TYPE_CHECKING:
    from qwen_triage.live.session import LiveEvent
    from qwen_triage.engine.matcher import CompiledPack
    from qwen_triage.preflight.model.config import ModelConfig
    from qwen_triage.preflight.machine.nvml import GpuProbe

EXIT_READY = 0
EXIT_GAVE_UP = 1
EXIT_USAGE = 2
EXIT_MANUAL = 3
EXIT_INTERRUPTED = 130


@dataclass
class Deps:
    """Everything the loop reaches the machine through."""

    compiled: Callable[[], "CompiledPack"]
    gpu_probe: "GpuProbe | None" = None  # None: NVML is not used (CPU build, or unavailable)
    printer: Printer = field(default_factory=Printer)
    stop: threading.Event = field(default_factory=threading.Event)  # Ctrl-C: stop cleanly
    kill: threading.Event = field(default_factory=threading.Event)  # Ctrl-C again: no more grace
    port_in_use: Callable[[str | None, int], bool] = probes.port_in_use
    kernel_log: bool = True
    base_env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    wait_poll: float = 5.0  # seconds between --wait-for-fix checks
    # --allow-rule-actions: rules from --rules / QWEN_TRIAGE_RULES may edit the launch too
    allow_rule_actions: bool = False


class RunResult(BaseModel):
    run: str
    exit_status: int
    outcome: str
    attempts: list[AttemptRecord] = Field(default_factory=list)
    final_argv: list[str] | None = None
    final_env: dict[str, str] | None = None
    final_command: str | None = None
    detached_pid: int | None = None
    instructions: list[str] = Field(default_factory=list)
    journal: str
    log_dir: str


class _Stop(Exception):
    """End of the run, with its exit status and outcome."""

    def __init__(self, status: int, outcome: str, message: str = ""):
        super().__init__(message)
        self.status, self.outcome, self.message = status, outcome, message


class Run:
    def __init__(self, settings: RunSettings, deps: Deps):
        self.s = settings
        self.deps = deps
        self.out = deps.printer
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        self.run_id = f"{stamp}-{secrets.token_hex(2)}"
        self.journal = Journal(settings.journal)
        self.log_dir = settings.log_dir / self.run_id
        self.launch: VllmLaunch = settings.launch
        self.env: dict[str, str] = dict(settings.env)
        self.failed: dict[str, int] = {}  # attempt key -> attempt number, for launches that never became ready
        self.epoch = 0
        self.records: list[AttemptRecord] = []
        self.machine: Machine | None = None
        self.shape: ModelConfig | None = None
        self.instructions: list[str] = []
        self.pending_changes: list[Change] = []
        self.server: Server | None = None
        self._compiled: CompiledPack | None = None
        self._idle: Any = None  # the GPU usage of an attempt that left GPUs idle
        self._not_released: str | None = None
        self._observations: list[str] = []  # info-level findings of the last triage

    # -- helpers ------------------------------------------------------------------

    def compiled(self) -> "CompiledPack":
        if self._compiled is None:
            self._compiled = self.deps.compiled()
        return self._compiled

    def full_env(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        return {**self.deps.base_env, **(self.env if env is None else env)}

    def context(self, diagnoses: list[Diagnosis] = ()) -> PlanContext:  # type: ignore[assignment]
        ctx = plan_context(self.machine, self.shape, self.deps.base_env)
        return ctx.model_copy(update={"untrusted_rules": self.untrusted_rules(diagnoses)})

    def untrusted_rules(self, diagnoses: list[Diagnosis]) -> frozenset[str]:
        """Rules of these diagnoses that were not bundled (``--rules``, ``QWEN_TRIAGE_RULES``).

        Their steps are printed, never applied, unless ``--allow-rule-actions``:
        a rule pack from a stranger must not change a server it relaunches.
        Checks (``preflight.…``) and the tool's own findings are not rules of a pack.
        """
        ids = {d.rule for d in diagnoses if not d.rule.startswith("preflight.")}
        if self.deps.allow_rule_actions or not ids:
            return frozenset()
        from qwen_triage.rulepack.paths import bundled_rules_dir

        base = bundled_rules_dir().resolve()
        return frozenset(
            lr.rule.id for lr in self.compiled().pack.rules
            if lr.rule.id in ids and not Path(lr.path).resolve().is_relative_to(base)
        )

    def layout_gpus(self, launch: VllmLaunch, env: Mapping[str, str]) -> list[int]:
        """NVML indices of the GPUs this launch runs on."""
        m = self.machine
        if m is None or not m.nvml:
            return []
        visible = visible_indices(self.full_env(env), m.all_gpus)
        tp, pp, dp = requested(launch)
        return visible[: tp * pp * dp]

    def sleep(self, seconds: float) -> bool:
        """Wait; True when Ctrl-C came meanwhile."""
        return self.deps.stop.wait(seconds)

    def kill_now(self) -> None:
        if self.server is not None:
            self.server.kill_now()

    # -- the run ------------------------------------------------------------------

    def go(self) -> RunResult:
        s = self.s
        self.out.say(f"run {self.run_id}" + (f"; journal {s.journal}" if s.apply else " (dry run)"))
        self.out.item(f"command: {command_text(self.launch, self.env)}")
        if s.apply:  # a dry run launches nothing: nothing to journal
            self.journal.append(RunRecord(kind="run-start", run=self.run_id, time=iso(time.time()),
                                          argv=self.launch.to_argv(), env=self.env, apply=s.apply))
        try:
            self._go()
            raise AssertionError("unreachable")  # _go always ends with _Stop
        except _Stop as stop:
            return self._finish(stop)
        except BaseException:
            # A bug or an interrupt we did not plan for: never leave a server behind.
            server = self.server
            if server is not None and not server.done and not self.s.detach:
                server.kill_now()
                server.wait(30)
            raise

    def _finish(self, stop: _Stop) -> RunResult:
        from qwen_triage.runner.vllm.argv import parse_vllm_argv

        ready = next((r for r in reversed(self.records) if r.ready_after is not None), None)
        final_argv = final_env = final_cmd = None
        if ready is not None:
            final_argv, final_env = ready.argv, ready.env
            final_cmd = command_text(parse_vllm_argv(ready.argv), ready.env)
        elif not self.s.apply:
            final_argv, final_env = self.launch.to_argv(), self.env
            final_cmd = command_text(self.launch, self.env)
        if self.records:
            self.out.say("summary")
            self.out.summary(self.records)
        if stop.message:
            self.out.say(stop.message)
        if final_cmd is not None and ready is not None:
            self.out.say("working command (for your service file):")
            self.out.item(final_cmd)
        if self.s.apply:
            self.journal.append(RunRecord(
                kind="run-end", run=self.run_id, time=iso(time.time()), argv=self.s.launch.to_argv(),
                env=self.s.env, apply=self.s.apply, outcome=stop.outcome, exit_status=stop.status,
                attempts=len(self.records), final_argv=final_argv, final_env=final_env,
                instructions=self.instructions,
            ))
        detached = self.records[-1].pid if stop.outcome == "detached" and self.records else None
        return RunResult(
            run=self.run_id, exit_status=stop.status, outcome=stop.outcome, attempts=self.records,
            final_argv=final_argv, final_env=final_env, final_command=final_cmd, detached_pid=detached,
            instructions=self.instructions, journal=str(self.s.journal), log_dir=str(self.log_dir),
        )

    def _go(self) -> None:
        s = self.s
        if s.preflight:
            self.preflight()
        else:
            self.out.say("preflight skipped (--no-preflight): launching the command as given")
            machine, _, _, notes, _ = probe_machine(
                self.launch, self.full_env(), gpus=s.gpus, expected_gpus=s.expected_gpus,
                gpu_memory_gib=s.gpu_memory_gib, gpu_probe=self.deps.gpu_probe,
            )
            self.machine = machine
            self.shape, _ = model_config_for(self.launch)
        if not s.apply:
            self.out.say("dry run (no --apply): this is the command the runner would launch first:")
            self.out.item(command_text(self.launch, self.env))
            raise _Stop(EXIT_READY, "dry-run")
        restart_proven = False
        for n in range(1, s.attempts + 1):
            if n > 1:
                delay = min(60.0, s.backoff * 2 ** (n - 2))
                if delay:
                    self.out.say(f"relaunching in {delay:g} s")
                    if self.sleep(delay):
                        raise _Stop(EXIT_INTERRUPTED, "interrupted", "interrupted before the relaunch")
                self.check_port_before(n)
            if self.deps.stop.is_set():
                raise _Stop(EXIT_INTERRUPTED, "interrupted", "interrupted before the server was ready")
            key = attempt_key(self.launch, self.env, self.epoch)
            if key in self.failed and not restart_proven:
                raise _Stop(EXIT_GAVE_UP, "identical", f"attempt {n} would repeat attempt {self.failed[key]}, which failed")
            outcome, diagnoses, rec = self.attempt(n, key)
            if outcome in ("ready", "detached", "stopped"):
                status = EXIT_READY
                msg = {"ready": "the server was proven ready and stopped (--stop-when-ready)",
                       "detached": f"the server runs detached: pid {rec.pid}, log {rec.log}",
                       "stopped": "the server was stopped (Ctrl-C) after it had been ready"}[outcome]
                raise _Stop(status, outcome, msg)
            if outcome == "interrupted":
                raise _Stop(EXIT_INTERRUPTED, "interrupted", "interrupted before the server was ready")
            if outcome == "not-started":
                raise _Stop(EXIT_USAGE, "not-started", f"cannot run {self.launch.prefix[0]!r}: {'; '.join(rec.notes)}")
            proven = rec.ready_after is not None
            if not proven:
                self.failed[key] = n
            restart_proven = self.next_launch(n, outcome, diagnoses, proven)
        raise _Stop(EXIT_GAVE_UP, "attempts-exhausted", f"gave up after {s.attempts} attempt(s) (--attempts)")

    # -- preflight --------------------------------------------------------------------

    def preflight(self) -> None:
        s = self.s
        self.out.say("preflight: check-model, doctor, plan, port")
        pre: PreflightResult = run_preflight(
            self.launch, self.full_env(), gpus=s.gpus, expected_gpus=s.expected_gpus,
            gpu_memory_gib=s.gpu_memory_gib, gpu_probe=self.deps.gpu_probe, check_port=True,
        )
        self.machine, self.shape = pre.machine, pre.shape
        for n in pre.notes:
            self.out.item(n)
        self.out.diagnoses(pre.diagnoses)
        plan = build_fix_plan(pre.diagnoses, self.launch, self.env, self.context(pre.diagnoses), preflight=True)
        self.show_plan(plan)
        self.launch, self.env = plan.launch, plan.env
        self.pending_changes = plan.changes
        if plan.needs_user:
            self.need_user(plan)

    def show_plan(self, plan: FixPlan) -> None:
        if plan.changes or plan.instructions or plan.findings or plan.notes:
            self.out.say("fix plan")
            self.out.plan(plan)

    def need_user(self, plan: FixPlan) -> None:
        """Only the user can fix it: wait for the fix (when a probe can tell), else stop with exit 3."""
        self.instructions = [f"{i.step} (for {i.diagnosis})" for i in plan.manual]
        if not plan.manual:
            raise _Stop(EXIT_GAVE_UP, "no-fix", "no automatic fix is left for: " + "; ".join(plan.blocking))
        if not (self.s.wait_for_fix and self.s.apply and plan.waitable()):
            why = "" if self.s.wait_for_fix or not plan.waitable() else " (--wait-for-fix would wait for it)"
            raise _Stop(EXIT_MANUAL, "needs-user", "stopped: the steps above need you" + why)
        checks = {(i.verify, tuple(sorted(i.verify_args.items()))) for i in plan.manual if i.verify}
        self.out.say(f"waiting for the fix (--wait-for-fix, up to {self.s.wait_timeout:g} s): "
                     + ", ".join(sorted(k for k, _ in checks)))
        deadline = time.monotonic() + self.s.wait_timeout
        while True:
            if all(verified(k, dict(a), check_port=self.deps.port_in_use, gpu_probe=self.deps.gpu_probe)
                   for k, a in checks):
                self.out.say("the fix is in place; continuing")
                self.epoch += 1
                return
            if time.monotonic() >= deadline:
                raise _Stop(EXIT_MANUAL, "needs-user", "stopped: the fix did not happen within --wait-timeout")
            if self.sleep(self.deps.wait_poll):
                raise _Stop(EXIT_INTERRUPTED, "interrupted", "interrupted while waiting for the fix")

    def check_port_before(self, n: int) -> None:
        """Before a relaunch: the port must be free. Our processes are gone by now, so a holder is someone
        else (a socket in TIME_WAIT does not count): a few seconds' grace, then it is diagnosed."""
        deadline = time.monotonic() + min(self.s.release_timeout, 5.0)
        while self.deps.port_in_use(self.launch.host, self.launch.effective_port):
            if time.monotonic() >= deadline:
                from qwen_triage.preflight.findings import load_classes, to_report
                from qwen_triage.runner.launch_checks import port_finding

                port = self.launch.effective_port
                diags, _ = to_report([port_finding(self.launch, probes.port_holders(port))], load_classes())
                self.out.say(f"port {port} is taken: attempt {n} is not launched")
                self.out.diagnoses(diags)
                plan = build_fix_plan(diags, self.launch, self.env, self.context(diags))
                self.show_plan(plan)
                self.need_user(plan)
                return
            if self.sleep(0.5):
                raise _Stop(EXIT_INTERRUPTED, "interrupted", "interrupted before the relaunch")

    # -- one attempt --------------------------------------------------------------------

    def make_server(self, n: int, env: dict[str, str]) -> Server:
        log = self.log_dir / f"attempt-{n}.log"
        if self.s.detach:
            return DetachedServer(self.launch.to_argv(), env, log, stall=self.s.stall or None, grace=self.s.grace)
        return SupervisedServer(
            self.launch.to_argv(), env, log, compiled=self.compiled(), stall=self.s.stall or None, grace=self.s.grace,
            show_output=self.s.show_output, on_event=self._live_event,
        )

    def _live_event(self, ev: "LiveEvent") -> None:
        if ev.kind == "diagnosis" and ev.item is not None:
            self.out.item(f"live: {ev.severity.value}: [{ev.item.rule}] {ev.item.title}")

    def attempt(self, n: int, key: str) -> tuple[str, list[Diagnosis], AttemptRecord]:
        s = self.s
        env = self.full_env()
        ep = endpoint_for(self.launch, env, s.health_url)
        gpus = self.layout_gpus(self.launch, self.env)
        before = snapshot_or_none(self.deps.gpu_probe) if gpus else None
        baseline = {g.index: g.memory.used for g in before.gpus} if before else None
        server = self.make_server(n, env)
        self.server = server
        self.out.say(f"attempt {n}/{s.attempts}: {command_text(self.launch, self.env)}")
        self.out.item(f"log: {server.log_path}")
        rec = AttemptRecord(run=self.run_id, attempt=n, key=key, argv=self.launch.to_argv(), env=self.env,
                            changes=self.pending_changes, started=iso(time.time()), outcome="running")
        self.pending_changes = []
        t0 = time.monotonic()
        try:
            server.start()
        except OSError as exc:
            rec.outcome, rec.notes = "not-started", [f"cannot start: {exc.strerror or exc}"]
            self.out.item(rec.notes[0])
            self.journal.append(rec)
            self.records.append(rec)
            return "not-started", [], rec
        rec.pid, rec.log = server.pid, str(server.log_path)
        pids: set[int] = set()
        outcome, detail = self.wait_ready(server, ep, t0, pids, gpus, baseline)
        if outcome == "ready":
            rec.ready_after = round(time.monotonic() - t0, 1)
            self.out.say(f"attempt {n} is ready after {rec.ready_after:g} s: {detail}")
            self.journal.append(ReadyRecord(run=self.run_id, attempt=n, time=iso(time.time()),
                                            ready_after=rec.ready_after, pid=server.pid, argv=rec.argv,
                                            env=rec.env, proof=detail))
            if s.detach:
                outcome = "detached"
            elif s.stop_when_ready:
                self.out.item("--stop-when-ready: stopping the server")
            else:
                self.out.say(f"serving on {ep.base} (pid {server.pid}); Ctrl-C stops it")
                outcome = self.serve(server, ep, pids)
        elif detail:
            self.out.item(detail)
        if outcome != "detached":
            self.stop_and_release(server, rec, pids, gpus, baseline)
        rec.seconds = round(time.monotonic() - t0, 1)
        rec.exit_status = server.exit_status if outcome != "detached" else None
        diagnoses: list[Diagnosis] = []
        if outcome not in ("ready", "detached", "stopped", "interrupted"):
            diagnoses = self.triage(server, rec, outcome, t0)
        rec.outcome = outcome
        rec.diagnoses = [DiagnosisBrief.of(d) for d in diagnoses]
        self.journal.append(rec)
        self.records.append(rec)
        return outcome, diagnoses, rec

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
                return "ready-timeout", f"not ready after {s.ready_timeout:g} s (--ready-timeout)"
            # Short: a foreign process holding the port accepts and never answers.
            r = health(ep, timeout=min(s.request_timeout, 2.0))
            if r.ok:
                pids.update(server.members())
                if listener_is_ours(ep.port, pids) is False:
                    # Someone else answers on our port: not our server's answer.
                    self.sleep(1.0)
                    continue
                proof = prove_api(ep, timeout=s.request_timeout, completion=s.completion,
                                  completion_timeout=s.completion_timeout)
                if proof.ok:
                    detail = f"/health 200, /v1/models serves {proof.model_id}, {proof.detail}"
                    if gpus:
                        usage = gpu_usage(snapshot_or_none(self.deps.gpu_probe), gpus, pids, baseline)
                        if usage.checked and usage.idle:
                            self._idle = usage
                            return "gpus-idle", usage.detail
                        detail += f"; {usage.detail}"
                    return "ready", detail
                if server.done:
                    continue
            if self.sleep(1.0):
                continue

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

    def triage(self, server: Server, rec: AttemptRecord, outcome: str, t0: float) -> list[Diagnosis]:
        report, notes = triage_attempt(server.log_path, self.compiled(), server.started_wall, time.time(),
                                       kernel=self.deps.kernel_log)
        rec.notes += notes
        self._observations = [f"[{o.rule}] {o.title}" for o in report.observations]
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

    # -- after a failure ------------------------------------------------------------------

    def next_launch(self, n: int, outcome: str, diagnoses: list[Diagnosis], proven: bool) -> bool:
        """Plan the next launch from this attempt's diagnoses; True when it restarts a proven command."""
        self.out.say(f"attempt {n}: {outcome}; triage of its log" + (" and the kernel log" if self.deps.kernel_log else ""))
        self.out.diagnoses(diagnoses, with_warnings=False)
        if not any(d.severity.rank <= 1 for d in diagnoses):
            for o in self._observations:
                self.out.item(f"observed: {o}")
        plan = build_fix_plan(diagnoses, self.launch, self.env, self.context(diagnoses))
        self.show_plan(plan)
        new_key = attempt_key(plan.launch, plan.env, self.epoch)
        if proven and (not plan.changed or new_key in self.failed):
            # It ran; something killed it (the kernel, a person, a dead engine).
            self.out.say("this command was proven ready before: restarting it as it is")
            self.pending_changes = []
            return True
        if plan.needs_user:
            self.need_user(plan)
            self.launch, self.env, self.pending_changes = plan.launch, plan.env, plan.changes
            return False
        if not plan.changed:
            raise _Stop(EXIT_GAVE_UP, "no-fix", "no automatic fix is left"
                        + (" for: " + "; ".join(d.rule for d in diagnoses if d.severity.rank <= 1) if diagnoses else
                           ": the log names no cause (see the attempt's log)"))
        if new_key in self.failed:
            raise _Stop(EXIT_GAVE_UP, "identical",
                        f"the fixed command is identical to attempt {self.failed[new_key]}, which failed: not launched")
        self.launch, self.env, self.pending_changes = plan.launch, plan.env, plan.changes
        return False


def _alive(pid: int) -> bool:
    from qwen_triage.live.procs import alive

    return alive(pid)


def relaunch(settings: RunSettings, deps: Deps) -> RunResult:
    return Run(settings, deps).go()


def default_paths(journal: str | None, log_dir: str | None) -> tuple[Path, Path]:
    from qwen_triage.runner.profile import default_state_dir

    base = default_state_dir()
    return (Path(journal).expanduser() if journal else base / "journal.jsonl",
            Path(log_dir).expanduser() if log_dir else base / "runs")
