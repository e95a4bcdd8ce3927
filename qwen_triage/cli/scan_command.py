"""``qwen-triage scan``'s body after its options are parsed, and the plain scan that needs no parsing.

``qwen-triage scan FILE…`` with no option is the common case (a scheduled health check of a
small log) and the one whose start-up is most of its time: click and the definitions of every
command cost about a tenth of it. So the console script (cli.entry) runs such a command line
(cli.entry finds it) directly, with :class:`~qwen_triage.engine.scan.ScanOptions`' defaults (the same as the
options' defaults: a test holds it); anything with an option goes through click, to the same
:func:`scan_and_exit`.
"""

from __future__ import annotations

import importlib
import sys
from typing import NoReturn

from qwen_triage.cli.exiting import fail, note
from qwen_triage.engine.scan import ScanOptions, run
from qwen_triage.exits import Failure

DEFAULT_FORMAT = "text"


def plain_scan(paths: tuple[str, ...]) -> NoReturn:
    """``qwen-triage scan PATH…``: every option at its default."""
    try:
        scan_and_exit(ScanOptions(paths=paths), DEFAULT_FORMAT, follow=False)
    except Failure as exc:
        fail(str(exc))


def scan_and_exit(options: ScanOptions, fmt: str, follow: bool) -> NoReturn:
    """Scan (or follow) with ``options``, write the report in ``fmt``, exit with the scan's status."""
    if follow:
        try:
            follow_mod = importlib.import_module("qwen_triage.live.follow")
        except ModuleNotFoundError:
            fail("--follow is not available in this installation")
        sys.exit(follow_mod.follow_scan(options, fmt, note=note))
    from qwen_triage.cli.progress import scan_progress
    from qwen_triage.report.emit import clean_text_will_do

    # a clean scan's text report is two lines its figures give: no report built (a small healthy log)
    result = run(options, out=sys.stdout, progress=scan_progress, note=note, figures_enough=clean_text_will_do(fmt))
    if result.batch is not None:
        from qwen_triage.engine.batch import summary

        note(summary(result.batch))
    if result.interrupted:
        note("qwen-triage: interrupted; report covers what was read")
    if result.figures is not None:
        from qwen_triage.report.emit import emit_clean

        emit_clean(result.figures)
    elif result.report is not None:
        from qwen_triage.report.emit import emit_report

        emit_report(result.report, fmt)
    sys.exit(result.exit_status)
