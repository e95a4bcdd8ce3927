"""Where a reader stopped: the positions ``check`` saves between runs and a reader resumes from.

Pydantic models because the state file they are saved in (``check --state``) is written and read by a
process that may run as root: data only, validated on load, unknown keys ignored so an older state
file still loads. Kept out of :mod:`qwen_triage.inputs.base` so that ``scan``, which keeps no position,
never imports pydantic.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Position(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class FileCursor(_Position):
    """Where a file source was read to, and which file that was."""

    dev: int = Field(ge=0)
    ino: int = Field(ge=0)
    offset: int = Field(default=0, ge=0)
    head_len: int = Field(default=0, ge=0)  # bytes hashed at the start of the file
    head_hash: str = ""  # sha256 of those bytes: a different file at the same inode, or one rewritten in place
    line: int = 0  # lines read from this file so far


class SourceState(_Position):
    """A reader's position: what to resume from, per kind of source."""

    kind: str  # "file", "journal", "kernel-journal", "kmsg", "dmesg"
    cursor: str | None = None  # journal: __CURSOR of the last entry read
    file: FileCursor | None = None
    kmsg_seq: int | None = None  # /dev/kmsg: sequence number of the last record read
    dmesg_ts: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # dmesg: timestamp of the last line read
    boot_id: str = ""  # boot the kmsg/dmesg position belongs to
    lines_total: int = 0  # lines read from this source since the state began (a counter)
    bytes_total: int = 0
