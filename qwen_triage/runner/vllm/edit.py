"""Edit a vLLM launch: one option at a time, everything else as it was written.

``set_arg``/``remove_arg`` change only the option they name (keeping how it
was spelled: ``-tp``, ``--flag=value``); ``apply_action`` applies one of the
launch-editing actions of the rule vocabulary; ``apply_edits`` applies several,
each with its reason, and reports the changes (``diff.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from qwen_triage.rulepack.actions import (
    SAFE_ARGS,
    RemoveArg,
    RerunWithDebug,
    SetArg,
    SetEnv,
    UnsetEnv,
    env_edit_reason,
)
from qwen_triage.runner.vllm.argv import ArgToken, EntryPoint, VllmArgsError, VllmLaunch
from qwen_triage.runner.vllm.diff import Change, diff_launches
from qwen_triage.runner.vllm.options import MODEL_NAMES

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _rebuild(launch: VllmLaunch, args: Iterable[ArgToken]) -> VllmLaunch:
    return launch.with_args(args)


def set_arg(launch: VllmLaunch, flag: str, value: str | int | float | bool | Sequence[str] | None = None) -> VllmLaunch:
    """A new launch with ``flag`` set to ``value``; everything else kept as it was.

    The last occurrence is replaced in place (keeping how it was written: ``-tp``,
    ``--flag=value``); earlier duplicates are dropped; an option not yet given is
    appended. Boolean flags: ``value`` None/True/"true" → ``--flag``, False/"false"
    → ``--no-flag``. ``--model`` sets the model, wherever it was given.
    """
    table = launch.options
    name, neg = table.split_negation(table.canonical(flag))
    if not name.startswith("-"):
        raise VllmArgsError(f"not an option: {flag!r}")

    if name == "--model":
        if value is None or isinstance(value, bool) or not isinstance(value, str | int | float):
            raise VllmArgsError("--model needs one value")
        return _replace(launch, "--model", lambda old: old.model_copy(update={"values": (str(value),)}), lambda: _new_model(launch, str(value)))

    if name in table.bool_flags:
        if isinstance(value, bool) or value is None:
            on = value is not False
        elif isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            on = value.lower() in _TRUE
        else:
            raise VllmArgsError(f"{name} is a boolean flag; got value {value!r}")
        if neg:
            on = not on

        def upd(old: ArgToken) -> ArgToken:
            if on and not old.negated and old.style != "equals":
                return old
            written = name if on else "--no-" + name[2:]
            return ArgToken(name=name, written=written, negated=not on)

        return _replace(launch, name, upd, lambda: ArgToken(name=name, written=name if on else "--no-" + name[2:], negated=not on))

    if value is None or value is True:
        if table.takes(name) in ("one", "multi"):
            raise VllmArgsError(f"{name} needs a value")
        values: tuple[str, ...] = ()
    elif isinstance(value, bool):
        raise VllmArgsError(f"{name} is not a boolean flag")
    elif isinstance(value, str | int | float):
        values = (str(value),)
    else:
        values = tuple(str(v) for v in value)
        if len(values) > 1 and name not in table.multi_flags:
            raise VllmArgsError(f"{name} takes one value")
        if not values:
            raise VllmArgsError(f"{name} needs a value")

    def upd_value(old: ArgToken) -> ArgToken:
        style = old.style
        if style in ("equals", "attached") and len(values) != 1:
            style = "space"
        if not values:
            style = "space"
        return old.model_copy(update={"values": values, "style": style, "negated": False})

    return _replace(launch, name, upd_value, lambda: ArgToken(name=name, written=name, values=values))


def _new_model(launch: VllmLaunch, model: str) -> list[ArgToken]:
    if launch.entry is EntryPoint.serve:
        return [ArgToken(name="<model>", written="", values=(model,), style="positional")]
    return [ArgToken(name="--model", written="--model", values=(model,))]


def _replace(launch: VllmLaunch, name: str, update, create) -> VllmLaunch:
    names = {"--model", "<model>"} if name == "--model" else {name}
    idx = [i for i, a in enumerate(launch.args) if a.name in names]
    args = list(launch.args)
    if idx:
        keep = idx[-1]
        args[keep] = update(args[keep])
        args = [a for i, a in enumerate(args) if i == keep or i not in idx]
        return _rebuild(launch, args)
    new = create()
    new = new if isinstance(new, list) else [new]
    if name == "--model":
        return _rebuild(launch, [*new, *args])  # the model goes first
    return _rebuild(launch, [*args, *new])


def remove_arg(launch: VllmLaunch, flag: str) -> VllmLaunch:
    """A new launch without ``flag`` (every occurrence, any spelling, both
    ``--x``/``--no-x``); unchanged when it was not given."""
    name = launch.options.name_of(flag)
    if name in MODEL_NAMES:
        raise VllmArgsError("the model cannot be removed")
    return _rebuild(launch, [a for a in launch.args if a.name != name])


# --- actions ---------------------------------------------------------------------------


def rule_edit_reason(launch: VllmLaunch, action: SetArg | RemoveArg | SetEnv | UnsetEnv | RerunWithDebug) -> str | None:
    """Why a launch edit from a rule may not be made automatically; None when it may.

    The action already checked its flag against the allow-list as a rule wrote
    it; this checks the option vLLM's own table says it sets (an alias or a
    spelling the rule vocabulary does not know must not slip through).
    """
    if isinstance(action, SetArg | RemoveArg):
        name = launch.options.name_of(action.arg)
        if name not in SAFE_ARGS or name in MODEL_NAMES:
            return f"not a launch option the runner may change ({action.arg}: {name})"
        return None
    if isinstance(action, RerunWithDebug):
        return next((r for k, v in action.env.items() if (r := env_edit_reason(k, v))), None)
    return env_edit_reason(action.name, action.value if isinstance(action, SetEnv) else None)



class EditResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    launch: VllmLaunch
    env: dict[str, str]
    changes: list[Change]


def apply_action(
    launch: VllmLaunch, env: Mapping[str, str], action: SetArg | RemoveArg | SetEnv | UnsetEnv
) -> tuple[VllmLaunch, dict[str, str]]:
    """Apply one of the launch-editing actions of ``qwen_triage.rulepack.actions``."""
    env = dict(env)
    if isinstance(action, SetArg):
        return set_arg(launch, action.arg, action.value), env
    if isinstance(action, RemoveArg):
        return remove_arg(launch, action.arg), env
    if isinstance(action, SetEnv):
        env[action.name] = action.value
        return launch, env
    if isinstance(action, UnsetEnv):
        env.pop(action.name, None)
        return launch, env
    raise VllmArgsError(f"not a launch edit: {getattr(action, 'type', type(action).__name__)}")


def _action_key(launch: VllmLaunch, action: Any) -> str:
    if isinstance(action, SetArg | RemoveArg):
        name = launch.options.name_of(action.arg)
        return "--model" if name == "<model>" else name
    return action.name


def apply_edits(
    launch: VllmLaunch,
    env: Mapping[str, str],
    edits: Iterable[tuple[SetArg | RemoveArg | SetEnv | UnsetEnv, str]],
) -> EditResult:
    """Apply (action, reason) pairs in order; the changes carry their reasons."""
    new, new_env = launch, dict(env)
    reasons: dict[str, str] = {}
    for action, reason in edits:
        new, new_env = apply_action(new, new_env, action)
        key = _action_key(launch, action)
        if reason and reason not in reasons.get(key, "").split("; "):
            reasons[key] = f"{reasons[key]}; {reason}" if key in reasons else reason
    return EditResult(launch=new, env=new_env, changes=diff_launches(launch, env, new, new_env, reasons))
