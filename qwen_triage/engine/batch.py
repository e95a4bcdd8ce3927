"""`qwen-triage scan --jobs N --format jsonl`: triage many saved logs, one report per input.

For a directory of ten thousand old logs: every input gets its own report (the
same object `scan --format json` prints for that file alone, plus ``"input"``:
the path as given or found), written as one JSON line, **in input order**
(workers run ahead; a slow input holds back only the lines after it).

* Inputs: files, as the caller found them
  (:func:`qwen_triage.inputs.file.expand_inputs`: a directory is every regular
  file below it, sorted). Plain and gzip files both work; each worker opens its
  own (:func:`qwen_triage.inputs.file.open_source`).
* Workers: a ``multiprocessing`` pool of ``jobs`` processes (``0`` = every CPU
  this process may use). Each worker compiles the rule pack once when it starts
  (a forked worker inherits the pack the parent compiled; a spawned one loads it
  from the on-disk cache in a fraction of a second) and is replaced after
  :data:`MAX_TASKS_PER_CHILD` inputs, so a worker's memory stays flat however many
  inputs go through it. ``jobs=1`` runs in this process.
* An input that cannot be read becomes ``{"input": …, "error": "…"}``; the rest
  carry on. Exit status: 2 when any input failed, else 1 when any input has a
  diagnosis, else 0.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from dataclasses import dataclass, field
from typing import IO, Iterator

from qwen_triage.engine import workers
from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.scanner import Scanner
from qwen_triage.engine.workers import default_jobs
from qwen_triage.exits import EXIT_CLEAN, EXIT_ERROR, EXIT_FOUND
from qwen_triage.inputs.file import open_source
from qwen_triage.inputs.source import MAX_LINE, InputError
from qwen_triage.report.model import to_dict

MAX_TASKS_PER_CHILD = 500


class BatchError(Exception):
    """The batch cannot start (no inputs, stdin given, a path missing)."""


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


# --- the worker -----------------------------------------------------------------------------------------

_max_line = MAX_LINE


def _init_worker(rule_dirs: tuple[str, ...], engine: str, max_line: int, pool: bool = False) -> None:
    global _max_line
    workers.init(rule_dirs, engine, pool)  # the pack: inherited from the parent, or compiled
    _max_line = max_line


@dataclass
class Result:
    index: int
    line: str  # the JSON line, without the newline
    found: bool
    error: bool
    pid: int
    rss: int  # the worker's resident memory after this input


def report_object(path: str, compiled: CompiledPack, max_line: int = MAX_LINE) -> dict:
    """The report of one input as `scan --format json` gives it, with ``input`` first."""
    scanner = Scanner(compiled, max_line=max_line)
    for _ in scanner.scan_source(open_source(path, 0)):
        pass
    report = scanner.report()
    return {"input": path, **to_dict(report)}


def _scan_one(task: tuple[int, str]) -> Result:
    index, path = task
    try:
        obj = report_object(path, workers.pack(), _max_line)
        found, error = bool(obj["diagnoses"]), False
    except InputError as exc:
        obj, found, error = {"input": path, "error": str(exc)}, False, True
    except (OSError, EOFError, ValueError) as exc:  # a broken gzip member, an unreadable file…
        obj, found, error = {"input": path, "error": f"{path}: {exc}"}, False, True
    line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return Result(index, line, found, error, os.getpid(), _rss_bytes())


# --- the batch -------------------------------------------------------------------------------------------


@dataclass
class BatchStats:
    inputs: int = 0
    found: int = 0
    errors: int = 0
    seconds: float = 0.0
    jobs: int = 1
    workers: set[int] = field(default_factory=set)
    rss: list[tuple[int, int]] = field(default_factory=list)  # (worker pid, rss) after each input, in order

    @property
    def exit_status(self) -> int:
        return EXIT_ERROR if self.errors else EXIT_FOUND if self.found else EXIT_CLEAN


def _results(paths: list[str], jobs: int, rule_dirs: tuple[str, ...], engine: str, max_line: int,
             max_tasks: int, compiled: CompiledPack | None) -> Iterator[Result]:
    tasks = list(enumerate(paths))
    if compiled is not None:
        workers.share(compiled, rule_dirs, engine)
    if jobs <= 1:
        _init_worker(rule_dirs, engine, max_line)
        for task in tasks:
            yield _scan_one(task)
        return
    with multiprocessing.get_context().Pool(
        processes=jobs,
        initializer=_init_worker,
        initargs=(tuple(rule_dirs), engine, max_line, True),
        maxtasksperchild=max_tasks,
    ) as pool:
        yield from pool.imap(_scan_one, tasks, chunksize=1)


def run_batch(
    paths: list[str],
    out: IO[str],
    *,
    jobs: int = 0,
    rule_dirs: tuple[str, ...] = (),
    engine: str = "auto",
    max_line: int = MAX_LINE,
    max_tasks: int = MAX_TASKS_PER_CHILD,
    compiled: CompiledPack | None = None,
) -> BatchStats:
    """Write one JSON line per input file to ``out``, in input order; :class:`BatchError` if it cannot start."""
    if not paths:
        raise BatchError("no input files")
    jobs = default_jobs() if jobs == 0 else jobs
    jobs = max(1, min(jobs, len(paths)))
    stats = BatchStats(inputs=len(paths), jobs=jobs)
    started = time.perf_counter()
    for result in _results(paths, jobs, rule_dirs, engine, max_line, max_tasks, compiled):
        out.write(result.line + "\n")
        stats.found += result.found
        stats.errors += result.error
        stats.workers.add(result.pid)
        stats.rss.append((result.pid, result.rss))
    out.flush()
    stats.seconds = time.perf_counter() - started
    return stats


def summary(stats: BatchStats) -> str:
    return (
        f"qwen-triage: {stats.inputs} input(s), {stats.found} with a diagnosis, {stats.errors} unreadable; "
        f"{stats.jobs} job(s), {stats.seconds:.1f} s"
    )
