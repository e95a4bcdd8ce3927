"""One big input scanned in parts over several processes (engine.split): the report is the one-process report.

The production sizes (1 MiB reads, parts of 32 MiB and more) would need gigabytes of test input; the engine
reads by ``Scanner(chunk=…)`` and the split takes its part and warm-up sizes as options, so these tests cut
kilobyte logs into hundreds of parts. A warm-up of 0 makes every worker's state differ from the part before
(all in this process, the fallback), one longer than the input makes every worker's state right (all taken from
the workers), and one in between mixes both.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_triage.engine.scanner import Scanner
from qwen_triage.engine.sources import raw_blocks
from qwen_triage.engine.split import (
    COUNTED,
    ENDED,
    FOUND,
    PartScan,
    SplitOptions,
    SplitStats,
    Task,
    plan,
    scan_split,
    splittable,
)
from qwen_triage.inputs.file import open_source
from qwen_triage.inputs.source import Source
from qwen_triage.report.model import to_dict
from tests.conftest import FIXTURES, ROOT

GEN_LOG = ROOT.parent / "shared" / "bench" / "gen_log.py"


def _report(scanner: Scanner) -> dict:
    obj = json.loads(json.dumps(to_dict(scanner.report())))
    obj["stats"].pop("seconds")
    return obj


def one_process(paths: list[Path], compiled, chunk: int) -> dict:  # type: ignore[no-untyped-def]
    compiled.prefilter.resume(0)  # the pack is the session's: its prefilter as a new process's (engine.prefilter)
    scanner = Scanner(compiled, chunk=chunk)
    for i, path in enumerate(paths):
        for _ in scanner.scan_source(open_source(str(path), i)):
            pass
    return _report(scanner)


def split(paths: list[Path], compiled, chunk: int, part: int, warm: int, jobs: int = 1,  # type: ignore[no-untyped-def]
          stats: SplitStats | None = None) -> dict:
    """Each input split (the last one; the others as one process reads them: inputs after inputs)."""
    compiled.prefilter.resume(0)
    scanner = Scanner(compiled, chunk=chunk)
    for i, path in enumerate(paths):
        source = open_source(str(path), i)
        if i < len(paths) - 1:
            found = scanner.scan_source(source)
        else:
            found = scan_split(scanner, source, SplitOptions(jobs=jobs, part_bytes=part, warm_bytes=warm), stats=stats)
        for _ in found:
            pass
    return _report(scanner)


@pytest.fixture(scope="module")
def fixtures_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every fixture log, one after another: tracebacks, storms, `all` and `unless` rules, ranks, heartbeats,
    journald, kernel and NCCL lines, each kind of state the matcher keeps across lines."""
    path = tmp_path_factory.mktemp("split") / "fixtures.log"
    path.write_bytes(b"".join(p.read_bytes() for p in sorted(FIXTURES.rglob("*.log"))))
    return path


@pytest.fixture(scope="module")
def generated_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared bench's mixed log, 20 000 lines, with its long line, bad UTF-8, ANSI codes, CR lines."""
    if not GEN_LOG.exists():
        pytest.skip(f"{GEN_LOG} is not there")
    path = tmp_path_factory.mktemp("split") / "mixed.log"
    subprocess.run([sys.executable, str(GEN_LOG), "-n", "20000", "--seed", "3", "--big-line-bytes", "200000",
                    "-o", str(path)], check=True, capture_output=True, timeout=300)
    return path


@pytest.mark.parametrize("engine", ["compiled_literal", "warm_cache"], ids=["literal", "hyperscan"])
@pytest.mark.parametrize(("warm", "part", "taken"), [(0, 2048, "none"), (8192, 2048, "some"), (1 << 30, 8192, "all")])
def test_split_report_is_the_one_process_report(fixtures_log: Path, request: pytest.FixtureRequest, engine: str,
                                                warm: int, part: int, taken: str) -> None:
    compiled = request.getfixturevalue(engine)
    stats = SplitStats()
    assert split([fixtures_log], compiled, 512, part, warm, stats=stats) == one_process([fixtures_log], compiled, 512)
    assert stats.parts > 40
    here = len(stats.in_process)
    # which way each part went: this process's fallback for all but the first, for none, or for some
    assert {"none": here == stats.parts - 1, "some": 0 < here < stats.parts - 1, "all": here == 0}[taken]


