"""From diagnoses to a fix plan: launch edits the runner makes, and instructions it only prints.

For each root-cause diagnosis (severity error or critical) the plan walks its
``fix`` steps in order:

* a ``safe`` step that edits the launch (an argument, an environment variable,
  the parallel layout, the memory fraction, the context length, a GPU left out,
  a debug rerun) is made concrete against the current command and applied —
  **one per diagnosis**: the steps of a rule are alternatives or an escalation
  ("if that is not enough, also ..."), so a step whose effect is already in the
  command (it was tried and failed) is skipped and the next one is taken;
* a ``safe`` read-only step (``check_port``, ``verify_file``, ``check_shm``) is
  run at once; what it finds goes into the instructions;
* ``caution`` and ``destructive`` steps, steps without an action, and safe steps
  that cannot be made concrete (a placeholder value such as ``<routable
  interface>``) become instructions. Where a probe can tell that one has been
  done, the instruction carries that probe, for ``--wait-for-fix``.

A launch edit from a rule is ``safe`` only for the allow-listed flags and
variables of ``rulepack/actions.py``, with a value of the right type; the
safety is recomputed here on the filled-in action (a fact from the log is
never trusted to be a number), and the edit is checked again against vLLM's
own option table (``edit.rule_edit_reason``). Diagnoses of rules loaded from
``--rules`` / ``QWEN_TRIAGE_RULES`` (``PlanContext.untrusted_rules``) change
nothing: their steps are printed, unless the user passed
``--allow-rule-actions``.

A diagnosis none of whose steps changes the launch *blocks*: relaunching would
fail the same way. Rules that lack the action the runner needs get the class's
default steps appended (``rules/fix-defaults.yaml``, see :func:`class_defaults`).

Identical attempts: :func:`attempt_key` names a launch (argv + the environment
the runner sets); the loop never relaunches a key that already failed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from qwen_triage.report.model import Diagnosis, FixOut
from qwen_triage.rulepack.actions import (
    Action,
    ChooseLayout,
    ExcludeGpu,
    LowerGpuMemoryUtilization,
    LowerMaxModelLen,
    RaiseGpuMemoryUtilization,
    RemoveArg,
    RerunWithDebug,
    Safety,
    SetArg,
    SetEnv,
    UnsetEnv,
)
from qwen_triage.rulepack.fix_defaults import FixDefaults, bundled_fix_defaults
from qwen_triage.runner import probes
from qwen_triage.runner.layout import (
    LAYOUT_ARGS,
    LayoutChoice,
    cpu_binding_env,
    is_cpu_build,
    visible_indices,
)
from qwen_triage.runner.vllm.argv import VllmArgsError, VllmLaunch
from qwen_triage.runner.vllm.diff import Change, diff_launches
from qwen_triage.runner.vllm.edit import apply_edits, rule_edit_reason
from qwen_triage.units import bounded_int, port_number

LaunchEdit = SetArg | RemoveArg | SetEnv | UnsetEnv
_ACTION: TypeAdapter[Any] = TypeAdapter(Action)
_PLACEHOLDER = re.compile(r"<[^>]*>|^lower$|\{\w+\}")
MIN_GPU_UTIL = 0.3
MAX_GPU_UTIL = 0.98
PROBES = ("check_port", "verify_file", "check_shm")


class Instruction(BaseModel):
    """A step for the user (or a safe step the runner could not make concrete)."""

    step: str
    diagnosis: str = Field(description="[rule] title of the diagnosis it belongs to")
    action: dict[str, Any] | None = None
    safety: str = Field(description="caution, destructive, manual (no action), or safe (not concrete)")
    verify: str | None = Field(default=None, description="probe that tells when it is done: port, model_files, shm, gpu_free")
    verify_args: dict[str, Any] = Field(default_factory=dict)
    blocking: bool = Field(default=True, description="False: an alternative to an edit the runner made")


class FixPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    launch: VllmLaunch
    env: dict[str, str] = Field(description="what the runner sets for the server, after the edits")
    changes: list[Change] = Field(default_factory=list)
    instructions: list[Instruction] = Field(default_factory=list)
    blocking: list[str] = Field(default_factory=list, description="diagnoses no automatic edit addresses")
    findings: list[str] = Field(default_factory=list, description="what the read-only probes found")
    notes: list[str] = Field(default_factory=list)
    layout: LayoutChoice | None = None

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    @property
    def manual(self) -> list[Instruction]:
        return [i for i in self.instructions if i.blocking]

    @property
    def needs_user(self) -> bool:
        """A diagnosis only the user can fix: relaunching now would fail again."""
        return bool(self.blocking)

    def waitable(self) -> bool:
        """Every blocking instruction has a probe: --wait-for-fix can tell when they are done."""
        manual = self.manual
        blocking_rules = set(self.blocking)
        covered = {i.diagnosis for i in manual if i.verify}
        return bool(manual) and blocking_rules <= covered


class PlanContext(BaseModel):
    """What the plan builder may consult: the machine, the model, a re-planner, the server's environment."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    base_env: dict[str, str] = Field(default_factory=dict, description="our environment: the server inherits it")
    replan: Callable[[VllmLaunch, dict[str, str]], LayoutChoice | None] | None = None
    pci_to_index: dict[str, int] = Field(default_factory=dict)
    gpu_count: int | None = None
    model_max_len: int | None = None
    run_probes: bool = True
    untrusted_rules: frozenset[str] = Field(
        default=frozenset(), description="rules from --rules / QWEN_TRIAGE_RULES: their steps are printed, not applied")

    def effective(self, env: Mapping[str, str]) -> dict[str, str]:
        return {**self.base_env, **env}


