"""Readers by name: ``build("file", path)``, ``build("journal", unit)``, ``build("kernel")``, ``build("process", pid)``.

Why a registry: callers (the CLI's ``--journal``/``--kernel``/paths, a config listing sources) name a kind of
source and get a :class:`~qwen_triage.inputs.base.Reader`, without knowing which module reads it or which of
several ways (the kernel: the journal, /dev/kmsg or dmesg) this machine offers. Each factory imports its module
when called, so naming a kind costs nothing until it is read. The table is a read-only constant, not state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from qwen_triage.inputs.base import Reader


def _file(path: str, from_end: bool = False) -> Reader:
    from qwen_triage.inputs.file import FileReader

    return FileReader(path, from_end=from_end)


def _journal(unit: str) -> Reader:
    from qwen_triage.inputs.journal import JournalReader

    return JournalReader(unit)


def _kernel() -> Reader:
    from qwen_triage.inputs.kernel import kernel_reader

    return kernel_reader()


def _process(pid: int, fd: int = 1, proc_root: str = "/proc") -> Reader:
    from qwen_triage.inputs.process import output_reader

    return output_reader(pid, fd, proc_root=proc_root)


READERS: Mapping[str, Callable[..., Reader]] = MappingProxyType(
    {"file": _file, "journal": _journal, "kernel": _kernel, "process": _process}
)


class UnknownReader(KeyError):
    """A source kind no reader is registered for."""


def names() -> list[str]:
    return sorted(READERS)


def build(name: str, *args: Any, **kwargs: Any) -> Reader:
    """The reader registered as ``name``, built from the arguments its factory takes."""
    try:
        factory = READERS[name]
    except KeyError:
        raise UnknownReader(f"no reader named {name!r} (known: {', '.join(names())})") from None
    return factory(*args, **kwargs)
