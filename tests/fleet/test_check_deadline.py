"""`check --timeout` covers the whole run (issue 31 §4): past it the check still answers, in NPD's words.

A slow step is made on demand with QWEN_TRIAGE_CHECK_PAUSE (qwen_triage.deadline.pause): the run must
answer by its deadline whatever step the pause holds, so the pauses are far longer than any --timeout
here. Observables only (exit status, the one NPD line, the state and the cache); speed is in
bench/bench_check_deadline.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from qwen_triage.deadline import PAUSE_ENV
from qwen_triage.engine.detached import BUILD_ENV
from qwen_triage.exits import EXIT_PROBLEM, EXIT_UNKNOWN
from qwen_triage.fleet.node_check import CheckFailed, CheckOptions, run
from qwen_triage.rulepack.prebuilt import PREBUILT_ENV
from tests.fleet.conftest import QUIET, XID79, run_check_cli
from tests.rulepack.test_rule_files import GOOD_RULE
from tests.timelimits import scaled, wait_until

LONG = "600"  # a step paused this long never ends inside a test: only the deadline ends the run


def _timeout() -> str:
    """A --timeout that start-up on a busy machine does not use up, so the run gets to the paused step."""
    return f"{scaled(2):g}"


def _npd_line(cp) -> str:  # type: ignore[no-untyped-def]
    assert cp.stdout.count("\n") == 1, cp.stdout + cp.stderr
    line = cp.stdout.rstrip("\n")
    assert len(line.encode()) <= 80
    return line


def test_a_check_whose_deadline_has_passed_says_so_and_saves_nothing(tmp_path: Path, boot,  # type: ignore[no-untyped-def]
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BUILD_ENV, "off")  # no child to start: the run is all there is
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    log = tmp_path / "k.log"
    log.write_text(XID79)
    state = tmp_path / "state"
    options = CheckOptions(started=time.perf_counter() - 100, now=time.time(), files=(str(log),),
                           state_dir=str(state), timeout=4)
    with pytest.raises(CheckFailed, match="--timeout of 4 s passed"):
        run(options)
    assert not (state / "state.json").exists()  # nothing read, so no position moved


def test_a_step_that_hangs_still_gets_an_npd_unknown(tmp_path: Path, boot, warm_cli) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "k.log"
    log.write_text(QUIET)
    cp = run_check_cli("--file", str(log), "--state", str(tmp_path / "state"), "--format", "npd", "--timeout", _timeout(),
                       env={PAUSE_ENV: f"read:{LONG}"}, timeout=300)
    assert cp.returncode == EXIT_UNKNOWN, cp.stdout + cp.stderr
    assert _npd_line(cp).startswith("unknown: the --timeout of ")
    assert "while reading" in cp.stderr  # the paused step, named (stdout is cut at 80 bytes)


def test_a_read_cut_by_the_deadline_answers_from_the_stored_state(tmp_path: Path, boot, warm_cli) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "k.log"
    log.write_text(XID79)
    state = tmp_path / "state"
    args = ("--file", str(log), "--state", str(state), "--format", "npd")
    assert run_check_cli(*args).returncode == EXIT_PROBLEM  # a normal check: the Xid is active
    before = (state / "state.json").read_bytes()
    cp = run_check_cli(*args, "--timeout", _timeout(), env={PAUSE_ENV: f"read:{LONG}"}, timeout=300)
    assert cp.returncode == EXIT_PROBLEM, cp.stdout + cp.stderr
    assert _npd_line(cp) == "hardware.xid_fatal: GPU 0000:3b:00 Xid 79"
    assert (state / "state.json").read_bytes() == before  # a cut run saves nothing: the next one reads again


def test_a_rule_load_cut_by_the_deadline_is_finished_by_the_detached_loader(  # type: ignore[no-untyped-def]
        tmp_path: Path, boot, prebuilt_now: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "site.yaml").write_text(GOOD_RULE)
    log = tmp_path / "k.log"
    log.write_text(QUIET)
    state = tmp_path / "state"
    cache = state / "cache" / "qwen-triage"
    # a fresh node: nothing cached beside the state; the bundled part prebuilt (as installed), the site's rule not
    env = {BUILD_ENV: "background", "XDG_CACHE_HOME": "", PREBUILT_ENV: str(prebuilt_now)}
    args = ("--file", str(log), "--state", str(state), "--format", "npd", "--rules", str(rules))
    cut = run_check_cli(*args, "--timeout", _timeout(), env={**env, PAUSE_ENV: f"load:{LONG}"}, timeout=300)
    assert cut.returncode == EXIT_UNKNOWN, cut.stdout + cut.stderr
    assert _npd_line(cut).startswith("unknown: the --timeout of ")
    assert "while loading the rules" in cut.stderr
    assert not list(cache.glob("file-*"))  # the cut run validated nothing itself
    # the detached loader holds its lock until the pack is loaded and cached
    wait_until(lambda: list(cache.glob("file-*")) and not (cache / "lock-pack").exists(), 300, step=0.2)
    validated = {p.name for p in cache.glob("file-*")}
    assert validated and not (cache / "lock-pack").exists()
    warm = run_check_cli(*args, "--timeout", "300", env=env, timeout=600)
    assert warm.returncode == 0, warm.stdout + warm.stderr
    assert _npd_line(warm).startswith("ok:")
    assert {p.name for p in cache.glob("file-*")} == validated  # the next run parsed nothing: the child had


@pytest.mark.parametrize("fmt", ["npd", "json", "text"])
def test_a_run_over_before_it_began_answers_unknown_in_every_format(tmp_path: Path, fmt: str) -> None:
    log = tmp_path / "k.log"
    log.write_text(QUIET)
    # 0.1 s: start-up alone takes longer, wherever the cut comes (the command line's imports, or the check's)
    cp = run_check_cli("--file", str(log), "--state", str(tmp_path / "state"), "--format", fmt, "--timeout", "0.1",
                       env={BUILD_ENV: "off", PAUSE_ENV: f"load:{LONG}"}, timeout=300)
    assert cp.returncode == EXIT_UNKNOWN, cp.stdout + cp.stderr
    assert "the --timeout of 0.1 s passed while" in cp.stderr
    if fmt == "npd":
        assert _npd_line(cp).startswith("unknown: ")
    elif fmt == "json":
        out = json.loads(cp.stdout)
        assert out["status"] == "unknown" and "--timeout" in out["errors"][0]
