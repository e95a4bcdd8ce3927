"""A progress bar for long scans: on stderr, only when stderr is a terminal."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from qwen_triage.engine.sources import Source, is_terminal

BIG_INPUT = 16 * 2**20  # below this a scan takes well under a second


@contextmanager
def scan_progress(sources: list[Source], force: bool | None = None) -> Iterator[Callable[[Source], None] | None]:
    """Yields a per-block callback, or None when no bar should be shown."""
    total = sum(s.size or 0 for s in sources)
    unknown = any(s.size is None for s in sources)
    show = force if force is not None else is_terminal(sys.stderr) and (unknown or total >= BIG_INPUT)
    if not show:
        yield None
        return
    progress = Progress(
        TextColumn("scanning {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        transient=True,
    )
    tasks = {s.index: progress.add_task(s.name, total=s.size) for s in sources}
    with progress:

        def on_block(source: Source) -> None:
            progress.update(tasks[source.index], completed=source.position())

        yield on_block
