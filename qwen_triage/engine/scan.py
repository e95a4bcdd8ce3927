"""``qwen-triage scan``: saved logs to one report, or one report per input (``--jobs``, ``--format jsonl``).

The command line parses the options, calls :func:`run`, renders the report and exits with
:attr:`ScanResult.exit_status`; everything between — which prefilter a scan of this size wants,
directories as their files, opening the inputs, the scan loop, what counts as failing — is here.
``scan --follow`` reads growing files and is :func:`qwen_triage.live.follow.follow_scan`, which
compiles the pack with :func:`compiled_for` as a one-shot scan does.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from qwen_triage.exits import EXIT_CLEAN, EXIT_FOUND, Failure
from qwen_triage.inputs.source import MAX_LINE, InputError, Source
from qwen_triage.units import MiB, SizeError, parse_size

if TYPE_CHECKING:
    from collections.abc import Iterator

    from qwen_triage.engine.batch import BatchStats
    from qwen_triage.engine.compiled import CompiledPack
    from qwen_triage.engine.finding import Finding
    from qwen_triage.engine.scanner import Scanner
    from qwen_triage.report.model import Report
    from qwen_triage.report.summary import Figures

SPLIT_ABOVE = 256 * MiB
"""inputs this big and bigger are scanned in parts over several workers (engine.split); a smaller one scans in a
few seconds, less than workers would save"""
SPLIT_ENV = "QWEN_TRIAGE_SPLIT_ABOVE"

OnBlock = Callable[[Source], None]
Progress = Callable[[list[Source]], AbstractContextManager[OnBlock | None]]
"""the command line's progress display: given the opened inputs, a context yielding a per-block callback"""


@dataclass(frozen=True)
class ScanOptions:
    """``qwen-triage scan``'s options, as the command line gives them."""

    paths: tuple[str, ...] = ()
    """files (plain or gzip), directories (their files, recursively) or ``-``; none: stdin"""
    rule_dirs: tuple[str, ...] = ()
    engine: str = "auto"
    max_line: int = MAX_LINE
    fail_on: str = "diagnosis"
    """``diagnosis``: a diagnosis fails the scan; ``unrecognised``: error lines no rule explains do too"""
    per_input: bool = False
    """one report per input, as JSON lines in input order (``--format jsonl``)"""
    jobs: int | None = None
    """worker processes (0: every CPU this process may use): with ``per_input``, one input each (None: one
    process); else the parts of each input of ``split_above`` bytes or more (None: every CPU; 1: none)"""
    split_above: int | None = None
    """inputs this big and bigger are scanned in parts over ``jobs`` workers (engine.split; None:
    ``$QWEN_TRIAGE_SPLIT_ABOVE``, else 256 MiB)"""


@dataclass(frozen=True)
class ScanResult:
    """One report (``report``), or the per-input run's counts (``batch``; the reports went to ``out``)."""

    exit_status: int
    """0 nothing found; 1 a diagnosis (with ``fail_on`` unrecognised: also an error line no rule explains);
    per input: 2 when one could not be read"""
    report: Report | None = None
    batch: BatchStats | None = None
    figures: Figures | None = None
    """a clean scan's figures, instead of its report, when the caller said they were enough"""
    interrupted: bool = False
    """Ctrl-C came: the report covers what was read"""


def run(options: ScanOptions, *, out: IO[str] | None = None, progress: Progress | None = None,
        note: Callable[[str], None] = lambda _: None, figures_enough: bool = False) -> ScanResult:
    """Scan ``options.paths``. ``out`` takes the per-input reports as they come; ``note`` takes one-line remarks
    for stderr. Unreadable input or a bad rule file raises :class:`~qwen_triage.exits.Failure`.

    ``figures_enough``: a scan that finds nothing at all gives its figures, not a report (``Scanner.clean_figures``:
    a small healthy log's scan then never imports the correlator or the report model)."""
    if options.per_input:
        return _per_input(options, sys.stdout if out is None else out)
    compiled = compiled_for(options, note)
    try:
        sources = _open(options.paths)
    except InputError as exc:
        raise Failure(str(exc)) from None
    if not options.paths and sys.stdin.isatty():
        note("qwen-triage: reading logs from the terminal (stdin); end with Ctrl-D")
    from qwen_triage.engine.scanner import Scanner

    scanner = Scanner(compiled, max_line=options.max_line)
    interrupted = False
    split = _splitter(options, sources)
    try:
        with (progress or _no_progress)(sources) as on_block:
            for source in sources:
                parts = split(scanner, source, on_block) if split is not None else None
                for _ in parts if parts is not None else scanner.scan_source(source, on_block):
                    pass
    except InputError as exc:
        raise Failure(str(exc)) from None
    except KeyboardInterrupt:
        interrupted = True
    figures = scanner.clean_figures() if figures_enough else None
    if figures is not None:
        return ScanResult(exit_status=EXIT_CLEAN, figures=figures, interrupted=interrupted)
    report = scanner.report()
    failed = bool(report.diagnoses) or (options.fail_on == "unrecognised" and bool(report.unrecognised))
    return ScanResult(exit_status=EXIT_FOUND if failed else EXIT_CLEAN, report=report, interrupted=interrupted)