# --- class defaults: what a rule of that class should carry ---------------------------


def class_defaults(d: Diagnosis, launch: VllmLaunch, defaults: FixDefaults | None = None) -> list[FixOut]:
    """Steps the class implies (``rules/fix-defaults.yaml``), for rules that do not carry them (yet)."""
    table = defaults or bundled_fix_defaults()
    launch_values = {"model": launch.model, "port": launch.effective_port}
    values = table.resolve(d.facts, launch_values.get)
    have = {(s.action or {}).get("type") for s in d.fix}
    return [FixOut(step=step, action=action) for step, action in table.render(d.class_, values)
            if action.get("type") not in have]


# --- making an action concrete ---------------------------------------------------------


class NotConcrete(Exception):
    """A safe action that cannot be turned into a launch edit here; the reason is the message."""


def _placeholder(value: str | None) -> bool:
    return value is not None and bool(_PLACEHOLDER.search(value))


def _layout_edits(launch: VllmLaunch, choice: LayoutChoice) -> list[LaunchEdit]:
    out: list[LaunchEdit] = []
    for flag, value in zip(LAYOUT_ARGS, (choice.tp, choice.pp, choice.dp), strict=True):
        given = launch.last(flag) is not None  # in the argv or the --config file: the argv overrides either
        if given or value != 1:
            out.append(SetArg(type="set_arg", arg=flag, value=str(value)))
    if choice.max_model_len and (launch.max_model_len is None or launch.max_model_len > choice.max_model_len):
        out.append(SetArg(type="set_arg", arg="--max-model-len", value=str(choice.max_model_len)))
    return out


def _norm_pci(pci: str) -> str:
    # NVML says 00000000:3B:00.0, the kernel 0000:3b:00.0 or 0000:3b:00: compare bus:device.function
    parts = pci.lower().split(":")
    tail = ":".join(parts[-2:]) if len(parts) >= 2 else pci.lower()
    return tail if "." in tail else tail + ".0"


def _gpu_index(gpu: str, ctx: PlanContext) -> int | None:
    g = gpu.strip()
    if g.isdigit():
        return int(g) if len(g) <= 4 else None  # a fact from a log: bounded
    want = _norm_pci(g)
    for pci, idx in ctx.pci_to_index.items():
        if _norm_pci(pci) == want:
            return idx
    return None