def test_every_fixture_log_split_is_its_one_process_report(compiled) -> None:  # type: ignore[no-untyped-def]
    for path in sorted(FIXTURES.rglob("*.log")):
        assert split([path], compiled, 256, 512, 1024) == one_process([path], compiled, 256), path


# --- the check the split rests on ------------------------------------------------------------------------

KERNEL = "Nov 29 10:00:03 gpu-node-1 kernel: "


def _examples(compiled) -> list[str]:  # type: ignore[no-untyped-def]
    """The rules' own examples (`all` parts, storms, tables, multi-line records, vetoes), of the rules whose
    windows are up to 100 lines."""
    return [text.rstrip("\n") + "\n" for rule in compiled.rules if rule.rule.match.window <= 100
            for text in (rule.rule.examples.match if rule.rule.examples else ())] * 3


def _frames(rnd: random.Random) -> list[str]:
    """A traceback frame whose exception line comes long after it (the frame is the matcher's until then, while
    the lines that veto rules near them are long forgotten)."""
    return [f'  File "/usr/lib/python3/dist-packages/lib{i}/mod.py", line 10, in init\n    go()\n'
            + "gap\n" * rnd.choice((5, 400, 1500)) + f"RuntimeError: odd thing number {i}\n" for i in range(40)]


def _vetoed(rnd: random.Random) -> list[str]:
    """A rule's finding: a line that vetoes it a few lines before it, or none (it waits out its window); at
    times long quiet after it."""
    return [("Gracefully stopping... (press Ctrl+C again to force)\n" if i % 4 == 0 else "")
            + "filler\n" * rnd.choice((0, 3, 8)) + f"worker{i} exited with code 137\n"
            + "quiet\n" * rnd.choice((0, 0, 300)) for i in range(200)]


def _storm(_rnd: random.Random) -> list[str]:
    """A storm's lines one by one: each finding takes three of them within 60 lines."""
    return [KERNEL + "pcieport 0000:00:03.1: AER: Correctable error message received from 0000:00:00.0\n"] * 400


def _records(_rnd: random.Random) -> list[str]:
    """A kernel message of several lines (engine.multiline) that no rule takes a part of nor vetoes with."""
    return ["".join(KERNEL + line + "\n" for line in (
        "NVRM: GPU 0000:18:00.0: RmInitAdapter failed! (0x26:0x56:1474)",
        "NVRM: GPU 0000:18:00.0: rm_init_adapter failed, device minor number 0",
        "NVRM: The NVIDIA probe routine failed for 1 device(s).",
        "NVRM: None of the NVIDIA devices were initialized."))] * 300


def _parts_of_all(rnd: random.Random) -> list[str]:
    """An `all` rule's two parts, a few lines apart (within its window of 40)."""
    return ["Unknown option: /usr/share/nvidia/nvswitch/fabricmanager.cfg\n" + "filler\n" * rnd.choice((0, 5, 30))
            + "NVIDIA Fabric Manager Start Script\n" for _ in range(300)]


def write_log(path: Path, snippets: list[str], rnd: random.Random) -> None:
    """``snippets`` in a random order, a random number of plain lines before each (parts meet inside them)."""
    rnd.shuffle(snippets)
    out = []
    for i, snippet in enumerate(snippets):
        out += [f"filler {i} {j} all is well\n" for j in range(rnd.choice((0, 1, 3, 10, 40)))]
        out.append(snippet)
    path.write_text("".join(out))


def _comparable(events: list, end) -> list:  # type: ignore[no-untyped-def]
    """A part's events with its lines counted from its first line and its findings' order from its first."""
    out: list = []
    for event in events:
        kind, *rest = event
        if kind == FOUND:
            rule, row, records, facts, seq = rest
            out.append((kind, rule, row, tuple(r.state(end.first_line) for r in records),
                        sorted((k, repr(v)) for k, v in facts.items()), seq - end.seq_start))
        elif kind == ENDED:
            out.append((kind, rest[0].first_line - end.first_line))
        elif kind == COUNTED:
            out.append((kind, *rest))
        else:
            out.append((kind, rest[0].state(end.first_line), *rest[1:]))
    return out


# where each part of Matcher.boundary_state sits in it
COMPONENTS = {"held": (0,), "all": (1, 0), "storms": (1, 1), "vetoes": (2, 0), "waiting": (2, 1), "frame": (3,)}


def _without(state: tuple, where: tuple[int, ...]) -> tuple:
    if len(where) == 1:
        return state[: where[0]] + ((),) + state[where[0] + 1:]
    return state[: where[0]] + (_without(state[where[0]], where[1:]),) + state[where[0] + 1:]


