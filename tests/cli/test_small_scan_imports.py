"""A small healthy log's scan reads it and says so, importing only what that takes.

Start-up is most of such a scan (``bench/bench_startup.py``): the correlator, the
report model, pydantic, rich, the `regex` module and platformdirs are for logs that
hold something, so a clean scan writes its two lines from the scanner's figures
(``Scanner.clean_figures``) — exactly the lines the report would have given.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from qwen_triage.engine.scanner import Scanner
from qwen_triage.inputs.file import open_source
from qwen_triage.report.emit import plain_summary
from qwen_triage.report.summary import clean_text
from tests.conftest import FIXTURES, ROOT

HEALTHY = "\n".join([
    "INFO 11-29 10:00:03 [api_server.py:1043] vLLM API server version 0.8.5",
    "INFO 11-29 10:00:09 [loader.py:458] Loading weights took 4.21 seconds",
    "INFO 11-29 10:00:10 [gpu_model_runner.py:1347] Model loading took 14.2 GiB",
    "INFO 11-29 10:00:20 [kv_cache_utils.py:634] GPU KV cache size: 215,520 tokens",
    "INFO:     Application startup complete.",
]) + "\n"

NOT_NEEDED = ("qwen_triage.engine.correlate", "qwen_triage.report.model", "pydantic", "rich", "regex", "platformdirs",
              "ruamel", "click", "statistics")  # click: a plain `scan PATH` needs no parser (cli.scan_command)

PROBE = """
import atexit, json, sys
out = sys.argv[1]
atexit.register(lambda: json.dump(sorted(sys.modules), open(out, "w")))
sys.argv = ["qwen-triage", "scan", sys.argv[2]]
from qwen_triage.cli.entry import main
main()
"""


def test_a_small_healthy_scan_imports_none_of_what_a_finding_needs(warm_cache, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "healthy.log"
    log.write_text(HEALTHY)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    modules = tmp_path / "modules.json"
    for _ in range(2):  # the first run may fill the pack cache (validating the YAML): the second is a warm one
        done = subprocess.run([sys.executable, "-c", PROBE, str(modules), str(log)], capture_output=True, text=True,
                              env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("No diagnosis: ") and "\n5 lines, " in done.stdout
    loaded = set(json.loads(modules.read_text()))
    assert "qwen_triage.engine.scanner" in loaded  # the probe did see the scan's modules
    assert not [m for m in NOT_NEEDED if m in loaded or any(x.startswith(m + ".") for x in loaded)]


@pytest.mark.parametrize("path", sorted(FIXTURES.rglob("*.log"))[::6], ids=lambda p: p.name)
def test_clean_figures_only_where_the_report_is_clean_and_its_lines_are_the_same(compiled, path) -> None:  # type: ignore[no-untyped-def]
    scanner = Scanner(compiled)
    for _ in scanner.scan_source(open_source(str(path))):
        pass
    figures = scanner.clean_figures()
    report = scanner.report()
    plain = plain_summary(report)
    assert (figures is None) == (plain is None)
    if figures is not None:
        assert clean_text(figures._replace(seconds=report.stats.seconds)) == plain


def test_the_cache_directory_is_where_platformdirs_puts_it(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from platformdirs import user_cache_dir

    from qwen_triage.rulepack.cache import user_cache_path

    for value in (None, "", "  ", "/tmp/elsewhere"):
        if value is None:
            monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        else:
            monkeypatch.setenv("XDG_CACHE_HOME", value)
        assert str(user_cache_path()) == user_cache_dir("qwen-triage")