def concretize(action: Any, launch: VllmLaunch, env: Mapping[str, str], ctx: PlanContext) -> tuple[list[LaunchEdit], LayoutChoice | None]:
    """The launch edits one safe action means for this launch; raises :class:`NotConcrete`."""
    eff = ctx.effective(env)
    if isinstance(action, SetArg | RemoveArg | SetEnv | UnsetEnv | RerunWithDebug):
        why = action.unsafe_reason() or rule_edit_reason(launch, action)
        if why:
            raise NotConcrete(f"{why}: printed, not applied")
    if isinstance(action, SetArg):
        if _placeholder(action.value):
            raise NotConcrete(f"{action.arg} needs a value only you can give ({action.value})")
        return [action], None
    if isinstance(action, RemoveArg):
        return [action], None
    if isinstance(action, SetEnv):
        if _placeholder(action.value):
            raise NotConcrete(f"{action.name} needs a value only you can give ({action.value})")
        if action.name == "CUDA_VISIBLE_DEVICES":
            own = visible_indices(eff, ctx.gpu_count or 0)
            wanted = [int(v) for v in action.value.split(",")]  # indices only (SAFE_ENV checked the form)
            if not wanted or not set(wanted) <= set(own) or len(set(wanted)) != len(wanted):
                raise NotConcrete(f"CUDA_VISIBLE_DEVICES={action.value} is not a subset of the launch's own GPUs "
                                  f"({','.join(map(str, own)) or 'none'}): printed, not applied")
        return [action], None
    if isinstance(action, UnsetEnv):
        if action.name in ctx.base_env and action.name not in env:
            raise NotConcrete(f"{action.name} is set in the environment the runner was started from: unset it there")
        return [action], None
    if isinstance(action, ChooseLayout):
        return _choose(launch, env, ctx)
    if isinstance(action, LowerGpuMemoryUtilization | RaiseGpuMemoryUtilization):
        cur = launch.gpu_memory_utilization or 0.9
        lower = isinstance(action, LowerGpuMemoryUtilization)
        new = action.to if action.to is not None else round(cur - action.step if lower else cur + action.step, 2)
        new = round(min(max(new, MIN_GPU_UTIL), MAX_GPU_UTIL), 2)
        if (lower and new >= cur) or (not lower and new <= cur):
            raise NotConcrete(f"--gpu-memory-utilization is already {cur:g}")
        return [SetArg(type="set_arg", arg="--gpu-memory-utilization", value=f"{new:g}")], None
    if isinstance(action, LowerMaxModelLen):
        limit = launch.max_model_len if launch.max_model_len and launch.max_model_len > 0 else ctx.model_max_len
        if action.to is not None:
            if _placeholder(action.to):
                raise NotConcrete(f"no value for {action.to} in the diagnosis")
            try:
                new = int(action.to) if action.to.isdigit() and len(action.to) <= 12 else int(float(action.to))
            except (ValueError, OverflowError):
                raise NotConcrete(f"not a length: {action.to!r}") from None
        elif limit:
            new = limit // 2
        else:
            raise NotConcrete("the current --max-model-len is unknown")
        if new < 16:
            raise NotConcrete(f"--max-model-len {new} would be useless")
        if limit is not None and new >= limit:
            raise NotConcrete(f"--max-model-len is already {limit}")
        return [SetArg(type="set_arg", arg="--max-model-len", value=str(new))], None
    if isinstance(action, ExcludeGpu):
        if not action.gpu.strip():  # `gpu: "[[{pci}]]"` on a line that did not say which GPU
            raise NotConcrete("the diagnosis does not say which GPU")
        idx = _gpu_index(action.gpu, ctx)
        if idx is None:
            raise NotConcrete(f"GPU {action.gpu} is not among the GPUs NVML lists")
        visible = visible_indices(eff, ctx.gpu_count or 0)
        if idx not in visible:
            raise NotConcrete(f"GPU {idx} is already left out")
        left = [v for v in visible if v != idx]
        if not left:
            raise NotConcrete(f"GPU {idx} is the only GPU left")
        edits: list[LaunchEdit] = [
            SetEnv(type="set_env", name="CUDA_DEVICE_ORDER", value="PCI_BUS_ID"),
            SetEnv(type="set_env", name="CUDA_VISIBLE_DEVICES", value=",".join(map(str, left))),
        ]
        new_env = {**env, **{e.name: e.value for e in edits if isinstance(e, SetEnv)}}
        more, choice = _choose(launch, new_env, ctx, required=False)
        return edits + more, choice
    if isinstance(action, RerunWithDebug):
        edits = [SetEnv(type="set_env", name=k, value=v) for k, v in action.env.items() if eff.get(k) != v]
        return edits, None
    raise NotConcrete(f"{getattr(action, 'type', action)} is not a launch edit")