def meetings(log: Path, compiled, chunk: int = 512, part: int = 1024) -> list[tuple[tuple, tuple, bool]]:  # type: ignore[no-untyped-def]
    """Where each part starts: the state a one-process scan has there, a worker's that began reading elsewhere
    (at the part, 1 KiB before it), and whether the worker finds over the part what the scan finds."""
    size = log.stat().st_size
    plans = {warm: plan(str(log), size, part, warm, chunk=chunk) for warm in (0, 1024)}
    exact = PartScan(Task(plans[0][0], str(log), "log", 0, chunk=chunk), compiled)
    exact.warm_up()
    out = []
    before: tuple = ()
    try:
        for i, p in enumerate(plans[0]):
            events = _comparable([e for batch in exact.scan(p) for e in batch], exact.end)
            for warm in (0, 1024) if i else ():
                worker = PartScan(Task(plans[warm][i], str(log), "log", 0, chunk=chunk), compiled)
                try:
                    assert worker.warm_up()
                    found = [e for batch in worker.scan(plans[warm][i]) for e in batch]
                finally:
                    worker.close()
                assert worker.end is not None
                out.append((before, worker.end.start_state, _comparable(found, worker.end) == events))
            assert exact.end is not None
            before = exact.end.end_state or ()
    finally:
        exact.close()
    return out


@pytest.mark.parametrize(("kind", "needs"), [(_examples, ()), (_frames, ("frame",)),
                                             (_vetoed, ("vetoes", "waiting")), (_storm, ("storms",)),
                                             (_records, ("held",)), (_parts_of_all, ("all",))],
                         ids=lambda v: v.__name__.strip("_") if callable(v) else "+".join(v) or "-")
def test_where_states_are_equal_what_follows_is_equal(tmp_path: Path, warm_cache, kind, needs) -> None:  # type: ignore[no-untyped-def]
    """Where two parts meet, a worker that began reading elsewhere and has the same state there
    (Matcher.boundary_state) finds what the one-process scan finds over the next part, event for event; and
    the parts of that state each log keeps cannot be left out: without one, some worker would be taken whose
    findings differ."""
    compiled = warm_cache
    compiled.prefilter.resume(0)
    rnd = random.Random(7)
    log = tmp_path / "stateful.log"
    write_log(log, kind(compiled) if kind is _examples else kind(rnd), rnd)
    found = meetings(log, compiled)
    assert len(found) > 100
    taken = [same for at, worker, same in found if worker == at]
    assert taken and all(taken)
    assert any(worker != at for at, worker, _ in found)  # and some were not taken
    for name in needs:
        where = COMPONENTS[name]
        blind = [same for at, worker, same in found
                 if _without(worker[0], where) == _without(at[0], where) and worker[1] == at[1]]
        assert not all(blind), f"a state without its {name} would do as well here"


def test_generated_log_over_worker_processes(generated_log: Path, compiled) -> None:  # type: ignore[no-untyped-def]
    reference = one_process([generated_log], compiled, 16384)
    assert reference["diagnoses"] and reference["notes"]  # it finds things, and cuts its long line
    for warm in (1 << 30, 32768):
        stats = SplitStats()
        assert split([generated_log], compiled, 16384, 65536, warm, jobs=2, stats=stats) == reference, warm
        assert stats.parts > 40


MULTI_RANK = [*sorted(p for p in (ROOT / "fixtures" / "hang").iterdir() if p.is_dir()),
              *sorted(p for p in (ROOT / "fixtures" / "ras").rglob("*") if p.suffix in (".log", ".txt"))]


@pytest.mark.parametrize("where", MULTI_RANK, ids=lambda p: p.relative_to(ROOT / "fixtures").as_posix())
def test_a_multi_rank_run_split_is_its_one_process_report(where: Path, warm_cache) -> None:  # type: ignore[no-untyped-def]
    """Each rank's timeline and the hang verdict over the parts: torchrun's logs as recorded (engine.hang), and
    NCCL RAS reports in a log's text (engine.ras)."""
    paths = sorted(where.rglob("*.log")) if where.is_dir() else [where]
    for i in range(len(paths)):  # each of them split, after the ones before
        assert split(paths[: i + 1], warm_cache, 256, 512, 512) == one_process(paths[: i + 1], warm_cache, 256)


