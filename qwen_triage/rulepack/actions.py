"""The fixed vocabulary of remediation actions a rule's fix step may carry.

Each action type has one safety class, fixed here and not by the rule author,
so a rule can never promote a machine-changing step to something the runner
applies on its own. There is deliberately no action that runs a command.

String values may hold ``{fact}`` placeholders, filled from the diagnosis'
facts when the report is built.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, computed_field


class Safety(str, Enum):
    safe = "safe"  # changes only the next launch
    caution = "caution"  # changes the machine: frees a port, moves a file aside
    destructive = "destructive"  # deletes, resets a GPU, reboots


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    SAFETY: ClassVar[Safety] = Safety.safe

    @computed_field  # type: ignore[prop-decorator]
    @property
    def safety(self) -> Safety:
        return self.SAFETY


# --- safe: they only change the next launch -------------------------------------


class SetArg(_Action):
    """Set a launch argument (``--flag value``, or a bare ``--flag`` when value is null)."""

    type: Literal["set_arg"]
    arg: str = Field(pattern=r"^--?[A-Za-z0-9][A-Za-z0-9_-]*$")
    value: str | None = None


class RemoveArg(_Action):
    type: Literal["remove_arg"]
    arg: str = Field(pattern=r"^--?[A-Za-z0-9][A-Za-z0-9_-]*$")


class SetEnv(_Action):
    type: Literal["set_env"]
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    value: str


class UnsetEnv(_Action):
    type: Literal["unset_env"]
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")


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


class RerunWithDebug(_Action):
    """Launch once more with extra logging (``NCCL_DEBUG=INFO``…) to gather evidence."""

    type: Literal["rerun_with_debug"]
    env: dict[str, str] = Field(default_factory=lambda: {"NCCL_DEBUG": "INFO"})


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


def vocabulary() -> dict[str, Safety]:
    """Action type name -> safety class, for docs and lint messages."""
    return {cls.model_fields["type"].annotation.__args__[0]: cls.SAFETY for cls in ACTION_TYPES}
