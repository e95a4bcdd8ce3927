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

import secrets
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from qwen_triage import visible_devices
from qwen_triage.exits import EXIT_GAVE_UP, EXIT_INTERRUPTED, EXIT_MANUAL, EXIT_READY, EXIT_USAGE
from qwen_triage.report.model import Diagnosis
from qwen_triage.runner import probes
from qwen_triage.runner.attempt import Server, iso
from qwen_triage.runner.deps import Deps
from qwen_triage.runner.fixplan import FixPlan, PlanContext, attempt_key, build_fix_plan
from qwen_triage.runner.fixwait import manual_steps, wait_for_fix
from qwen_triage.runner.launch_checks import (
    Machine,
    PreflightResult,
    model_config_for,
    plan_context,
    probe_machine,
    run_preflight,
)
from qwen_triage.runner.layout import requested
from qwen_triage.runner.one_attempt import AttemptRunner
from qwen_triage.runner.profile import RunSettings
from qwen_triage.runner.render import command_text
from qwen_triage.runner.runlog import AttemptRecord, Journal, RunRecord
from qwen_triage.runner.stops import _Stop, interrupted
from qwen_triage.runner.vllm.argv import VllmLaunch
from qwen_triage.runner.vllm.diff import Change

if TYPE_CHECKING:
    from qwen_triage.engine.compiled import CompiledPack
    from qwen_triage.preflight.model.config import ModelConfig

__all__ = ["EXIT_GAVE_UP", "EXIT_INTERRUPTED", "EXIT_MANUAL", "EXIT_READY", "EXIT_USAGE", "Deps", "Run",
           "RunResult", "_Stop", "default_paths", "relaunch"]


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
        self._compiled: CompiledPack | None = None
        self.attempts = AttemptRunner(settings, deps, run_id=self.run_id, journal=self.journal,
                                      log_dir=self.log_dir, compiled=self.compiled)

    @property
    def server(self) -> Server | None:
        """The current attempt's server (None before the first)."""
        return self.attempts.server

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
        """Rules of these diagnoses whose steps are printed, never applied (see :func:`unbundled_rules`)."""
        if self.deps.allow_rule_actions:
            return frozenset()
        return unbundled_rules(diagnoses, self.compiled)

    def layout_gpus(self, launch: VllmLaunch, env: Mapping[str, str]) -> list[int]:
        """NVML indices of the GPUs this launch runs on."""
        m = self.machine
        if m is None or not m.nvml:
            return []
        tp, pp, dp = requested(launch)
        return m.seen_through(self.full_env(env).get(visible_devices.ENV)).visible[: tp * pp * dp]

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
                        raise interrupted("interrupted before the relaunch")
                self.check_port_before(n)
            if self.deps.stop.is_set():
                raise interrupted("interrupted before the server was ready")
            key = attempt_key(self.launch, self.env, self.epoch)
            if key in self.failed and not restart_proven:
                raise _Stop(EXIT_GAVE_UP, "identical", f"attempt {n} would repeat attempt {self.failed[key]}, which failed")
            outcome, diagnoses, rec = self.attempt(n, key)
            _end_after(outcome, rec, self.launch)
            proven = rec.ready_after is not None
            if not proven:
                self.failed[key] = n
            restart_proven = self.next_launch(n, outcome, diagnoses, proven)
        raise _Stop(EXIT_GAVE_UP, "attempts-exhausted", f"gave up after {s.attempts} attempt(s) (--attempts)")

    def attempt(self, n: int, key: str) -> tuple[str, list[Diagnosis], AttemptRecord]:
        """Launch attempt ``n`` of the current command; its record joins the run's."""
        changes, self.pending_changes = self.pending_changes, []
        gpus = self.layout_gpus(self.launch, self.env)
        outcome, diagnoses, rec = self.attempts.run(n, key, self.launch, self.env, self.full_env(), gpus, changes)
        self.records.append(rec)
        return outcome, diagnoses, rec

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
        self.instructions = manual_steps(plan)
        wait_for_fix(plan, self.s, self.deps)
        self.epoch += 1

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
                raise interrupted("interrupted before the relaunch")

    # -- after a failure ------------------------------------------------------------------

    def next_launch(self, n: int, outcome: str, diagnoses: list[Diagnosis], proven: bool) -> bool:
        """Plan the next launch from this attempt's diagnoses; True when it restarts a proven command."""
        self.out.say(f"attempt {n}: {outcome}; triage of its log" + (" and the kernel log" if self.deps.kernel_log else ""))
        self.out.diagnoses(diagnoses, with_warnings=False)
        if not any(d.severity.rank <= 1 for d in diagnoses):
            for o in self.attempts.observations:
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


def unbundled_rules(diagnoses: list[Diagnosis], compiled: Callable[[], "CompiledPack"]) -> frozenset[str]:
    """Rules of these diagnoses that were not bundled (``--rules``, ``QWEN_TRIAGE_RULES``).

    Their steps are printed, never applied, unless ``--allow-rule-actions``:
    a rule pack from a stranger must not change a server it relaunches.
    Checks (``preflight.…``) and the tool's own findings are not rules of a pack.
    """
    ids = {d.rule for d in diagnoses if not d.rule.startswith("preflight.")}
    if not ids:
        return frozenset()
    from qwen_triage.rulepack.paths import bundled_rules_dir

    base = bundled_rules_dir().resolve()
    return frozenset(
        lr.rule.id for lr in compiled().pack.rules
        if lr.rule.id in ids and not Path(lr.path).resolve().is_relative_to(base)
    )


def _end_after(outcome: str, rec: AttemptRecord, launch: VllmLaunch) -> None:
    """End the run when this attempt's outcome ends it (served, detached, stopped, interrupted, not started)."""
    if outcome in ("ready", "detached", "stopped"):
        msg = {"ready": "the server was proven ready and stopped (--stop-when-ready)",
               "detached": f"the server runs detached: pid {rec.pid}, log {rec.log}",
               "stopped": "the server was stopped (Ctrl-C) after it had been ready"}[outcome]
        raise _Stop(EXIT_READY, outcome, msg)
    if outcome == "interrupted":
        raise interrupted("interrupted before the server was ready")
    if outcome == "not-started":
        raise _Stop(EXIT_USAGE, "not-started", f"cannot run {launch.prefix[0]!r}: {'; '.join(rec.notes)}")


def relaunch(settings: RunSettings, deps: Deps) -> RunResult:
    return Run(settings, deps).go()


def default_paths(journal: str | None, log_dir: str | None) -> tuple[Path, Path]:
    from qwen_triage.runner.profile import default_state_dir

    base = default_state_dir()
    return (Path(journal).expanduser() if journal else base / "journal.jsonl",
            Path(log_dir).expanduser() if log_dir else base / "runs")
