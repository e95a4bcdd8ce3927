"""When only the user can fix it: say the steps, then wait for the fix (``--wait-for-fix``) or end the run.

Apart from the loop because waiting is a job of its own: the probes of
:func:`qwen_triage.runner.fixplan.verified` are polled until every manual step
is done, the deadline passes, or Ctrl-C comes.
"""

from __future__ import annotations

import time

from qwen_triage.exits import EXIT_GAVE_UP, EXIT_MANUAL
from qwen_triage.runner.deps import Deps
from qwen_triage.runner.fixplan import FixPlan, verified
from qwen_triage.runner.profile import RunSettings
from qwen_triage.runner.stops import _Stop, interrupted


def manual_steps(plan: FixPlan) -> list[str]:
    """The plan's steps for the user, as the run's result lists them."""
    return [f"{i.step} (for {i.diagnosis})" for i in plan.manual]


def wait_for_fix(plan: FixPlan, settings: RunSettings, deps: Deps) -> None:
    """Return once the user's fix is in place; else end the run (exit 1 without steps, 3 with, 130 on Ctrl-C)."""
    if not plan.manual:
        raise _Stop(EXIT_GAVE_UP, "no-fix", "no automatic fix is left for: " + "; ".join(plan.blocking))
    if not (settings.wait_for_fix and settings.apply and plan.waitable()):
        why = "" if settings.wait_for_fix or not plan.waitable() else " (--wait-for-fix would wait for it)"
        raise _Stop(EXIT_MANUAL, "needs-user", "stopped: the steps above need you" + why)
    checks = {(i.verify, tuple(sorted(i.verify_args.items()))) for i in plan.manual if i.verify}
    out = deps.printer
    out.say(f"waiting for the fix (--wait-for-fix, up to {settings.wait_timeout:g} s): "
            + ", ".join(sorted(k for k, _ in checks)))
    deadline = time.monotonic() + settings.wait_timeout
    while True:
        if all(verified(k, dict(a), check_port=deps.port_in_use, gpu_probe=deps.gpu_probe) for k, a in checks):
            out.say("the fix is in place; continuing")
            return
        if time.monotonic() >= deadline:
            raise _Stop(EXIT_MANUAL, "needs-user", "stopped: the fix did not happen within --wait-timeout")
        if deps.stop.wait(deps.wait_poll):
            raise interrupted("interrupted while waiting for the fix")
