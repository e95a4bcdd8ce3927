"""The fixed vocabulary of remediation actions a rule's fix step may carry.

Each action type has one safety class, fixed here and not by the rule author,
so a rule can never promote a machine-changing step to something the runner
applies on its own. There is deliberately no action that runs a command.

String values may hold ``{fact}`` placeholders, filled from the diagnosis'
facts when the report is built.

The launch edits (``set_arg``, ``remove_arg``, ``set_env``, ``unset_env``,
``rerun_with_debug``) are ``safe`` only for an allow-list of flags and
variables that change the layout, memory, context length, precision, NCCL
transport or graph capture (:data:`SAFE_ARGS`, :data:`SAFE_ENV`), and only
with a value of the right type (a fact from a log that does not parse as the
flag's number or choice is not a value). Anything else — the model, the
tokenizer, ``--api-key``, ``--trust-remote-code``, ``--host``, templates,
paths, ``LD_*``, ``PYTHON*``, proxies, credentials — is ``caution``: printed
for the user, never applied, whatever the rule file says. A contributed rule
pack once used ``set_arg``/``set_env`` to weaken a relaunched server (issue 10).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum
from typing import Annotated, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, computed_field, field_validator


class Safety(str, Enum):
    safe = "safe"  # changes only the next launch
    caution = "caution"  # changes the machine: frees a port, moves a file aside
    destructive = "destructive"  # deletes, resets a GPU, reboots


# --- what a launch edit may touch ---------------------------------------------------

_TEMPLATE = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
_USER_VALUE = re.compile(r"<[^>]*>")


def _int_in(lo: int, hi: int) -> Callable[[str], bool]:
    def ok(v: str) -> bool:
        return v.isascii() and v.isdigit() and len(v) <= 12 and lo <= int(v) <= hi

    return ok


def _float_in(lo: float, hi: float, lo_open: bool = False) -> Callable[[str], bool]:
    def ok(v: str) -> bool:
        if not re.fullmatch(r"\d{1,6}(?:\.\d{1,6})?", v):
            return False
        x = float(v)
        return (lo < x if lo_open else lo <= x) and x <= hi

    return ok


def _one_of(*choices: str) -> Callable[[str], bool]:
    return lambda v: v in choices


def _flag(v: str) -> bool:
    return v.lower() in ("true", "false")


_BIT = _one_of("0", "1")

# Canonical vLLM flag -> a check of its value (None: a bare flag, or true/false).
SAFE_ARGS: dict[str, Callable[[str], bool] | None] = {
    # layout
    "--tensor-parallel-size": _int_in(1, 1024),
    "--pipeline-parallel-size": _int_in(1, 1024),
    "--data-parallel-size": _int_in(1, 1024),
    "--enable-expert-parallel": None,
    "--distributed-executor-backend": _one_of("mp", "ray", "uni", "external_launcher"),
    # memory
    "--gpu-memory-utilization": _float_in(0.0, 1.0, lo_open=True),
    "--swap-space": _float_in(0, 1024),
    "--cpu-offload-gb": _float_in(0, 4096),
    "--max-num-seqs": _int_in(1, 1 << 20),
    "--max-num-batched-tokens": _int_in(1, 1 << 24),
    "--block-size": _one_of("1", "8", "16", "32", "64", "128", "256"),
    "--kv-cache-dtype": _one_of("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "bfloat16"),
    # context length
    "--max-model-len": _int_in(16, 1 << 24),
    # precision (quantization is printed only: it needs a checkpoint made for it)
    "--dtype": _one_of("auto", "half", "float16", "bfloat16", "float", "float32"),
    # graph capture
    "--enforce-eager": None,
    "--disable-custom-all-reduce": None,
    "--compilation-config": _int_in(0, 3),
    "--compilation-config.level": _int_in(0, 3),
    "--compilation-config.mode": _int_in(0, 3),
    "--optimization-level": _int_in(0, 3),
}

# Environment variable -> a check of its value. Interface names (NCCL_SOCKET_IFNAME)
# are facts about a site: printed, never guessed.
SAFE_ENV: dict[str, Callable[[str], bool]] = {
    # layout: which GPUs, in which order (indices only)
    "CUDA_VISIBLE_DEVICES": lambda v: bool(re.fullmatch(r"\d{1,3}(?:,\d{1,3}){0,63}", v)),
    "CUDA_DEVICE_ORDER": _one_of("PCI_BUS_ID", "FASTEST_FIRST"),
    "NCCL_P2P_DISABLE": _BIT,
    "NCCL_SHM_DISABLE": _BIT,
    "NCCL_IB_DISABLE": _BIT,
    "NCCL_NVLS_ENABLE": _BIT,
    "NCCL_CUMEM_ENABLE": _BIT,
    "NCCL_P2P_LEVEL": _one_of("LOC", "NVL", "PIX", "PXB", "PHB", "SYS"),
    "NCCL_DEBUG": _one_of("VERSION", "WARN", "INFO", "TRACE"),
    "NCCL_DEBUG_SUBSYS": lambda v: bool(re.fullmatch(r"\^?[A-Z]{2,10}(?:,\^?[A-Z]{2,10}){0,15}", v)),
    "TORCH_NCCL_TRACE_BUFFER_SIZE": _int_in(0, 1 << 20),
    "CUDA_LAUNCH_BLOCKING": _BIT,
}

# Short spellings a rule may use for an allow-listed flag (vLLM's own aliases).
_SHORT = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
    "-O": "--optimization-level",
    "-cc": "--compilation-config",
}

# Never changed by a rule, whatever the value: lint reports these as errors.
_DENIED_ARGS = frozenset(
    """--model --tokenizer --tokenizer-mode --revision --tokenizer-revision --code-revision --api-key
    --trust-remote-code --host --allowed-origins --allowed-methods --allowed-headers --allow-credentials
    --chat-template --chat-template-content-format --download-dir --config --served-model-name
    --ssl-keyfile --ssl-certfile --ssl-ca-certs --root-path --middleware --hf-token --hf-overrides
    --allowed-local-media-path --lora-modules --uds --tool-parser-plugin --logits-processors
    --worker-cls --worker-extension-cls --speculative-config --hf-config-path""".split()
)
_DENIED_ENV = re.compile(
    r"^(?:LD_\w*|DYLD_\w*|PYTHON\w*|\w*_PROXY|PATH|HOME|SHELL|BASH_ENV|ENV|HF_ENDPOINT|HF_HOME|HF_\w*CACHE\w*|HUGGING_FACE\w*|TRANSFORMERS_\w*"
    r"|VLLM_API_KEY|VLLM_\w*(?:PATH|DIR|PLUGINS?)|\w*(?:TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIALS?)\w*)$",
    re.IGNORECASE,
)


def canonical_arg(flag: str) -> tuple[str, bool]:
    """The long, dashed name of a flag as written in a rule, and whether it was ``--no-…``."""
    if not flag.startswith("--"):
        base, dot, rest = flag.partition(".")
        flag = _SHORT.get(base, flag) + dot + rest
        if not flag.startswith("--"):
            return flag, False
    base, dot, rest = flag[2:].partition(".")
    name = "--" + base.replace("_", "-") + dot + rest
    if name.startswith("--no-") and SAFE_ARGS.get("--" + name[5:], 0) is None:
        return "--" + name[5:], True
    return name, False


def _pending(value: str) -> bool:
    """A value filled later: from a fact (``{max_len}``) or by the user (``<interface>``)."""
    return bool(_TEMPLATE.search(value) or _USER_VALUE.search(value))


def arg_edit_reason(flag: str, value: str | None, *, removing: bool = False) -> str | None:
    """Why editing ``flag`` (to ``value``) is not a safe automatic edit; None when it is."""
    name, negated = canonical_arg(flag)
    if name not in SAFE_ARGS:
        return f"not a launch option the runner may change ({flag})"
    check = SAFE_ARGS[name]
    if removing or value is None or _pending(value):
        return None
    if check is None:
        return None if _flag(value) and not negated else f"{flag} is a bare flag; got {value!r}"
    return None if check(value) else f"{value!r} is not a valid value for {name}"


def env_edit_reason(name: str, value: str | None) -> str | None:
    """Why setting (or, with ``value`` None, unsetting) ``name`` is not a safe automatic edit; None when it is."""
    check = SAFE_ENV.get(name)
    if check is None:
        return f"not a variable the runner may change ({name})"
    if value is None or _pending(value):
        return None
    return None if check(value) else f"{value!r} is not a valid value for {name}"


def denied_reason(action: "_Action") -> str | None:
    """Why a rule action aims at something a rule must never change (lint: an error); None otherwise.

    A ``<…>`` value only the user can fill in (``HF_TOKEN: <your token>``) is an
    instruction by construction and is not reported.
    """
    arg = getattr(action, "arg", None)
    if isinstance(action, (SetArg, RemoveArg)) and arg is not None:
        name, _ = canonical_arg(arg)
        value = getattr(action, "value", None)
        if name in _DENIED_ARGS or name.startswith("--model") or "path" in name or name.endswith("-dir") \
                or name.endswith("-file") or name.startswith("--tokenizer"):
            if isinstance(action, SetArg) and value is not None and _USER_VALUE.fullmatch(value):
                return None
            return f"{arg}: a rule may never change the model, credentials, access, templates or paths"
        return None
    names: list[tuple[str, str | None]] = []
    if isinstance(action, (SetEnv, UnsetEnv)):
        names = [(action.name, getattr(action, "value", None))]
    elif isinstance(action, RerunWithDebug):
        names = list(action.env.items())
    for name, value in names:
        if _DENIED_ENV.match(name):
            if value is not None and _USER_VALUE.fullmatch(value):
                continue
            return f"{name}: a rule may never set loader, interpreter, proxy or credential variables"
    return None


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    SAFETY: ClassVar[Safety] = Safety.safe

    @computed_field  # type: ignore[prop-decorator]
    @property
    def safety(self) -> Safety:
        return self.SAFETY


# --- safe: they only change the next launch -------------------------------------


class _LaunchEdit(_Action):
    """A launch edit: ``safe`` for the allow-listed flags and variables, ``caution`` (printed) otherwise."""

    CONDITIONAL: ClassVar[bool] = True

    def unsafe_reason(self) -> str | None:
        raise NotImplementedError

    @computed_field  # type: ignore[prop-decorator]
    @property
    def safety(self) -> Safety:
        return Safety.caution if self.unsafe_reason() else Safety.safe


class SetArg(_LaunchEdit):
    """Set a launch argument (``--flag value``, or a bare ``--flag`` when value is null)."""

    type: Literal["set_arg"]
    arg: str = Field(pattern=r"^--?[A-Za-z0-9][A-Za-z0-9_.-]*$")
    value: str | None = None

    def unsafe_reason(self) -> str | None:
        return arg_edit_reason(self.arg, self.value)


class RemoveArg(_LaunchEdit):
    type: Literal["remove_arg"]
    arg: str = Field(pattern=r"^--?[A-Za-z0-9][A-Za-z0-9_.-]*$")

    def unsafe_reason(self) -> str | None:
        return arg_edit_reason(self.arg, None, removing=True)


class SetEnv(_LaunchEdit):
    type: Literal["set_env"]
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    value: str

    @field_validator("value")
    @classmethod
    def _devices_never_from_a_fact(cls, value: str, info: ValidationInfo) -> str:
        # which GPUs a server runs on is never read from a log line (a pack could move a relaunch onto another
        # job's GPUs with a fact a stranger printed): `exclude_gpu` narrows the launch's own devices instead
        if info.data.get("name") == "CUDA_VISIBLE_DEVICES" and _TEMPLATE.search(value):
            raise ValueError("CUDA_VISIBLE_DEVICES is never filled from a log fact; use exclude_gpu to leave a GPU out")
        return value

    def unsafe_reason(self) -> str | None:
        return env_edit_reason(self.name, self.value)


class UnsetEnv(_LaunchEdit):
    type: Literal["unset_env"]
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")

    def unsafe_reason(self) -> str | None:
        return env_edit_reason(self.name, None)


class ChooseLayout(_Action):
    """Re-plan tensor/pipeline/data parallel sizes for the GPUs available."""

    type: Literal["choose_layout"]


class LowerGpuMemoryUtilization(_Action):
    type: Literal["lower_gpu_memory_utilization"]
    to: float | None = Field(default=None, gt=0, le=1)
    step: float = Field(default=0.05, gt=0, lt=1)


class RaiseGpuMemoryUtilization(_Action):
    type: Literal["raise_gpu_memory_utilization"]
    to: float | None = Field(default=None, gt=0, le=1)
    step: float = Field(default=0.05, gt=0, lt=1)


class LowerMaxModelLen(_Action):
    """Lower ``--max-model-len``; ``to`` may name a fact (``{max_tokens}``)."""

    type: Literal["lower_max_model_len"]
    to: str | None = None


class ExcludeGpu(_Action):
    """Drop a GPU from ``CUDA_VISIBLE_DEVICES`` (by index or PCI address fact)."""

    type: Literal["exclude_gpu"]
    gpu: str


class VerifyFile(_Action):
    """Read-only integrity check of a model file (size, header, checksum)."""

    type: Literal["verify_file"]
    path: str | None = None


class CheckShm(_Action):
    """Read-only probe: is ``/dev/shm`` at least this big?"""

    type: Literal["check_shm"]
    min_bytes: int = Field(default=16 * 2**30, gt=0)


class CheckPort(_Action):
    """Read-only probe: who holds the port."""

    type: Literal["check_port"]
    port: str | None = None


class RerunWithDebug(_LaunchEdit):
    """Launch once more with extra logging (``NCCL_DEBUG=INFO``…) to gather evidence."""

    type: Literal["rerun_with_debug"]
    env: dict[str, str] = Field(default_factory=lambda: {"NCCL_DEBUG": "INFO"}, max_length=16)

    def unsafe_reason(self) -> str | None:
        return next((r for k, v in self.env.items() if (r := env_edit_reason(k, v))), None)


# --- caution: they change the machine; printed as instructions --------------------


class FreePort(_Action):
    SAFETY: ClassVar[Safety] = Safety.caution
    type: Literal["free_port"]
    port: str | None = None


class MoveFileAside(_Action):
    SAFETY: ClassVar[Safety] = Safety.caution
    type: Literal["move_file_aside"]
    path: str | None = None


class ContainerOption(_Action):
    """A container runtime option (``--shm-size 16g``, ``--gpus all``, ``--ipc host``)."""

    SAFETY: ClassVar[Safety] = Safety.caution
    type: Literal["container_option"]
    option: str
    value: str | None = None


class UpgradePackage(_Action):
    SAFETY: ClassVar[Safety] = Safety.caution
    type: Literal["upgrade_package"]
    package: str
    version: str | None = None


class StartService(_Action):
    SAFETY: ClassVar[Safety] = Safety.caution
    type: Literal["start_service"]
    service: str


class StopProcess(_Action):
    """Stop another process holding a resource (a GPU, a port)."""

    SAFETY: ClassVar[Safety] = Safety.caution
    type: Literal["stop_process"]
    what: str


class BiosSetting(_Action):
    SAFETY: ClassVar[Safety] = Safety.caution
    type: Literal["bios_setting"]
    setting: str


class Hardware(_Action):
    """Physical service: reseat, move slot, replace a cable or riser."""

    SAFETY: ClassVar[Safety] = Safety.caution
    type: Literal["hardware_service"]
    what: str


# --- destructive: deletes, resets, reboots --------------------------------------


class Redownload(_Action):
    SAFETY: ClassVar[Safety] = Safety.destructive
    type: Literal["redownload"]
    what: str | None = None


class ResetGpu(_Action):
    SAFETY: ClassVar[Safety] = Safety.destructive
    type: Literal["reset_gpu"]
    gpu: str | None = None


class Reboot(_Action):
    SAFETY: ClassVar[Safety] = Safety.destructive
    type: Literal["reboot"]


class ReloadDriver(_Action):
    SAFETY: ClassVar[Safety] = Safety.destructive
    type: Literal["reload_driver"]


class UpgradeDriver(_Action):
    SAFETY: ClassVar[Safety] = Safety.destructive
    type: Literal["upgrade_driver"]
    min_version: str | None = None


Action = Annotated[
    Union[
        SetArg,
        RemoveArg,
        SetEnv,
        UnsetEnv,
        ChooseLayout,
        LowerGpuMemoryUtilization,
        RaiseGpuMemoryUtilization,
        LowerMaxModelLen,
        ExcludeGpu,
        VerifyFile,
        CheckShm,
        CheckPort,
        RerunWithDebug,
        FreePort,
        MoveFileAside,
        ContainerOption,
        UpgradePackage,
        StartService,
        StopProcess,
        BiosSetting,
        Hardware,
        Redownload,
        ResetGpu,
        Reboot,
        ReloadDriver,
        UpgradeDriver,
    ],
    Field(discriminator="type"),
]

ACTION_TYPES: tuple[type[_Action], ...] = Action.__origin__.__args__  # type: ignore[attr-defined]


def type_name(cls: type[_Action]) -> str:
    return cls.model_fields["type"].annotation.__args__[0]  # type: ignore[union-attr]


def vocabulary() -> dict[str, Safety]:
    """Action type name -> safety class at best, for docs and lint messages (launch edits:
    ``safe`` only for the allow-listed flags and variables, see :func:`describe_actions`)."""
    return {type_name(cls): cls.SAFETY for cls in ACTION_TYPES}


def describe_actions() -> list[dict[str, object]]:
    """Every action type with its parameters and safety class (``qwen-triage rules actions``)."""
    out: list[dict[str, object]] = []
    for cls in ACTION_TYPES:
        params = []
        for name, f in cls.model_fields.items():
            if name == "type":
                continue
            params.append({
                "name": name,
                "type": str(f.annotation).replace("typing.", "").replace("<class '", "").replace("'>", ""),
                "required": f.is_required(),
                "default": None if f.is_required() else f.get_default(call_default_factory=True),
            })
        conditional = getattr(cls, "CONDITIONAL", False)
        out.append({
            "type": type_name(cls),
            "safety": "safe or caution" if conditional else cls.SAFETY.value,
            "parameters": params,
            "summary": (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else "",
            "note": ("safe only for the allow-listed flags/variables with a valid value; anything else is printed "
                     "(caution)") if conditional else "",
        })
    return out


def allow_lists() -> dict[str, list[str]]:
    """The flags and variables a launch edit may change on its own."""
    return {"args": sorted(SAFE_ARGS), "env": sorted(SAFE_ENV)}