def _choose(launch: VllmLaunch, env: Mapping[str, str], ctx: PlanContext, required: bool = True) -> tuple[list[LaunchEdit], LayoutChoice | None]:
    if ctx.replan is None:
        if required:
            raise NotConcrete("the model's shape is unknown, so no layout can be planned (run `qwen-triage plan`)")
        return [], None
    choice = ctx.replan(launch, dict(env))
    if choice is None:
        if required:
            raise NotConcrete("plan finds no layout of this model that runs on these GPUs")
        return [], None
    return _layout_edits(launch, choice), choice


# --- verification probes -------------------------------------------------------------


def verifier_for(action: dict[str, Any] | None, launch: VllmLaunch) -> tuple[str | None, dict[str, Any]]:
    """Which probe can tell that a manual step has been done."""
    if not action:
        return None, {}
    t = action.get("type")
    if t in ("free_port", "check_port") or (t == "stop_process" and "port" in str(action.get("what", ""))):
        port = action.get("port")
        return "port", {"host": launch.host, "port": port_number(port) or launch.effective_port}
    if t in ("redownload", "verify_file", "move_file_aside"):
        model = probes.local_model_dir(launch.model)
        return ("model_files", {"path": str(model)}) if model is not None else (None, {})
    if (t == "container_option" and action.get("option") == "--shm-size") or t == "check_shm":
        return "shm", {"min_bytes": int(action.get("min_bytes") or 16 * 2**30)}
    if t == "stop_process":
        m = re.search(r"\bGPU (\d+)\b", str(action.get("what", "")))
        gpu = bounded_int(m.group(1), max_digits=4) if m else None
        if gpu is not None:
            return "gpu_free", {"gpu": gpu, "fraction": launch.gpu_memory_utilization or 0.9}
    return None, {}


def run_probe(action: dict[str, Any], launch: VllmLaunch) -> list[str]:
    """What a read-only step finds, in words."""
    t = action.get("type")
    if t == "check_port":
        port = action.get("port")
        port = port_number(port) or launch.effective_port  # a port from a log line: 1..65535 or ignored
        holders = probes.port_holders(port)
        if holders:
            return [f"port {port} is held by " + "; ".join(h.describe() for h in holders)]
        try:
            busy = probes.port_in_use(launch.host, port)
        except OSError:
            busy = False
        return [f"port {port} is held by a process this user cannot see" if busy else f"port {port} is free now"]
    if t == "verify_file":
        model = probes.local_model_dir(launch.model)
        if model is None:
            return []
        problems = probes.model_file_problems(model)
        if problems is None:
            return []
        if not problems:
            return [f"check-model finds no problem in {model} now"]
        return [f"check-model {model}: {p.summary}" for p in problems]
    if t == "check_shm":
        size = probes.shm_bytes()
        need = int(action.get("min_bytes") or 16 * 2**30)
        if size is None:
            return ["/dev/shm cannot be read"]
        return [f"/dev/shm is {size / 2**30:.1f} GiB" + (f" (want {need / 2**30:.0f} GiB)" if size < need else "")]
    return []


def verified(
    kind: str,
    args: Mapping[str, Any],
    *,
    check_port: Callable[[str | None, int], bool] | None = None,
    gpu_probe: Any = None,
) -> bool:
    """True once the probe says the manual step is done."""
    if kind == "port":
        check = check_port or probes.port_in_use
        try:
            return not check(args.get("host"), int(args["port"]))
        except OSError:
            return False
    if kind == "model_files":
        problems = probes.model_file_problems(args["path"])
        return problems is not None and not problems
    if kind == "shm":
        size = probes.shm_bytes()
        return size is not None and size >= int(args["min_bytes"])
    if kind == "gpu_free":
        # as vLLM checks at start-up: the free memory covers --gpu-memory-utilization of the card
        from qwen_triage.runner.readiness import snapshot_or_none

        snap = snapshot_or_none(gpu_probe)
        g = next((g for g in snap.gpus if g.index == args["gpu"]), None) if snap else None
        return g is not None and g.memory.free >= float(args["fraction"]) * g.memory.total
    return False


# --- the plan --------------------------------------------------------------------------


def reason_of(d: Diagnosis) -> str:
    return f"[{d.rule}] {d.title}"


def _parse(action: dict[str, Any]) -> Any:
    data = {k: v for k, v in action.items() if k != "safety"}
    return _ACTION.validate_python(data)


