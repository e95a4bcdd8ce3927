"""No cold start (issue 19): compiling is off the critical path, loading is cut by a deadline and continued.

Observables only (cache contents, the prefilter kind a scan reports, exit statuses), never times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_triage.engine import warmup
from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.detached import BUILD_ENV
from qwen_triage.engine.prefilter import hyperscan_available
from qwen_triage.engine.scanner import Scanner
from qwen_triage.inputs.file import open_source
from qwen_triage.rulepack.pack import LoadDeadline, load_pack
from qwen_triage.rulepack.prebuilt import PREBUILT_ENV
from tests.rulepack.test_rule_files import GOOD_RULE
from tests.timelimits import wait_until

LOG = "starting\nSegmentation fault (core dumped)\nbye\n"


def _rules(tmp_path: Path, n: int = 1) -> Path:
    d = tmp_path / "rules"
    d.mkdir()
    for i in range(n):
        (d / f"r{i}.yaml").write_text(GOOD_RULE.replace("x.one", f"x.r{i}").replace(
            "Segmentation fault", "Segmentation fault" if i == 0 else f"Other fault {i}"))
    return d


def _diagnoses(compiled: CompiledPack, tmp_path: Path) -> list[tuple[str, str]]:
    log = tmp_path / "x.log"
    log.write_text(LOG)
    scanner = Scanner(compiled)
    for _ in scanner.scan_source(open_source(str(log))):
        pass
    return [(d.class_, d.rule) for d in scanner.report().diagnoses]


def _kinds(cache: Path) -> set[str]:
    return {p.name.split("-")[0] for p in cache.iterdir()} if cache.is_dir() else set()


def test_a_cold_auto_scan_does_not_compile_hyperscan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not hyperscan_available():
        pytest.skip("hyperscan does not load here: auto is the literal prefilter anyway")
    monkeypatch.setenv(BUILD_ENV, "off")
    cache = tmp_path / "cache"
    pack = load_pack([_rules(tmp_path)], bundled=False, cache_dir=cache)
    cold = CompiledPack.build(pack, engine="auto", cache_dir=cache)
    assert cold.prefilter.name == "literal"
    assert "hs" not in _kinds(cache)
    CompiledPack.build(pack, engine="hyperscan", cache_dir=cache)  # what `rules warm` / the child does
    assert "hs" in _kinds(cache)
    warm = CompiledPack.build(pack, engine="auto", cache_dir=cache)
    assert warm.prefilter.name == "hyperscan"
    assert _diagnoses(cold, tmp_path) == _diagnoses(warm, tmp_path) == [("process.segfault", "x.r0")]


def test_the_background_child_fills_the_cache_for_the_next_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not hyperscan_available():
        pytest.skip("hyperscan does not load here")
    monkeypatch.setenv(BUILD_ENV, "background")
    cache = tmp_path / "cache"
    pack = load_pack([_rules(tmp_path)], bundled=False, cache_dir=cache)
    first = CompiledPack.build(pack, engine="auto", cache_dir=cache)
    assert first.prefilter.name == "literal" and first.prefilter.building
    # the child holds its lock and job until it ends, built or not: the wait ends with it
    wait_until(lambda: not {"lock", "job"} & _kinds(cache), 120, step=0.2)
    assert "hs" in _kinds(cache) and not {"lock", "job"} & _kinds(cache)
    second = CompiledPack.build(pack, engine="auto", cache_dir=cache)
    assert second.prefilter.name == "hyperscan"
    assert _diagnoses(first, tmp_path) == _diagnoses(second, tmp_path)


def test_a_job_entry_another_user_could_write_is_not_built(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    job = cache / "job-hs-abc.json"
    job.write_text(json.dumps({"key": "abc", "patterns": ["x"], "multiline": []}))
    os.chmod(job, 0o644)  # not private: never read
    assert warmup.build(cache, "abc") is False
    assert "hs" not in _kinds(cache)


def test_a_load_cut_by_its_deadline_is_continued_by_the_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BUILD_ENV, "off")  # no detached child: each load's own progress is what is checked
    rules = _rules(tmp_path, n=3)
    cache = tmp_path / "cache"
    done = []
    for _ in range(3):
        try:
            load_pack([rules], bundled=False, cache_dir=cache, deadline=0.0)  # past before it starts
        except LoadDeadline as cut:
            done.append(cut.done)
            continue
        break
    assert done == [1, 2]  # each run validated one more file and kept it
    pack = load_pack([rules], bundled=False, cache_dir=cache, deadline=0.0)
    assert [r.rule.id for r in pack.rules] == ["x.r0", "x.r1", "x.r2"]
    assert pack.rules == load_pack([rules], bundled=False).rules


def test_an_edit_revalidates_that_file_alone(tmp_path: Path) -> None:
    rules = _rules(tmp_path, n=2)
    cache = tmp_path / "cache"
    load_pack([rules], bundled=False, cache_dir=cache)
    before = {p.name for p in cache.glob("file-*")}
    (rules / "r1.yaml").write_text((rules / "r1.yaml").read_text().replace("title: one", "title: edited"))
    pack = load_pack([rules], bundled=False, cache_dir=cache)
    assert [r.rule.title for r in pack.rules] == ["one", "edited"]
    after = {p.name for p in cache.glob("file-*")}
    assert len(after - before) == 1  # r1's new entry; the catalogue's and r0's were reused


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "qwen_triage", *args], capture_output=True, text=True,
                          env={**os.environ, **env}, stdin=subprocess.DEVNULL, timeout=600)


def test_rules_warm_fills_the_cache_a_scan_then_uses(tmp_path: Path) -> None:
    rules = _rules(tmp_path)
    env = {BUILD_ENV: "off"}  # the session's cache (shared by the suite): the bundled database compiles once
    warmed = _cli("rules", "warm", "--rules", str(rules), env=env)
    assert warmed.returncode == 0, warmed.stderr
    log = tmp_path / "x.log"
    log.write_text(LOG)
    scanned = _cli("scan", "--rules", str(rules), "--format", "json", str(log), env=env)
    stats = json.loads(scanned.stdout)["stats"]
    assert stats["prefilter"] == ("hyperscan" if hyperscan_available() else "literal")


def test_a_fresh_node_check_cut_at_loading_answers_unknown_and_warms_up(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("all quiet\n")
    state = tmp_path / "state"
    # fresh: the check caches under <state>/cache; no artefact validated at build time (a source checkout)
    env = {BUILD_ENV: "off", "XDG_CACHE_HOME": "", PREBUILT_ENV: "off"}
    args = ("check", "--format", "npd", "--file", str(log), "--state", str(state))
    cut = _cli(*args, "--timeout", "0.1", env=env)  # --timeout covers the whole run: over before loading
    assert cut.returncode == 2, cut.stdout + cut.stderr  # NPD: Unknown
    assert cut.stdout.startswith("unknown:")
    assert not (state / "cache" / "qwen-triage" / "lock-pack").exists()  # "off": no child left to load
    full = _cli(*args, "--timeout", "300", env=env)
    assert full.returncode == 0, full.stdout + full.stderr
    assert full.stdout.startswith("ok:")


def test_a_fresh_node_check_with_the_prebuilt_pack_answers_at_once(tmp_path: Path, prebuilt_now: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("all quiet\n")
    state = tmp_path / "state"
    env = {BUILD_ENV: "off", "XDG_CACHE_HOME": "", PREBUILT_ENV: str(prebuilt_now)}  # as installed from a wheel
    first = _cli("check", "--format", "npd", "--file", str(log), "--state", str(state), "--timeout", "300", env=env)
    assert first.returncode == 0, first.stdout + first.stderr  # the very first run
    assert first.stdout.startswith("ok:")
    assert not list((state / "cache" / "qwen-triage").glob("file-*"))  # no rule file was parsed


def test_the_npd_image_warms_the_cache_where_check_reads_it() -> None:
    from tests.conftest import ROOT

    lines = (ROOT / "deploy/npd/Dockerfile").read_text().splitlines()
    install = next(i for i, line in enumerate(lines) if "pip install" in line)
    env = next(i for i, line in enumerate(lines) if line.startswith("ENV XDG_CACHE_HOME="))
    warm = next(i for i, line in enumerate(lines) if line.strip() == "RUN qwen-triage rules warm")
    assert install < warm and env < warm  # after the install, into the cache `check` uses at run time


def test_a_big_input_compiles_first_a_small_one_never_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    from qwen_triage.engine.prefilter import INLINE_ABOVE, engine_for_input

    monkeypatch.setenv(BUILD_ENV, "background")
    assert engine_for_input("auto", 10_000) == "auto"  # literal now, the database built for the next run
    assert engine_for_input("auto", INLINE_ABOVE) == ("hyperscan" if hyperscan_available() else "auto")
    assert engine_for_input("literal", INLINE_ABOVE) == "literal"
    monkeypatch.setenv(BUILD_ENV, "off")
    assert engine_for_input("auto", INLINE_ABOVE) == "auto"
