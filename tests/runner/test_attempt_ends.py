"""Why waiting for a server ends, and how a run ends after an attempt or when only the user can fix it.

Unit-level, without a server: one_attempt.AttemptRunner.ended_before_ready,
loop._end_after and fixwait.wait_for_fix against stand-ins.
"""

from __future__ import annotations

import io
import threading

import pytest

from qwen_triage.runner.deps import Deps
from qwen_triage.runner.fixplan import FixPlan, Instruction
from qwen_triage.runner.fixwait import manual_steps, wait_for_fix
from qwen_triage.runner.loop import _end_after
from qwen_triage.runner.one_attempt import AttemptRunner
from qwen_triage.runner.profile import RunSettings
from qwen_triage.runner.render import Printer
from qwen_triage.runner.runlog import AttemptRecord, Journal
from qwen_triage.runner.stops import _Stop
from qwen_triage.runner.vllm.argv import parse_vllm_argv


class _Stall:
    def describe(self) -> str:
        return "no output for 30 s"


class _Server:
    def __init__(self, *, done=False, status=None, reason=None, stall=None):  # type: ignore[no-untyped-def]
        self.done, self.exit_status, self.stop_reason, self.stall = done, status, reason, stall


def _settings(tmp_path, **kw) -> RunSettings:  # type: ignore[no-untyped-def]
    return RunSettings(launch=parse_vllm_argv(["vllm", "serve", "m"]), journal=tmp_path / "j.jsonl",
                       log_dir=tmp_path / "runs", ready_timeout=20, **kw)


def _deps(out: io.StringIO | None = None) -> Deps:
    return Deps(compiled=lambda: None, printer=Printer(out or io.StringIO()), wait_poll=0.01,  # type: ignore[arg-type,return-value]
                port_in_use=lambda host, port: False)


def _runner(tmp_path, deps: Deps) -> AttemptRunner:  # type: ignore[no-untyped-def]
    s = _settings(tmp_path)
    return AttemptRunner(s, deps, run_id="r", journal=Journal(s.journal), log_dir=s.log_dir, compiled=deps.compiled)


@pytest.mark.parametrize("server, now, outcome, detail", [
    (_Server(done=True, status=1), 0.0, "exited", "the server exited with status 1 before it was ready"),
    (_Server(done=True, status=143, reason="fatal diagnosis"), 0.0, "exited",
     "stopped by the runner (fatal diagnosis) before it was ready"),
    (_Server(stall=_Stall()), 0.0, "stalled", "stall: no output for 30 s"),
    (_Server(), 25.0, "ready-timeout", "not ready after 20 s (--ready-timeout)"),
])
def test_waiting_for_ready_ends_with_the_reason(tmp_path, server, now, outcome, detail) -> None:  # type: ignore[no-untyped-def]
    runner = _runner(tmp_path, _deps())
    assert runner.ended_before_ready(server, now, deadline=20.0) == (outcome, detail)


def test_waiting_goes_on_while_the_server_runs_within_its_time(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert _runner(tmp_path, _deps()).ended_before_ready(_Server(), 5.0, deadline=20.0) is None


def test_ctrl_c_ends_waiting_first(tmp_path) -> None:  # type: ignore[no-untyped-def]
    deps = _deps()
    deps.stop = threading.Event()
    deps.stop.set()
    got = _runner(tmp_path, deps).ended_before_ready(_Server(done=True, status=1), 0.0, deadline=20.0)
    assert got == ("interrupted", "interrupted (Ctrl-C)")


@pytest.mark.parametrize("outcome, status", [("ready", 0), ("detached", 0), ("stopped", 0), ("interrupted", 130),
                                             ("not-started", 2)])
def test_an_attempt_outcome_that_ends_the_run(outcome, status) -> None:  # type: ignore[no-untyped-def]
    rec = AttemptRecord(run="r", attempt=1, key="k", argv=["vllm"], env={}, started="t", outcome=outcome,
                        notes=["cannot start: No such file"])
    with pytest.raises(_Stop) as stop:
        _end_after(outcome, rec, parse_vllm_argv(["vllm", "serve", "m"]))
    assert (stop.value.status, stop.value.outcome) == (status, outcome)


@pytest.mark.parametrize("outcome", ["exited", "stalled", "ready-timeout", "gpus-idle", "died-after-ready"])
def test_a_failed_attempt_leaves_the_run_to_plan_the_next(outcome) -> None:  # type: ignore[no-untyped-def]
    rec = AttemptRecord(run="r", attempt=1, key="k", argv=["vllm"], env={}, started="t", outcome=outcome)
    assert _end_after(outcome, rec, parse_vllm_argv(["vllm", "serve", "m"])) is None


def _port_plan() -> FixPlan:
    step = Instruction(step="stop what holds port 8000", diagnosis="[port] taken", safety="caution",
                       verify="port", verify_args={"host": None, "port": 8000})
    return FixPlan(launch=parse_vllm_argv(["vllm", "serve", "m"]), env={}, instructions=[step],
                   blocking=["[port] taken"])


def test_no_step_for_the_user_is_no_fix(tmp_path) -> None:  # type: ignore[no-untyped-def]
    plan = FixPlan(launch=parse_vllm_argv(["vllm", "serve", "m"]), env={}, blocking=["[x] unknown"])
    with pytest.raises(_Stop) as stop:
        wait_for_fix(plan, _settings(tmp_path, apply=True, wait_for_fix=True), _deps())
    assert (stop.value.status, stop.value.outcome) == (1, "no-fix")


def test_a_checkable_step_without_wait_for_fix_stops_and_says_it_could_wait(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(_Stop) as stop:
        wait_for_fix(_port_plan(), _settings(tmp_path, apply=True), _deps())
    assert (stop.value.status, stop.value.outcome) == (3, "needs-user")
    assert "--wait-for-fix would wait for it" in stop.value.message
    assert manual_steps(_port_plan()) == ["stop what holds port 8000 (for [port] taken)"]


def test_wait_for_fix_returns_once_the_probe_says_done(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    wait_for_fix(_port_plan(), _settings(tmp_path, apply=True, wait_for_fix=True), _deps(out))
    assert "the fix is in place; continuing" in out.getvalue()


def test_wait_for_fix_gives_up_at_its_timeout(tmp_path) -> None:  # type: ignore[no-untyped-def]
    deps = _deps()
    deps.port_in_use = lambda host, port: True
    with pytest.raises(_Stop) as stop:
        wait_for_fix(_port_plan(), _settings(tmp_path, apply=True, wait_for_fix=True, wait_timeout=1), deps)
    assert (stop.value.status, stop.value.outcome) == (3, "needs-user")
    assert "did not happen within --wait-timeout" in stop.value.message