def _apply(launch: VllmLaunch, env: dict[str, str], edits: list[LaunchEdit]) -> tuple[VllmLaunch, dict[str, str]]:
    res = apply_edits(launch, env, [(e, "") for e in edits])
    return res.launch, res.env


def _same(a: tuple[VllmLaunch, dict[str, str]], b: tuple[VllmLaunch, dict[str, str]]) -> bool:
    return not diff_launches(a[0], a[1], b[0], b[1])


def build_fix_plan(
    diagnoses: list[Diagnosis],
    launch: VllmLaunch,
    env: Mapping[str, str],
    ctx: PlanContext,
    *,
    extra_reasons: Mapping[str, str] | None = None,
    preflight: bool = False,
) -> FixPlan:
    """The fix plan for ``diagnoses`` against ``launch`` + ``env`` (the env the runner sets).

    ``preflight``: the command has not run yet, so its CPU-build thread binding
    is checked even when no diagnosis changes the layout.
    """
    planner = _Planner(launch, env, ctx)
    for d in diagnoses:
        if d.severity.rank <= 1:  # warnings and infos are shown, not acted on
            planner.diagnosis(d)
    planner.cpu_binding(preflight)
    return planner.plan(extra_reasons)


class _Planner:
    """One plan being built: the command as edited so far, and what the user is told.

    Diagnoses are taken in order; each may make one launch edit (its first
    concrete, safe step that changes the command). Steps that cannot be applied
    become instructions, blocking when the diagnosis got no edit at all.
    """

    def __init__(self, launch: VllmLaunch, env: Mapping[str, str], ctx: PlanContext):
        self.original = (launch, dict(env))
        self.launch, self.env, self.ctx = launch, dict(env), ctx
        self.reasons: dict[str, str] = {}
        self.instructions: list[Instruction] = []
        self.findings: list[str] = []
        self.notes: list[str] = []
        self.blocking: list[str] = []
        self.layout: LayoutChoice | None = None
        self.probed: set[str] = set()

    def note_reason(self, edits: list[LaunchEdit], reason: str) -> None:
        reasons = self.reasons
        for e in edits:
            key = e.name if isinstance(e, SetEnv | UnsetEnv) else self.original[0].options.name_of(e.arg)
            if reason not in reasons.get(key, "").split("; "):
                reasons[key] = f"{reasons[key]}; {reason}" if key in reasons else reason

    def diagnosis(self, d: Diagnosis) -> None:
        why = reason_of(d)
        if d.rule in self.ctx.untrusted_rules:
            # A contributed rule pack: its steps are shown, never applied (--allow-rule-actions).
            for s in d.fix:
                self.instructions.append(Instruction(
                    step=f"{s.step} (rule from --rules / QWEN_TRIAGE_RULES: not applied without --allow-rule-actions)",
                    diagnosis=why, action=s.action, safety=_strictest(s.action) if s.action else "manual"))
            self.blocking.append(why)
            return
        steps = list(d.fix) + class_defaults(d, self.original[0])
        chose_layout = any((s.action or {}).get("type") == "choose_layout" for s in steps)
        took = False
        manual: list[Instruction] = []
        for s in steps:
            step_took, instruction = self.step(s, why, took, chose_layout)
            took = took or step_took
            if instruction is not None:
                manual.append(instruction)
        for m in manual:
            m.blocking = not took
        self.instructions += manual
        if not took:
            self.blocking.append(why)

    def step(self, s: FixOut, why: str, took: bool, chose_layout: bool) -> tuple[bool, Instruction | None]:
        """One fix step: (whether it took: an edit now or one already made, an instruction for the user or None)."""
        a = s.action
        if a is None:
            return False, Instruction(step=s.step, diagnosis=why, safety="manual")
        safety = _strictest(a)  # recomputed on the filled-in values, never taken from the dict
        if safety != Safety.safe.value:
            kind, args = verifier_for(a, self.original[0])
            step = s.step + (f" ({r}: printed, not applied)" if (r := _unsafe_edit(a)) else "")
            return False, Instruction(step=step, diagnosis=why, action=a, safety=safety, verify=kind, verify_args=args)
        t = a.get("type")
        if t in PROBES:
            sig = json.dumps(a, sort_keys=True)
            if self.ctx.run_probes and sig not in self.probed:
                self.probed.add(sig)
                self.findings += run_probe(a, self.original[0])
            return False, None
        if took:
            return False, None
        if chose_layout and t == "set_arg" and self.original[0].options.name_of(a.get("arg", "")) in LAYOUT_ARGS:
            return False, None  # plan's own layout pick; the runner re-plans closest to the request instead
        return self.edit(s, a, why)

    def edit(self, s: FixOut, a: dict[str, Any], why: str) -> tuple[bool, Instruction | None]:
        """A safe launch edit: applied when it changes the command; else it took if it was made already."""
        try:
            action = _parse(a)
            edits, choice = concretize(action, self.launch, self.env, self.ctx)
        except (NotConcrete, ValidationError) as exc:
            msg = str(exc) if isinstance(exc, NotConcrete) else "malformed action"
            return False, Instruction(step=f"{s.step} ({msg})", diagnosis=why, action=a, safety="safe")
        try:
            after = _apply(self.launch, self.env, edits)
        except VllmArgsError as exc:
            return False, Instruction(step=f"{s.step} ({exc})", diagnosis=why, action=a, safety="safe")
        if not _same(after, (self.launch, self.env)):
            self.launch, self.env = after
            self.note_reason(edits, why)
            if choice is not None:
                self.layout = choice
            return True, None
        # No change now. Covered by an edit made earlier in this plan (a sibling
        # diagnosis with the same fix), or already in the command (tried, failed)?
        original = self.original
        try:
            edits0 = concretize(action, original[0], original[1], self.ctx)[0]
            if not _same(_apply(original[0], original[1], edits0), original):
                self.note_reason(edits0, why)
                return True, None
        except (NotConcrete, VllmArgsError):
            pass
        return False, None

    def cpu_binding(self, preflight: bool) -> None:
        """The CPU build needs one core group per rank; a new layout needs new groups."""
        eff = self.ctx.effective(self.env)
        world = self.launch.world_size
        if is_cpu_build(eff) and (preflight or world != self.original[0].world_size):
            bind = cpu_binding_env(world, eff)
            if bind:
                self.env = {**self.env, **bind}
                for k in bind:
                    self.reasons.setdefault(k, f"CPU build: one OpenMP core group per rank (TP x PP = {world})")

    def plan(self, extra_reasons: Mapping[str, str] | None) -> FixPlan:
        layout = self.layout
        if layout is not None and layout.plan_differs:
            self.notes.append(f"plan's own pick is {layout.plan_differs}; the runner keeps your replica count")
        for k, v in (extra_reasons or {}).items():
            self.reasons.setdefault(k, v)
        changes = diff_launches(self.original[0], self.original[1], self.launch, self.env, self.reasons)
        return FixPlan(launch=self.launch, env=self.env, changes=changes, instructions=self.instructions,
                       blocking=self.blocking, findings=self.findings, notes=self.notes, layout=layout)


