"""Progress bars on stderr, shown only when stderr is a terminal and the work is big.

One bar for both long jobs: scanning big inputs and hashing big model files.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator

from qwen_triage.engine.sources import is_terminal
from qwen_triage.inputs.source import Source

BIG_INPUT = 16 * 2**20  # below this a scan takes well under a second
BIG_HASH = 256 * 2**20  # below this hashing a file takes well under a second


def _bar(label: str):
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    return Progress(
        TextColumn(label),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        transient=True,
    )


@contextmanager
def scan_progress(sources: list[Source], force: bool | None = None) -> Iterator[Callable[[Source], None] | None]:
    """Yields a per-block callback, or None when no bar should be shown."""
    total = sum(s.size or 0 for s in sources)
    unknown = any(s.size is None for s in sources)
    show = force if force is not None else is_terminal(sys.stderr) and (unknown or total >= BIG_INPUT)
    if not show:
        yield None
        return
    progress = _bar("scanning {task.description}")
    tasks = {s.index: progress.add_task(s.name, total=s.size) for s in sources}
    with progress:

        def on_block(source: Source) -> None:
            progress.update(tasks[source.index], completed=source.position())

        yield on_block


@contextmanager
def hash_progress(force: bool | None = None) -> Iterator[Callable[[str, int], Callable[[int], None]] | None]:
    """Yields ``start(name, total)`` returning a per-chunk callback, or None when no bar should be shown."""
    show = force if force is not None else is_terminal(sys.stderr)
    if not show:
        yield None
        return
    with _bar("{task.description}") as bar:

        def start(name: str, total: int) -> Callable[[int], None]:
            if total < BIG_HASH:
                return lambda n: None
            task = bar.add_task(f"sha256 {name}", total=total)
            return lambda n: bar.advance(task, n)

        yield start
