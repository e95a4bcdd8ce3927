"""What ``relaunch`` prints: diagnoses, the fix plan as a diff, instructions, the summary table, the final command.

The diagnoses are worded by :mod:`qwen_triage.report.text` (its brief form); this
module lays out the runner's own content around them.

Plain text on stderr, one message per line, so a transcript reads the same in a
terminal, a CI log and the docs. The server's own output goes to the attempt's
log file (``--show-output`` passes it through as well).
"""

from __future__ import annotations

import shlex
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING

from qwen_triage.runner.vllm.argv import VllmLaunch
from qwen_triage.runner.vllm.diff import render_diff

if TYPE_CHECKING:
    from qwen_triage.report.model import Diagnosis
    from qwen_triage.runner.fixplan import FixPlan
    from qwen_triage.runner.runlog import AttemptRecord

TAG = "relaunch"


def command_text(launch: VllmLaunch, env: Mapping[str, str]) -> str:
    """The command as a shell line, with the environment it needs in front.

    Values are quoted; a name that is not a variable name (profiles refuse
    them, but an environment can come from elsewhere) goes through ``env`` with
    the whole assignment quoted, so nothing in it can run when pasted.

    A secret is never printed, and never printed as ``***`` either (pasted into
    a service file, the mask would become the key): a secret flag's value and a
    secret variable refer to a variable instead (``--api-key "$VLLM_API_KEY"``,
    ``HF_TOKEN="$HF_TOKEN"``), which the reader sets where the server runs.
    """
    from qwen_triage.redact import flag_variable, is_secret_env, redact_text, secret_flag_tokens
    from qwen_triage.runner.profile import valid_env_name
    from qwen_triage.textsafe import clean

    def ref(name: str) -> str:
        return f'"${name}"'

    items = sorted(env.items())
    if all(valid_env_name(k) for k, _v in items):
        assigns = [f"{k}={ref(k) if v and is_secret_env(k) else shlex.quote(redact_text(v))}" for k, v in items]
    else:
        assigns = ["env", *(shlex.quote(f"{k}={'***' if v and is_secret_env(k) else redact_text(v)}")
                            for k, v in items)]
    words: list[str] = []
    for t in secret_flag_tokens(launch.to_argv()):
        if t.flag is None:
            words.append(shlex.quote(redact_text(t.text)))
        elif t.value is None:
            words.append(shlex.quote(t.text))
        elif t.inline:
            words.append(f"{shlex.quote(t.flag)}={ref(flag_variable(t.flag, env, t.value))}")
        else:
            words.append(ref(flag_variable(t.flag, env, t.value)))
    return clean(" ".join([*assigns, *words]))


class Printer:
    def __init__(self, stream: IO[str] | None = None, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.lock = threading.Lock()

    def line(self, text: str = "") -> None:
        """Every line relaunch prints: diagnoses, plans and port holders' command lines come from outside,
        so each line is masked and sanitised here (no secret, no escape sequence reaches the terminal)."""
        from qwen_triage.redact import redact_text
        from qwen_triage.textsafe import clean

        text = clean(redact_text(text), newlines=True)
        with self.lock:
            try:
                self.stream.write(text + "\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass

    def say(self, text: str) -> None:
        self.line(f"{TAG}: {text}")

    def item(self, text: str, indent: int = 2) -> None:
        pad = " " * indent
        self.line("\n".join(pad + ln for ln in text.splitlines() or [""]))

    # -- blocks -----------------------------------------------------------------

    def diagnoses(self, diagnoses: Sequence["Diagnosis"], *, with_warnings: bool = True) -> None:
        shown = [d for d in diagnoses if d.severity.rank <= (2 if with_warnings else 1)]
        if not shown:
            self.item("no problem found")
            return
        from qwen_triage.report.text import brief_lines

        for d in shown:
            self.line("\n".join(brief_lines(d)))

    def plan(self, plan: "FixPlan") -> None:
        if plan.findings:
            for f in plan.findings:
                self.item(f"found: {f}")
        if plan.changes:
            self.item("changes (command line and environment):")
            self.item(render_diff(plan.changes).rstrip("\n"), indent=4)
        for n in plan.notes:
            self.item(f"note: {n}")
        manual = plan.manual
        if manual:
            self.item("needs you (the runner does not do these itself):")
            for i, ins in enumerate(manual, 1):
                extra = f"  [{ins.safety}]" if ins.safety in ("caution", "destructive") else ""
                self.item(f"{i}. {ins.step}{extra}", indent=4)
                self.item(f"for {ins.diagnosis}", indent=7)
        alternatives = [i for i in plan.instructions if not i.blocking and i.safety in ("caution", "destructive")]
        if alternatives:
            self.item("or instead, by hand:")
            for ins in alternatives:
                self.item(f"- {ins.step}  [{ins.safety}]", indent=4)

    def summary(self, attempts: Sequence["AttemptRecord"]) -> None:
        rows = [("#", "outcome", "time", "ready", "exit", "diagnoses", "changed")]
        for a in attempts:
            changed = ", ".join(sorted({c.name for c in a.changes})) or "-"
            diags = ", ".join(d.class_ for d in a.diagnoses if d.severity in ("critical", "error")) or "-"
            rows.append((
                str(a.attempt),
                a.outcome,
                f"{a.seconds:.1f}s",
                f"{a.ready_after:.1f}s" if a.ready_after is not None else "-",
                "-" if a.exit_status is None else str(a.exit_status),
                diags,
                changed,
            ))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            self.item("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
