"""`scan --jobs N --format jsonl`: one report per input, the same as `scan --format json` per file."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_triage.engine.batch import run_batch
from qwen_triage.inputs.file import expand_inputs
from qwen_triage.inputs.source import InputError

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "fixtures" / "logs"


def qt(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "qwen_triage", *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd, stdin=subprocess.DEVNULL)


def comparable(obj: dict) -> dict:
    obj = json.loads(json.dumps(obj))
    obj.pop("input", None)
    obj["stats"].pop("seconds")
    return obj


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small archive: fixture logs in nested directories, one gzipped, plus a hidden file to skip."""
    root = tmp_path_factory.mktemp("archive")
    picked = sorted(p for p in LOGS.rglob("*.log") if p.stat().st_size < 200_000)
    assert len(picked) >= 8
    picked = picked[:: max(len(picked) // 8, 1)][:8]
    for i, src in enumerate(picked):
        sub = root / ("2025" if i % 2 else "2026") / f"node{i % 3}"
        sub.mkdir(parents=True, exist_ok=True)
        if i == 3:
            (sub / (src.name + ".gz")).write_bytes(gzip.compress(src.read_bytes()))
        else:
            shutil.copy(src, sub / src.name)
    (root / ".hidden.log").write_text("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n")
    (root / ".git").mkdir()
    (root / ".git" / "x.log").write_text("nothing\n")
    return root


def test_directories_expand_recursively_sorted_without_hidden_names(archive: Path) -> None:
    files = expand_inputs([str(archive)])
    assert len(files) == 8
    assert files == sorted(files)
    assert not any("/." in f for f in files)
    assert any(f.endswith(".gz") for f in files)
    one = files[0]
    assert expand_inputs([one, str(archive / "2025")])[0] == one  # files stay as given, in order
    with pytest.raises(InputError):
        expand_inputs(["-"])
    with pytest.raises(InputError):
        expand_inputs([str(archive / "missing")])


def _batch_and_singles(archive: Path) -> tuple[subprocess.CompletedProcess[str], list[dict], list[dict]]:
    proc = qt("scan", "--jobs", "2", "--format", "jsonl", str(archive))
    assert proc.returncode in (0, 1), proc.stderr
    objs = [json.loads(line) for line in proc.stdout.splitlines()]
    singles = []
    for path in expand_inputs([str(archive)]):
        single = qt("scan", "--format", "json", path)
        assert single.returncode in (0, 1), single.stderr
        singles.append(json.loads(single.stdout))
    return proc, objs, singles


def _same_pack(objs: list[dict], singles: list[dict]) -> bool:
    key = [(o["stats"]["rules"], o["stats"]["patterns"]) for o in objs + singles]
    return len(set(key)) == 1


def test_jsonl_over_a_directory_equals_per_file_json(archive: Path) -> None:
    for _attempt in range(3):  # a rule file edited between the runs changes the pack: run both again
        proc, objs, singles = _batch_and_singles(archive)
        if _same_pack(objs, singles):
            break
    else:
        pytest.fail("the rule pack kept changing between the batch and the per-file runs")
    files = expand_inputs([str(archive)])
    assert [o["input"] for o in objs] == files  # input order
    assert proc.returncode == (1 if any(o["diagnoses"] for o in objs) else 0)
    assert any(o["diagnoses"] for o in objs)
    for obj, single, path in zip(objs, singles, files):
        a, b = comparable(obj), comparable(single)
        assert a == b, (path, {k: (a["stats"][k], b["stats"].get(k)) for k in a["stats"] if a["stats"][k] != b["stats"].get(k)})
    assert "8 input(s)" in proc.stderr


def test_all_cores_by_default_and_serial_jsonl(archive: Path) -> None:
    files = expand_inputs([str(archive)])
    for _attempt in range(3):  # see test_jsonl_over_a_directory_equals_per_file_json
        everything = qt("scan", "--jobs", "0", "--format", "jsonl", str(archive))
        serial = qt("scan", "--format", "jsonl", *files)  # jsonl without --jobs: one process
        a = [comparable(json.loads(x)) for x in everything.stdout.splitlines()]
        b = [comparable(json.loads(x)) for x in serial.stdout.splitlines()]
        if _same_pack(a, b):
            break
    assert everything.returncode == serial.returncode
    assert a == b and len(a) == len(files)
    assert f"{min(len(os.sched_getaffinity(0)), len(files))} job(s)" in everything.stderr
    assert "1 job(s)" in serial.stderr


def test_unreadable_input_is_reported_and_the_rest_carry_on(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n")
    (tmp_path / "b.log.gz").write_bytes(b"\x1f\x8b\x08\x00broken")
    (tmp_path / "c.log").write_text("all quiet\n")
    proc = qt("scan", "-j", "2", "--format", "jsonl", str(tmp_path))
    assert proc.returncode == 2
    objs = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [Path(o["input"]).name for o in objs] == ["a.log", "b.log.gz", "c.log"]
    assert objs[0]["diagnoses"][0]["class"] == "hardware.xid_fatal"
    assert set(objs[1]) == {"input", "error"} and "b.log.gz" in objs[1]["error"]
    assert objs[2]["diagnoses"] == []


def test_one_report_per_input_is_jsonl_and_jobs_alone_is_one_report(tmp_path: Path) -> None:
    """--jobs is how many processes a scan uses; one report per input is --format jsonl's (it needs files)."""
    (tmp_path / "a.log").write_text("x\n")
    (tmp_path / "b.log").write_text("y\n")
    proc = qt("scan", "--jobs", "2", "--format", "json", str(tmp_path / "a.log"), str(tmp_path / "b.log"))
    assert proc.returncode == 0
    assert [i["name"] for i in json.loads(proc.stdout)["inputs"]] == [str(tmp_path / "a.log"), str(tmp_path / "b.log")]
    proc = qt("scan", "--jobs", "2", "--format", "jsonl")
    assert proc.returncode == 2 and "stdin" in proc.stderr


def _own_rss() -> int:
    """This process's resident size, read as the batch's workers read theirs (/proc/self/statm)."""
    with open("/proc/self/statm", "rb") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_worker_memory_stays_flat_over_many_inputs(tmp_path: Path, compiled) -> None:
    """Many inputs through few workers: every worker's RSS stays near its start, and workers are recycled."""
    src = [p for p in sorted(LOGS.rglob("*.log")) if 2_000 < p.stat().st_size < 100_000][:6]
    assert src
    n = 360
    for i in range(n):
        shutil.copy(src[i % len(src)], tmp_path / f"{i:04d}.log")
    out = io.StringIO()
    # a forked worker starts as a copy of this process (a test runner that has run hundreds of tests before this
    # one), so what a worker may hold is measured from this process's own resident size, not from zero
    parent = _own_rss()
    stats = run_batch(expand_inputs([str(tmp_path)]), out, jobs=2, max_tasks=40)
    assert stats.inputs == n and len(out.getvalue().splitlines()) == n
    assert stats.errors == 0
    assert len(stats.workers) >= n // 40  # replaced after 40 inputs each
    by_worker: dict[int, list[int]] = {}
    for pid, rss in stats.rss:
        by_worker.setdefault(pid, []).append(rss)
    assert all(r > 0 for rss in by_worker.values() for r in rss)
    for pid, rss in by_worker.items():
        first = rss[min(4, len(rss) - 1)]  # after warm-up
        assert max(rss) - first < 40 << 20, f"worker {pid} grew from {first >> 20} to {max(rss) >> 20} MiB"
    peak = max(r for _, r in stats.rss)
    assert peak - parent < 300 << 20, f"a worker reached {peak >> 20} MiB, {(peak - parent) >> 20} MiB over its parent"
