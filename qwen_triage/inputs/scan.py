"""Files (or ``-``) to one report: the whole of ``scan`` without the command line, for tests and ``rules eval``.

Why here and not in the engine: the engine decodes and matches sources it is given; naming a path and opening
it is this package's (:func:`qwen_triage.inputs.file.open_source`), and the engine may not import upwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