def test_an_input_split_after_another_goes_on_from_it(fixtures_log: Path, compiled) -> None:  # type: ignore[no-untyped-def]
    """Findings are numbered across inputs, and a split input is the second one: the same report."""
    first = sorted(FIXTURES.rglob("*.log"))[0]
    paths = [first, fixtures_log]
    assert split(paths, compiled, 512, 4096, 16384) == one_process(paths, compiled, 512)


def test_parts_are_cut_where_one_process_ends_a_block(generated_log: Path) -> None:
    """Each part starts where a block a one-process read gives starts, also around a line longer than
    ``max_line``: its worker reads the same blocks."""
    size = generated_log.stat().st_size
    for chunk, max_line in ((16384, 65536), (4096, 1024)):
        with open(generated_log, "rb") as fh:
            firsts = {b.first_line for b in raw_blocks(fh, Source(name="x"), max_line, chunk)}
        parts = plan(str(generated_log), size, 4 * chunk, 3 * chunk, max_line, chunk)
        data = generated_log.read_bytes()
        assert len(parts) > 20
        for p in parts:
            assert data.count(b"\n", 0, p.start) + 1 in firsts
            assert data.count(b"\n", 0, p.warm) + 1 in firsts
            assert p.warm <= p.start and (p.end is None or p.start < p.end)
        assert [p.end for p in parts[:-1]] == [p.start for p in parts[1:]] and parts[-1].end is None


def test_a_worker_reads_its_part_as_one_process_does(generated_log: Path, compiled) -> None:  # type: ignore[no-untyped-def]
    """A worker numbers its lines from where it starts reading; its part's lines, and where it ends, are the
    file's own (the scan renumbers them by that)."""
    size = generated_log.stat().st_size
    parts = plan(str(generated_log), size, 65536, 16384, chunk=16384)
    data = generated_log.read_bytes()
    p = parts[3]
    scan = PartScan(Task(p, str(generated_log), "g", 0, chunk=16384), compiled)
    try:
        assert scan.warm_up()
        for _ in scan.scan(p):
            pass
    finally:
        scan.close()
    assert scan.end is not None and not scan.end.ended
    before_warm = data.count(b"\n", 0, p.warm)
    assert scan.end.first_line + before_warm == data.count(b"\n", 0, p.start) + 1
    assert scan.end.next_line - scan.end.first_line == data.count(b"\n", p.start, p.end)
    assert scan.end.bytes_read == p.end - p.start


def test_what_is_not_split(tmp_path: Path) -> None:
    plain = tmp_path / "plain.log"
    plain.write_bytes(b"INFO ok\n" * 1000)
    assert splittable(open_source(str(plain)), 1000)
    assert not splittable(open_source(str(plain)), 1 << 20)  # smaller than the size it takes
    packed = tmp_path / "plain.log.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    journal = tmp_path / "journal.json"
    journal.write_text('{"MESSAGE": "hello", "__REALTIME_TIMESTAMP": "1"}\n' * 500)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path in (packed, journal, ROOT / "fixtures" / "ras" / "json-behind.json"):
        assert not splittable(open_source(str(path)), 10), path
    assert not splittable(Source(name="<stdin>", size=None), 0)
    assert not splittable(Source(name="pipe", path=fifo, size=1 << 30), 0)


def _qt(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "qwen_triage", *args], capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})


def test_the_scan_command_splits_above_the_size_it_is_given(tmp_path: Path) -> None:
    """`--split-above` (or its variable) and `--jobs` reach the split; `--jobs 1` never splits; the same report."""
    log = tmp_path / "big.log"
    log.write_bytes(b"".join(p.read_bytes() for p in sorted(FIXTURES.rglob("*.log"))[:40]))
    reports = []
    for args, env in ((["--jobs", "1"], None), (["--jobs", "2", "--split-above", "1K"], None),
                      (["--jobs", "2"], {"QWEN_TRIAGE_SPLIT_ABOVE": "1K"})):
        proc = _qt("scan", "--format", "json", *args, str(log), env=env)
        assert proc.returncode == 1, proc.stderr
        obj = json.loads(proc.stdout)
        obj["stats"].pop("seconds")
        reports.append(obj)
    assert reports[0] == reports[1] == reports[2]
    proc = _qt("scan", "--split-above", "lots", str(log))
    assert proc.returncode == 2 and "--split-above" in proc.stderr
    proc = _qt("scan", str(log), env={"QWEN_TRIAGE_SPLIT_ABOVE": "lots"})
    assert proc.returncode == 2 and "QWEN_TRIAGE_SPLIT_ABOVE" in proc.stderr