def _safety(action: dict[str, Any]) -> str:
    try:
        return _parse(action).safety.value
    except ValidationError:
        return "manual"


_RANK = {"safe": 0, "caution": 1, "destructive": 2}


def _unsafe_edit(action: dict[str, Any]) -> str | None:
    """Why a launch edit (set_arg…) is not one the runner may make; None for other actions."""
    try:
        parsed = _parse(action)
    except ValidationError:
        return None
    reason = getattr(parsed, "unsafe_reason", None)
    return reason() if reason else None


def _strictest(action: dict[str, Any]) -> str:
    """The safety of an action as filled in, or the one it carries when that is stricter."""
    now = _safety(action)
    said = str(action.get("safety") or "safe")
    if now == "manual":
        return "manual"
    return said if _RANK.get(said, 1) > _RANK[now] else now


def attempt_key(launch: VllmLaunch, env: Mapping[str, str], epoch: int = 0) -> str:
    """Names a launch by what it does: argv (as run) and the environment the runner sets.

    ``epoch`` counts manual fixes verified by ``--wait-for-fix``: after one, the
    same command is a new attempt on a changed machine.
    """
    blob = json.dumps({"argv": launch.to_argv(), "env": sorted(env.items()), "epoch": epoch})
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


__all__ = [
    "FixPlan",
    "Instruction",
    "PlanContext",
    "attempt_key",
    "build_fix_plan",
    "class_defaults",
    "concretize",
    "run_probe",
    "verified",
    "verifier_for",
]
