"""What a relaunch changes: the difference between two launches (argv + environment).

By meaning, not spelling: ``-tp 2`` and ``--tensor_parallel_size=2`` are the
same. Each change carries its reason; ``render_diff`` prints one line per
change with secrets masked.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, computed_field

from qwen_triage.redact import MASK, is_secret_env, is_secret_flag
from qwen_triage.runner.vllm.argv import VllmLaunch
from qwen_triage.runner.vllm.options import BUILTIN


class Change(BaseModel):
    """One difference between two launches."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["command", "arg", "env"]
    name: str  # canonical option name, env var name, or "command"
    before: str | None  # None: not given / not set
    after: str | None
    reason: str = ""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def op(self) -> Literal["add", "remove", "change"]:
        if self.before is None:
            return "add"
        if self.after is None:
            return "remove"
        return "change"


def _settings(launch: VllmLaunch) -> dict[str, str]:
    """Canonical option → the value in effect (last occurrence; appended ones joined)."""
    out: dict[str, str] = {}
    for a in launch.config_args:  # the --config file's: the argv's own override them
        key = "--model" if a.name == "<model>" else a.name
        out[key] = a.display_value()
    extra = 0
    for a in launch.args:
        if a.name == "<positional>":
            extra += 1
            out[f"<positional {extra}>"] = a.display_value()
            continue
        key = "--model" if a.name == "<model>" else a.name
        if key in launch.options.append_flags and key in out:
            out[key] = f"{out[key]}; {a.display_value()}"
        else:
            out.pop(key, None)  # re-insert: order of the last occurrence
            out[key] = a.display_value()
    return out


def diff_launches(
    before: VllmLaunch,
    before_env: Mapping[str, str],
    after: VllmLaunch,
    after_env: Mapping[str, str],
    reasons: Mapping[str, str] | None = None,
    default_reason: str = "",
) -> list[Change]:
    """The changes from one launch (argv + env) to another, by meaning, not spelling:
    ``-tp 2`` and ``--tensor_parallel_size=2`` are the same. ``reasons`` maps a
    canonical option name (``--tensor-parallel-size``, ``--model``) or an env
    name to the reason for its change."""
    reasons = reasons or {}
    changes: list[Change] = []
    if before.entry != after.entry or before.prefix != after.prefix:
        changes.append(
            Change(kind="command", name="command", before=shlex.join(before.prefix), after=shlex.join(after.prefix),
                   reason=reasons.get("command", default_reason))
        )
    b, a = _settings(before), _settings(after)
    for key, val in a.items():
        if b.get(key) != val:
            changes.append(Change(kind="arg", name=key, before=b.get(key), after=val, reason=reasons.get(key, default_reason)))
    for key, val in b.items():
        if key not in a:
            changes.append(Change(kind="arg", name=key, before=val, after=None, reason=reasons.get(key, default_reason)))
    for key in sorted(set(before_env) | set(after_env)):
        bv, av = before_env.get(key), after_env.get(key)
        if bv != av:
            changes.append(Change(kind="env", name=key, before=bv, after=av, reason=reasons.get(key, default_reason)))
    return changes


def _mask(change: Change, value: str | None) -> str | None:
    if value is None:
        return None
    secret = is_secret_flag(change.name) if change.kind == "arg" else is_secret_env(change.name)
    return MASK if secret and value else value


def render_diff(changes: Sequence[Change]) -> str:
    """One line per change, ``+`` added, ``-`` removed, ``~`` changed, each with its
    reason after ``#``. Secret values (``--api-key``, ``HF_TOKEN``…) are masked."""
    if not changes:
        return "(no changes)\n"
    rows: list[tuple[str, str]] = []
    for c in changes:
        bv, av = _mask(c, c.before), _mask(c, c.after)
        sym = {"add": "+", "remove": "-", "change": "~"}[c.op]
        if c.kind == "env":
            what = f"env {c.name}=" + (f"{bv} -> {av}" if c.op == "change" else (av if c.op == "add" else bv) or "")
        elif c.kind == "command":
            what = f"command: {bv} -> {av}"
        else:
            what = _arg_text(c.name, bv, av, c.op)
        rows.append((f"{sym} {what}", c.reason))
    width = max(len(r[0]) for r in rows)
    lines = [f"{left.ljust(width)}  # {reason}" if reason else left for left, reason in rows]
    return "\n".join(lines) + "\n"


def _arg_text(name: str, bv: str | None, av: str | None, op: str) -> str:
    def one(v: str | None) -> str:
        if name in BUILTIN.bool_flags:
            return name if v == "true" else "--no-" + name[2:]
        if name.startswith("<positional"):
            return shlex.quote(v or "")
        return f"{name} {shlex.quote(v) if v else ''}".rstrip()

    if name == "--model":
        return f"model: {bv} -> {av}" if op == "change" else f"model {av if op == 'add' else bv}"
    if op == "change":
        if name in BUILTIN.bool_flags:
            return f"{one(bv)} -> {one(av)}"
        return f"{name}: {bv} -> {av}"
    return one(av if op == "add" else bv)
