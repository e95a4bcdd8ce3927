"""Files (or ``-``) to one report: the whole of ``scan`` without the command line, for tests and ``rules eval``;
and the files ``scan --jobs`` covers (:func:`expand_inputs`).

Why here and not in the engine: the engine decodes and matches sources it is given; naming a path and opening
it is this package's (:func:`qwen_triage.inputs.file.open_source`), and the engine may not import upwards.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from qwen_triage.engine.batch import BatchError
from qwen_triage.engine.scanner import Scanner
from qwen_triage.inputs.file import open_source

if TYPE_CHECKING:
    from qwen_triage.engine.matcher import CompiledPack
    from qwen_triage.report.model import Report


def scan_paths(paths: list[str], compiled: CompiledPack) -> Report:
    """Scan the files in order as one session (``scan a b``); an unreadable one raises InputError."""
    scanner = Scanner(compiled)
    for i, p in enumerate(paths):
        for _ in scanner.scan_source(open_source(p, i)):
            pass
    return scanner.report()


def expand_inputs(args: Iterable[str]) -> list[str]:
    """Files as given; directories -> their regular files, recursively, sorted, hidden names skipped
    (``.git``, ``.cache``…), symlinked directories not followed. :class:`BatchError` for stdin or a missing path."""
    out: list[str] = []
    for arg in args:
        if arg == "-":
            raise BatchError("batch mode reads files; give stdin to a plain `scan`")
        path = Path(arg).expanduser()
        if path.is_dir():
            found = []
            for root, dirs, files in os.walk(path):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                found += [os.path.join(root, f) for f in files if not f.startswith(".")]
            out += sorted(f for f in found if os.path.isfile(f))
        elif path.exists():
            out.append(arg)
        else:
            raise BatchError(f"{arg}: no such file or directory")
    return out