Split = Callable[["Scanner", Source, "OnBlock | None"], "Iterator[Finding] | None"]


def _splitter(options: ScanOptions, sources: list[Source]) -> Split | None:
    """How this scan reads an input big enough to split (engine.split); None when none is, or when it has one
    worker only."""
    above = split_above(options.split_above)
    if not any(s.size is not None and s.size >= above for s in sources):
        return None  # nor is the splitter imported: a small scan's start-up
    from qwen_triage.engine.workers import default_jobs

    jobs = options.jobs or default_jobs()
    if jobs < 2:
        return None
    from qwen_triage.engine.split import SplitOptions, scan_split, splittable

    split_options = SplitOptions(jobs=jobs, rule_dirs=options.rule_dirs)

    def split(scanner: Scanner, source: Source, on_block: OnBlock | None) -> Iterator[Finding] | None:
        return scan_split(scanner, source, split_options, on_block) if splittable(source, above) else None

    return split


def split_above(option: int | None = None) -> int:
    """The size from which an input is split: ``option`` (``scan --split-above``), else ``$QWEN_TRIAGE_SPLIT_ABOVE``
    (a size: ``256M``, ``1G``; a bare number is MiB), else :data:`SPLIT_ABOVE`."""
    if option is not None:
        return option
    text = os.environ.get(SPLIT_ENV, "").strip()
    if text:
        try:
            return parse_size(text, bare=MiB)
        except SizeError:
            raise Failure(f"{SPLIT_ENV}={text[:64]}: not a size (try 256M or 1G)") from None
    return SPLIT_ABOVE


def compiled_for(options: ScanOptions, note: Callable[[str], None]) -> CompiledPack:
    """The compiled pack for a scan of ``options.paths`` (the prefilter their size wants); ``note`` is told of
    rule files in this directory the pack does not hold (a rule added to a clone, not installed)."""
    from qwen_triage.engine.scanner import load_compiled
    from qwen_triage.rulepack.stray import stray_rules_warning

    compiled = load_compiled(options.rule_dirs, engine_for(options.engine, options.paths))
    stray = stray_rules_warning(compiled.pack, Path.cwd())
    if stray:
        note(stray)
    return compiled


def engine_for(engine: str, paths: tuple[str, ...]) -> str:
    """A small scan never waits for Hyperscan to compile (the literal prefilter runs at once); a big one
    compiles first, as that pays back within the run (engine.prefilter.engine_for_input)."""
    if engine != "auto":
        return engine
    from qwen_triage.engine.prefilter import engine_for_input

    total = 0
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue  # the scan itself says why
        total += st.st_size * (8 if p.endswith(".gz") else 1)  # gzip: about what a log compresses by
    return engine_for_input(engine, total)


def _open(paths: tuple[str, ...]) -> list[Source]:
    """The inputs, opened; a directory is its files (torchrun's --log-dir tree, one log per host), one report
    over all of them; an empty one is an error."""
    from qwen_triage.inputs.file import expand_inputs, open_source

    files: list[str] = []
    for p in paths:
        if not os.path.isdir(p):
            files.append(p)
            continue
        inside = expand_inputs([p])
        if not inside:
            raise Failure(f"{p}: a directory with no files")
        files += inside
    return [open_source(p, i) for i, p in enumerate(files or ["-"])]


def _no_progress(_sources: list[Source]) -> AbstractContextManager[OnBlock | None]:
    return nullcontext(None)


def _per_input(options: ScanOptions, out: IO[str]) -> ScanResult:
    """Many saved logs, one report per input written to ``out`` (engine/batch.py)."""
    from qwen_triage.engine.batch import BatchError, run_batch
    from qwen_triage.engine.scanner import load_compiled
    from qwen_triage.inputs.file import expand_inputs

    compiled = load_compiled(options.rule_dirs, options.engine)  # a broken rule file stops here, before any worker
    try:
        files = expand_inputs(options.paths or ("-",))
        stats = run_batch(files, out, jobs=1 if options.jobs is None else options.jobs, rule_dirs=options.rule_dirs,
                          engine=options.engine, max_line=options.max_line, compiled=compiled)
    except (BatchError, InputError) as exc:
        raise Failure(str(exc)) from None
    except KeyboardInterrupt:
        raise Failure("interrupted") from None
    return ScanResult(exit_status=stats.exit_status, batch=stats)

