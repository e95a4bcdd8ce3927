"""The wider forms of an error line: read where nothing else is said, never listed beside a diagnosis.

A failing log whose error line has no ERROR word, no exception and no `Error: ` head (glog's `E1202 …` header,
logrus' `level=Error`, `[error]`, git's `fatal: `, `nvidia-container-cli: mount error: …`, Docker's `Error
response from daemon`, an exception behind a pipe's timestamp) used to make an empty report. Those lines are
listed (and so looked up in the message catalogue); beside a diagnosis they are its echoes and are not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_triage.engine.scanner import scan_paths

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "23.64 GiB of which 0 bytes is free.")


def listed(tmp_path: Path, compiled, text: str) -> tuple[list[str], list[tuple[str, str]]]:
    log = tmp_path / "w.log"
    log.write_text(text)
    report = scan_paths([str(log)], compiled)
    return report.classes(), [(u.kind, u.evidence.text) for u in report.unrecognised]


@pytest.mark.parametrize("line", [
    "E1202 10:00:01.123456  1234 widget_manager.cc:1186] frobnicator 'w1' could not be charged",
    "[E1202 10:00:01.123456 1234 widget.cpp:77] frobnicator could not be charged",
    # c10's logger leaves the month unpadded (September 9)
    "[rank1]:[E909 08:45:30.126335825 widget.cpp:77] frobnicator could not be charged",
    'time=2025-01-01T00:00:00Z level=Error msg="frobnicator could not be charged"',
    "[2024-05-01 10:00:00] [error] frobnicator could not be charged",
    '{"time": "2025-01-01T00:00:00Z", "level": "error", "msg": "frobnicator could not be charged"}',
    "fatal: frobnicator repository https://example.com/x could not be charged",
    "widgetctl: mount error: frobnicator /var/lib/x could not be charged",
    "Server error: 400 - frobnicator could not be charged",
    "2024-02-09 17:32:34 RuntimeError: frobnicator could not be charged",
    'widgetsql: error: connection to frobnicator on socket "/var/run/w/.s.W.5432" failed: No such file or directory',
    "widgetd serve: error: frobnicator could not be charged",
    "MUSA error 9 at frobnicator.cu:6863: invalid charge argument",
])
def test_a_wider_error_line_is_listed_when_nothing_else_is_said(tmp_path: Path, compiled, line: str) -> None:
    classes, items = listed(tmp_path, compiled, f"starting widget server\n{line}\nwidget server stopped\n")
    assert classes == []
    assert [text for _, text in items] == [line]


def test_an_exception_behind_a_timestamp_is_an_exception(tmp_path: Path, compiled) -> None:
    _, items = listed(tmp_path, compiled, "2024-02-09 17:32:34 RuntimeError: frobnicator could not be charged\n")
    assert items == [("exception", "2024-02-09 17:32:34 RuntimeError: frobnicator could not be charged")]


@pytest.mark.parametrize("line", [
    "INFO 12-02 10:00:00 [router.py:12] health check is pending with error: error sending request",
    'time=2025-01-01T00:00:00Z level=INFO source=runner.go:463 msg="GPU discovery" error: none',
    "W1202 10:00:01.123456  1234 widget.cc:11] frobnicator slow to charge",
    "the frobnicator has no error: all charged",
    "2024-05-01 10:00:00,123 - widget - INFO - widgetsql: error: frobnicator reconnected",
])
def test_a_line_its_logger_calls_no_error_is_not_listed(tmp_path: Path, compiled, line: str) -> None:
    _, items = listed(tmp_path, compiled, f"{line}\n")
    assert items == []


def test_wider_lines_beside_a_diagnosis_are_its_echoes(tmp_path: Path, compiled) -> None:
    weak = "[rank0]:[E1129 10:41:07.200113 ProcessGroupWidget.cpp:698] [Rank 0] taking the entire process down."
    loud = "ERROR 12-02 10:00:05 [engine.py:88] Widget pool drained on host 10.0.0.2:4455"
    classes, items = listed(tmp_path, compiled, f"{OOM}\n{weak}\n{loud}\n")
    assert classes == ["memory.gpu_oom"]
    assert [text for _, text in items] == [loud]  # the ERROR line is listed as before; the glog E line is not
    classes, items = listed(tmp_path, compiled, f"{weak}\n")
    assert classes == [] and [text for _, text in items] == [weak]


# --- an input's last words -------------------------------------------------------------------------------------


@pytest.mark.parametrize("last", [
    "frobnicator could not attach to widget bus 3",
    "[    5.663152] frobnic: probe of 0000:01:00.0 failed with error -22",
    "Failed to get widget ID from the frobnicator server: Timed out while waiting for it.",
])
def test_a_log_that_ends_saying_it_failed_is_never_an_empty_report(tmp_path: Path, compiled, last: str) -> None:
    classes, items = listed(tmp_path, compiled, f"starting frobnicator\nloading widgets\n{last}\n\n")
    assert classes == [] and items == [("error", last)]


@pytest.mark.parametrize("last", [
    "widget server listening on port 8000",  # no failure's words
    "INFO all widgets loaded, no frobnicator failed",  # a logger's quiet level
    "[2024-12-13 01:45:26] INFO:     127.0.0.1:40418 - \"GET / HTTP/1.1\" 404 Not Found",
    "Not found",  # a cell of a table, not a sentence
    "frame #3: <unknown function> + 0x5d6b86e (0x7bf0b19f186e in /usr/lib/libfrob.so)",  # a backtrace's frame
    "EXT4-fs (nvme0n1p5): re-mounted. Opts: errors=remount-ro. Quota mode: none.",
])
def test_a_last_line_that_says_nothing_failed_is_not_listed(tmp_path: Path, compiled, last: str) -> None:
    _, items = listed(tmp_path, compiled, f"starting frobnicator\n{last}\n")
    assert items == []


def test_last_words_are_only_read_where_nothing_else_is_said(tmp_path: Path, compiled) -> None:
    last = "frobnicator could not attach to widget bus 3"
    classes, items = listed(tmp_path, compiled, f"ERROR 12-02 10:00:05 [engine.py:88] Widget pool drained\n{last}\n")
    assert [text for _, text in items] == ["ERROR 12-02 10:00:05 [engine.py:88] Widget pool drained"]
    classes, items = listed(tmp_path, compiled, f"{OOM}\n{last}\n")
    assert classes == ["memory.gpu_oom"] and items == []


def test_the_last_words_are_the_same_when_the_file_is_scanned_in_parts(tmp_path: Path, compiled) -> None:
    from qwen_triage.engine.scan import ScanOptions, run

    log = tmp_path / "big.log"
    log.write_text("".join(f"widget {i} loaded on bus {i % 7}\n" for i in range(40000))
                   + "frobnicator could not attach to widget bus 3\n")
    one = run(ScanOptions(paths=(str(log),), jobs=1)).report
    split = run(ScanOptions(paths=(str(log),), jobs=2, split_above=64 * 1024)).report
    assert [u.evidence.text for u in split.unrecognised] == [u.evidence.text for u in one.unrecognised] == [
        "frobnicator could not attach to widget bus 3"]


def test_every_signal_has_a_literal_the_literal_prefilter_can_look_for() -> None:
    """Without hyperscan the prefilter looks for each pattern's required literals: a signal whose best literal is a
    space or a letter makes every line a candidate (and a record's evidence cites its first line, not the rule's)."""
    from qwen_triage.engine.literals import required_literals
    from qwen_triage.engine.unrecognised import SIGNALS

    for kind, pattern in SIGNALS.items():
        req = required_literals(pattern)
        assert req is not None, kind
        assert min(len(a.strip()) for a in req.alternatives) >= 3, (kind, req.alternatives)
