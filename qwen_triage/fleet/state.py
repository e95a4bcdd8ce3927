"""The `check --state DIR` store: how far each source was read, and which diagnoses are active.

One JSON file (``state.json``) in a directory only its owner can enter (0700; the
file 0600), replaced atomically (temporary file, fsync, rename) so a run killed
half-way leaves the previous state whole. Never pickle: the file is data, read by
a process that may run as root. A state file that cannot be read or validated is
treated as empty, with a note (the next run rewrites it); its size is bounded on
read and on write.

Hold semantics: a diagnosis stays active while new evidence keeps arriving, and
for ``hold`` seconds after the last evidence. Kernel hardware classes stay active
until the machine boots again (``/proc/sys/kernel/random/boot_id`` changes): an
Xid 79 does not heal because the log went quiet. Which classes those are is data
(``held_until_boot`` in rules/classes.yaml, read by fleet/policy.py); a diagnosis
carries the answer as ``until_boot``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import time
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from qwen_triage.atomicfile import write_atomic
from qwen_triage.inputs.position import SourceState

STATE_VERSION = 1
STATE_FILE = "state.json"
LOCK_FILE = "lock"
MAX_STATE_BYTES = 4 << 20  # a bigger file is not ours (or is corrupt): start empty
MAX_SOURCES = 256
MAX_ACTIVE = 512
MAX_SUMMARY = 400
MAX_NOTES = 20
MAX_TIME = 2.0**37  # Unix seconds (year 6325): a later "time" is not one, and the state holding it is corrupt
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
BOOT_ID_ENV = "QWEN_TRIAGE_BOOT_ID_FILE"  # tests and containers: read the boot id from this file instead

def read_boot_id(path: str | None = None) -> str:
    """This boot's id; "" when the kernel does not say (then boot-held classes fall back to the hold time)."""
    path = path or os.environ.get(BOOT_ID_ENV) or BOOT_ID_FILE
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read(100).strip()
    except OSError:
        return ""


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class ActiveDiagnosis(_Model):
    class_: str = Field(alias="class")
    rule: str
    severity: str
    source: str
    summary: str = ""
    title: str = ""
    facts: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    first_seen: float = Field(ge=0, le=MAX_TIME, allow_inf_nan=False)
    last_seen: float = Field(ge=0, le=MAX_TIME, allow_inf_nan=False)
    count: int = Field(default=0, ge=0)
    boot_id: str = ""
    until_boot: bool = False
    symptom_of: str | None = None

    @property
    def key(self) -> str:
        return diagnosis_key(self.class_, self.source)


def diagnosis_key(class_id: str, source: str) -> str:
    return f"{class_id}\t{source}"


class State(_Model):
    version: int = STATE_VERSION
    sources: dict[str, SourceState] = Field(default_factory=dict)
    active: dict[str, ActiveDiagnosis] = Field(default_factory=dict)
    check_errors_total: int = 0
    checks_total: int = 0
    last_check: float = Field(default=0.0, ge=0, le=MAX_TIME, allow_inf_nan=False)
    boot_id: str = ""

    def expire(self, now: float, hold: float, boot_id: str) -> list[ActiveDiagnosis]:
        """Drop the diagnoses that cleared; return them."""
        cleared = []
        for key, d in list(self.active.items()):
            if d.until_boot and d.boot_id and boot_id:
                keep = d.boot_id == boot_id
            else:
                keep = now - d.last_seen < hold
            if not keep:
                cleared.append(self.active.pop(key))
        return cleared

    def bound(self) -> None:
        """Keep the file small whatever the logs say: cap counts and text sizes."""
        if len(self.sources) > MAX_SOURCES:
            for key in list(self.sources)[: len(self.sources) - MAX_SOURCES]:
                del self.sources[key]
        if len(self.active) > MAX_ACTIVE:
            newest = sorted(self.active.items(), key=lambda kv: kv[1].last_seen, reverse=True)[:MAX_ACTIVE]
            self.active = dict(newest)
        for d in self.active.values():
            d.summary = d.summary[:MAX_SUMMARY]
            d.title = d.title[:MAX_SUMMARY]
            d.facts = {k[:64]: (v[:200] if isinstance(v, str) else v) for k, v in list(d.facts.items())[:20]}


class StateError(Exception):
    """The state directory cannot be used at all (not creatable, not ours, locked too long)."""


class StateLocked(StateError):
    """Another check holds the state directory's lock."""


class StateStore:
    """The state directory: load, save atomically, and a lock so two checks do not interleave."""

    def __init__(self, directory: str | os.PathLike[str]):
        self.dir = Path(directory)
        self.path = self.dir / STATE_FILE
        self.notes: list[str] = []

    def prepare(self) -> None:
        """Create the directory (0700) or check the one there is ours: never through a symlink.

        Run as root, following a symlink someone else planted at the state path would make its
        target private to root and write the lock, state and cache there, so the path itself
        is looked at (``lstat``), and files inside are opened with ``O_NOFOLLOW``.
        """
        try:
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except FileExistsError:
            pass  # a symlink (perhaps dangling) or a file: refused below
        except OSError as exc:
            raise StateError(f"state directory {self.dir}: {exc.strerror}") from None
        try:
            st = os.lstat(self.dir)
        except OSError as exc:
            raise StateError(f"state directory {self.dir}: {exc.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            raise StateError(f"state directory {self.dir} is a symlink; give the real directory")
        if not stat.S_ISDIR(st.st_mode):
            raise StateError(f"state directory {self.dir} is not a directory")
        if st.st_uid != os.geteuid():
            raise StateError(f"state directory {self.dir} belongs to uid {st.st_uid}, not to this user")
        if st.st_mode & 0o077:
            try:
                fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    os.fchmod(fd, 0o700)
                finally:
                    os.close(fd)
            except OSError as exc:
                raise StateError(f"state directory {self.dir}: cannot make it private: {exc.strerror}") from None

    @contextlib.contextmanager
    def locked(self, timeout: float = 3.0) -> Iterator[None]:
        """Hold the directory's lock; StateError if another check keeps it longer than ``timeout``."""
        self.prepare()
        try:
            fd = os.open(self.dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise StateError(f"state directory {self.dir}: cannot open its lock: {exc.strerror}") from None
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise StateError(f"state directory {self.dir}: cannot lock: {exc.strerror}") from None
                    if time.monotonic() > deadline:
                        raise StateLocked(f"state locked by another check: {self.dir}") from None
                    time.sleep(0.05)
            yield
        finally:
            os.close(fd)

    def load(self) -> State:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            return State()
        except OSError as exc:
            self.notes.append(f"state file {self.path} unreadable ({exc.strerror}); starting empty")
            return State()
        try:
            with os.fdopen(fd, "rb") as fh:
                data = fh.read(MAX_STATE_BYTES + 1)
        except OSError as exc:
            self.notes.append(f"state file {self.path} unreadable ({exc.strerror}); starting empty")
            return State()
        if len(data) > MAX_STATE_BYTES:
            self.notes.append(f"state file {self.path} is larger than {MAX_STATE_BYTES} bytes; starting empty")
            return State()
        try:
            state = State.model_validate(json.loads(data))
        except (ValueError, ValidationError) as exc:
            first = str(exc).splitlines()[0][:200]
            self.notes.append(f"state file {self.path} is corrupt ({first}); starting empty")
            return State()
        if state.version != STATE_VERSION:
            self.notes.append(f"state file {self.path} has version {state.version}; starting empty")
            return State()
        return state

    def save(self, state: State) -> None:
        state.bound()
        data = state.model_dump_json(by_alias=True).encode()
        write_atomic(self.path, data, mode=0o600)
