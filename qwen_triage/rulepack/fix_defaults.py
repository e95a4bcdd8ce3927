"""The runner's per-class fix defaults of ``rules/fix-defaults.yaml``, kept as data.

What the runner does for a failure class when the rule that found it carries no
such step (a port clash: see who holds the port, then free it; a missing shard:
check the files, then download again) is knowledge about the failures, not
logic, so it lives beside the rules: schema-checked here (unknown keys
forbidden; actions from the typed vocabulary of ``actions.py``, whose safety
classes are fixed there, so this file cannot make a step safer than its type),
loaded with the strict loader (errors at ``file:line:col``), and linted by
``rules lint`` (class ids exist, values used are declared).

A step's text and string action fields may use ``{value}``, a value declared
under ``values`` as the first known of a list of sources: ``fact.NAME`` (the
diagnosis' fact) or ``launch.model`` / ``launch.port`` (the command's model,
its port or vLLM's default). A field that is just one ``{value}`` becomes null
when the value is unknown; a step with ``when: [value…]`` is left out unless
those values are known.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from qwen_triage.rulepack.actions import Action

FIX_DEFAULTS_FILE = "fix-defaults.yaml"

_VALUE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ACTION: TypeAdapter[Any] = TypeAdapter(Action)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DefaultStep(_Strict):
    step: str = Field(min_length=3)
    action: Action
    when: tuple[str, ...] = Field(default=(), description="values that must be known for the step to apply")

    def uses(self) -> set[str]:
        """The values the step's text and action name."""
        texts = [self.step] + _strings(self.action.model_dump(mode="json", exclude={"safety"}))
        return {name for text in texts for name in _VALUE.findall(text)} | set(self.when)


class ClassDefaults(_Strict):
    classes: tuple[str, ...] = Field(min_length=1)
    steps: tuple[DefaultStep, ...] = Field(min_length=1)


class FixDefaults(_Strict):
    values: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    defaults: tuple[ClassDefaults, ...]

    @field_validator("values")
    @classmethod
    def _sources(cls, values: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        for name, sources in values.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"value name {name!r} is not an identifier")
            if not sources:
                raise ValueError(f"value {name!r} has no source")
            for src in sources:
                if not re.fullmatch(r"fact\.[A-Za-z_][A-Za-z0-9_]*|launch\.(model|port)", src):
                    raise ValueError(f"value {name!r}: unknown source {src!r} (fact.NAME, launch.model, launch.port)")
        return values

    def problems(self, class_ids: set[str] | None = None) -> list[tuple[tuple[Any, ...], str]]:
        """(location in the file, reason) of what the schema alone cannot see."""
        out: list[tuple[tuple[Any, ...], str]] = []
        seen: set[str] = set()
        for i, entry in enumerate(self.defaults):
            for j, cid in enumerate(entry.classes):
                if class_ids is not None and cid not in class_ids:
                    out.append((("defaults", i, "classes", j), f"unknown class {cid!r}"))
                elif cid in seen:
                    out.append((("defaults", i, "classes", j), f"class {cid!r} has defaults twice"))
                seen.add(cid)
            for k, step in enumerate(entry.steps):
                for name in sorted(step.uses() - set(self.values)):
                    out.append((("defaults", i, "steps", k), f"step uses undeclared value {{{name}}}"))
        return out

    def steps_for(self, class_id: str) -> tuple[DefaultStep, ...]:
        return next((e.steps for e in self.defaults if class_id in e.classes), ())

    def resolve(self, facts: Mapping[str, Any], launch_value: Callable[[str], Any]) -> dict[str, str]:
        """The known values: the first truthy source of each (``launch_value('model'|'port')``)."""
        out: dict[str, str] = {}
        for name, sources in self.values.items():
            for src in sources:
                kind, _, key = src.partition(".")
                v = facts.get(key) if kind == "fact" else launch_value(key)
                if v:
                    out[name] = str(v)
                    break
        return out

    def render(self, class_id: str, values: Mapping[str, str]) -> list[tuple[str, dict[str, Any]]]:
        """(step text, action as JSON) of the class's defaults, for these values."""
        out = []
        for s in self.steps_for(class_id):
            if any(w not in values for w in s.when):
                continue
            action = _fill(s.action.model_dump(mode="json", exclude={"safety"}), values)
            out.append((_fill(s.step, values), _ACTION.validate_python(action).model_dump(mode="json")))
        return out


def _strings(data: Any) -> list[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [s for v in data.values() for s in _strings(v)]
    if isinstance(data, list):
        return [s for v in data for s in _strings(v)]
    return []


def _fill(data: Any, values: Mapping[str, str]) -> Any:
    if isinstance(data, str):
        whole = _VALUE.fullmatch(data)
        if whole:
            return values.get(whole.group(1))
        return _VALUE.sub(lambda m: values.get(m.group(1), ""), data)
    if isinstance(data, dict):
        return {k: _fill(v, values) for k, v in data.items()}
    if isinstance(data, list):
        return [_fill(v, values) for v in data]
    return data


def load_fix_defaults(path: Path, class_ids: set[str] | None = None) -> FixDefaults:
    """Validated fix defaults; a problem raises RuleFileError with file:line:col.

    With ``class_ids`` (the catalogue's), every class named must exist."""
    from qwen_triage.rulepack.errors import RuleFileError
    from qwen_triage.rulepack.yamlload import load_yaml

    loaded = load_yaml(path)
    parsed: FixDefaults = loaded.validate(FixDefaults)
    for loc, reason in parsed.problems(class_ids):
        pos = loaded.position_of(loc)
        raise RuleFileError(path, pos.line, pos.column, reason)
    return parsed


@functools.cache
def bundled_fix_defaults() -> FixDefaults:
    """The fix defaults shipped with the pack, loaded once per process."""
    from qwen_triage.rulepack.paths import bundled_rules_dir

    return load_fix_defaults(bundled_rules_dir() / FIX_DEFAULTS_FILE)
