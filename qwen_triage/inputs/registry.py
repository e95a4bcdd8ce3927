"""Sources by name. Readers (pulled, within a budget: ``check``): ``build("file", path)``, ``build("journal",
unit)``, ``build("kernel")``, ``build("process", pid)``. Live sources (pushing bytes as they come: ``scan --follow``,
``attach``, ``journal``): ``live("file", path)``, ``live("stdin")``, ``live("journal", cmd)``.

Why a registry: callers (the CLI's ``--journal``/``--kernel``/paths, a config listing sources) name a kind of
source and get a :class:`~qwen_triage.inputs.base.Reader`, without knowing which module reads it or which of
several ways (the kernel: the journal, /dev/kmsg or dmesg) this machine offers. Each factory imports its module
when called, so naming a kind costs nothing until it is read. The table is a read-only constant, not state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import IO, TYPE_CHECKING, Any

from qwen_triage.inputs.base import Reader

if TYPE_CHECKING:
    import subprocess

    from qwen_triage.inputs.file import FileFollower

AUTO = "auto"  # a live source's kind decided from its first line (inputs.source.sniff)


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


@dataclass
class LiveSource:
    """A source that pushes bytes as they come: a file polled like ``tail -F`` (``follower``), or a stream read
    from a file descriptor (``fd``), possibly the output of a helper process (``proc``, the caller stops it)."""

    name: str  # what reports show
    kind: str = AUTO  # AUTO, or one of inputs.source.KINDS when the source knows what it gives
    follower: FileFollower | None = None
    fd: int | None = None
    proc: subprocess.Popen[bytes] | None = None


def _live_file(path: str, name: str | None = None, from_end: bool = False, by_name: bool = True,
               note: Callable[[str], None] | None = None) -> LiveSource:
    from qwen_triage.inputs.file import FileFollower

    return LiveSource(name=name or path, follower=FileFollower(path, from_end=from_end, note=note, by_name=by_name))


def _live_stdin(note: Callable[[str], None] | None = None) -> LiveSource:
    """Stdin: followed as a file when it is one (``< file``), else read as a stream (a pipe, a terminal)."""
    from qwen_triage.inputs.file import stdin_is_regular_file

    if stdin_is_regular_file():
        return _live_file("/dev/stdin", name="<stdin>", note=note)
    return LiveSource(name="<stdin>", fd=0)


def _live_journal(cmd: list[str], name: str, stderr: IO[bytes] | int | None = None) -> LiveSource:
    """A journal command's JSON output (``journalctl -o json [-f]``), read as journal entries; OSError when the
    tool cannot be run."""
    import subprocess

    from qwen_triage.inputs.journal import start_journal
    from qwen_triage.inputs.source import JOURNAL_JSON

    proc = start_journal(cmd, stderr=subprocess.DEVNULL if stderr is None else stderr)
    assert proc.stdout is not None
    return LiveSource(name=name, kind=JOURNAL_JSON, fd=proc.stdout.fileno(), proc=proc)


LIVE: Mapping[str, Callable[..., LiveSource]] = MappingProxyType(
    {"file": _live_file, "stdin": _live_stdin, "journal": _live_journal}
)


def live(registered: str, /, *args: Any, **kwargs: Any) -> LiveSource:
    """The live source registered as ``registered``, built from the arguments its factory takes."""
    try:
        factory = LIVE[registered]
    except KeyError:
        raise UnknownReader(f"no live source named {registered!r} (known: {', '.join(sorted(LIVE))})") from None
    return factory(*args, **kwargs)
