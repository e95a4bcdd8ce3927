"""Gather a bug report: versions, the doctor's findings, and the triage of logs, units' journals and the kernel log.

Every input goes through the same scanner as ``scan``; what the report keeps of
it is short on purpose (see the caps below, and each section's ``cut``). The
whole report is redacted (:func:`qwen_triage.redact.redact_tree`) before it is
returned: a secret in a log line, a fact, a path or the environment never
reaches the file.
"""

from __future__ import annotations

import io
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qwen_triage.bugreport.model import BugReport, Finding, Section
from qwen_triage.bugreport.versions import versions
from qwen_triage.inputs.journal import read_unit
from qwen_triage.inputs.kernel import Window, read_window
from qwen_triage.redact import mask_env, redact_text, redact_tree

if TYPE_CHECKING:
    from qwen_triage.engine.compiled import CompiledPack
    from qwen_triage.preflight.machine.nvml import GpuProbe
    from qwen_triage.preflight.machine.software import SoftwareInfo
    from qwen_triage.report.model import Diagnosis, Hang, Observation, Report

Runner = Callable[..., subprocess.CompletedProcess]

MAX_DIAGNOSES = 8  # per section
MAX_OBSERVATIONS = 5
MAX_EVIDENCE = 3  # lines per finding
MAX_FIX = 3
MAX_UNRECOGNISED = 5
MAX_TEXT = 300  # characters of one line or summary
MAX_HANG_RANKS = 16  # rows of a multi-rank job's table: the culprit and the suspects first
MAX_JOURNAL_LINES = 50_000  # of one unit's journal for this boot (the newest)
JOURNAL_TIMEOUT_S = 30


def _short(text: str, limit: int = MAX_TEXT) -> str:
    """Redacted first, then cut: a secret cut in half would no longer look like one."""
    text = redact_text(str(text))
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _finding(d: Diagnosis | Observation) -> Finding:
    return Finding(
        severity=d.severity.value,
        rule=d.rule,
        title=_short(d.title),
        summary=_short(d.summary),
        evidence=[_short(e.text) for e in d.evidence[:MAX_EVIDENCE]],
        fix=[_short(s.step) for s in getattr(d, "fix", [])[:MAX_FIX]],
    )


def section_of(report: Report, title: str, source: str) -> Section:
    """The short form of one scan's report."""
    cut = []
    diags, obs, unrec = report.diagnoses, report.observations, report.unrecognised
    if len(diags) > MAX_DIAGNOSES:
        cut.append(f"{len(diags) - MAX_DIAGNOSES} more diagnosis(es)")
    if len(obs) > MAX_OBSERVATIONS:
        cut.append(f"{len(obs) - MAX_OBSERVATIONS} more observation(s)")
    if len(unrec) > MAX_UNRECOGNISED:
        cut.append(f"{len(unrec) - MAX_UNRECOGNISED} more unrecognised error line template(s)")
    if any(len(d.evidence) > MAX_EVIDENCE for d in diags):
        cut.append(f"evidence beyond {MAX_EVIDENCE} lines per diagnosis")
    return Section(
        title=title,
        source=source,
        diagnoses=[_finding(d) for d in diags[:MAX_DIAGNOSES]],
        observations=[_finding(o) for o in obs[:MAX_OBSERVATIONS]],
        unrecognised=[f"{_short(u.template)} (x{u.count})" for u in unrec[:MAX_UNRECOGNISED]],
        notes=[_short(n) for n in report.notes[:10]],
        cut=cut,
    )


def short_hang(hang: Hang, notes: list[str]) -> Hang:
    """A multi-rank job's picture, short: the cause's diagnosis left out (the culprit's `why` names it), at most
    :data:`MAX_HANG_RANKS` rows, the culprit and the suspects first; what was cut goes to ``notes``."""
    from dataclasses import replace

    doubt = {s.rank for s in hang.suspects} | ({hang.culprit.rank} if hang.culprit is not None else set())
    rows = sorted(hang.ranks, key=lambda r: (r.rank not in doubt, r.verdict == "timed out", r.rank))
    if len(rows) > MAX_HANG_RANKS:
        notes.append(f"multi-rank job: {len(rows) - MAX_HANG_RANKS} more rank row(s) not listed")
    return replace(hang, cause=None, ranks=sorted(rows[:MAX_HANG_RANKS], key=lambda r: r.rank))


def _job_hang(compiled: Callable[[], CompiledPack], logs: Sequence[str], reports: list[Report],
              notes: list[str]) -> Hang | None:
    """The logs' multi-rank job as one: one log's own picture, or, when several logs are given and one of them
    shows ranks, the scan of them all together (several hosts' files: their clocks aligned, each rank's host)."""
    found = [r.hang for r in reports if r.hang is not None]
    if not found:
        return None
    hang = found[0]
    if len(logs) > 1:
        from qwen_triage.engine.scanner import scan_paths

        hang = scan_paths(list(logs), compiled()).hang or hang
    return short_hang(hang, notes)


def _scan(compiled: CompiledPack, name: str, data: bytes | None = None, path: str | None = None) -> Report:
    from qwen_triage.engine.scanner import Scanner
    from qwen_triage.inputs.file import open_source
    from qwen_triage.inputs.source import Source

    scanner = Scanner(compiled)
    source = open_source(path) if path is not None else Source(name=name, stream=io.BytesIO(data or b""))
    for _ in scanner.scan_source(source):
        pass
    return scanner.report()


def _boot_time(root: Path) -> float:
    try:
        return time.time() - float((root / "proc" / "uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return time.time() - 86400.0


def collect(
    logs: Sequence[str] = (),
    *,
    units: Sequence[str] = (),
    kernel: bool = False,
    compiled: CompiledPack | Callable[[], CompiledPack],
    gpu_probe: GpuProbe | None = None,
    software: Callable[[], SoftwareInfo] | None = None,
    root: Path = Path("/"),
    environ: dict[str, str] | None = None,
    run: Runner = subprocess.run,
) -> BugReport:
    """The report for ``logs``, the ``units``' journals and (``kernel``) the kernel log since boot, redacted."""
    from qwen_triage.preflight.doctor import probe
    from qwen_triage.preflight.machine.software import probe_software

    get_pack: Callable[[], CompiledPack]
    if callable(compiled):
        get_pack = compiled
    else:
        loaded = compiled
        get_pack = lambda: loaded  # noqa: E731
    notes: list[str] = []

    sw = software() if software else probe_software(environ)
    doc = probe(gpu_probe=gpu_probe, root=root, environ=environ, software=lambda: sw, check_files=False)
    vers = versions(doc.inventory, sw, root)
    doctor = Section(
        title="doctor",
        source="GPUs through NVML, system and software checks",
        diagnoses=[_finding(d) for d in doc.diagnoses[:MAX_DIAGNOSES]],
        observations=[_finding(o) for o in doc.observations[:MAX_OBSERVATIONS]],
        notes=[_short(n) for n in doc.notes[:10]],
        cut=[f"{len(doc.diagnoses) - MAX_DIAGNOSES} more diagnosis(es)"] if len(doc.diagnoses) > MAX_DIAGNOSES else [],
    )
    if sw.env:
        doctor.notes.append("environment: " + " ".join(f"{k}={v}" for k, v in mask_env(sw.env).items()))

    sections: list[Section] = []
    scanned = [_scan(get_pack(), path, path=path) for path in logs]
    sections += [section_of(r, f"log {path}", path) for path, r in zip(logs, scanned, strict=True)]
    hang = _job_hang(get_pack, logs, scanned, notes)
    for unit in units:
        data, how = read_unit(unit, MAX_JOURNAL_LINES, JOURNAL_TIMEOUT_S, run=run)
        if data is None:
            sections.append(Section(title=f"journal of {unit}", source=how, notes=[how]))
            continue
        sections.append(section_of(_scan(get_pack(), f"journal:{unit}", data), f"journal of {unit}", how))
    if kernel:

        klog = read_window(Window(since=_boot_time(root), until=time.time()), run=run)
        if klog.text is None:
            sections.append(Section(title="kernel log since boot", source=klog.how, notes=[klog.how]))
        else:
            sections.append(section_of(_scan(get_pack(), "kernel", klog.text), "kernel log since boot", klog.how))
    if not logs and not units and not kernel:
        notes.append("no log given: pass the server's log file, --journal UNIT or --kernel for a triage")

    report = BugReport(
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        versions=vers,
        doctor=doctor,
        sections=sections,
        hang=hang,
        notes=notes,
    )
    return redacted(report)


def redacted(report: BugReport) -> BugReport:
    """The report with every string through :func:`qwen_triage.redact.redact_text`."""
    data: Any = redact_tree(report.model_dump(mode="json"))
    return BugReport.model_validate(data)


@dataclass(frozen=True)
class ReportOptions:
    """``qwen-triage report``'s options, as the command line gives them (the output format and file are the
    command line's: it renders and writes)."""

    logs: tuple[str, ...] = ()
    units: tuple[str, ...] = ()
    """systemd units whose journal for this boot is triaged"""
    kernel: bool = False
    gpu_snapshot: str | None = None
    """versions and GPUs from this recording instead of this machine"""
    rule_dirs: tuple[str, ...] = ()
    engine: str = "auto"


def run(options: ReportOptions) -> BugReport:
    """``qwen-triage report``: :func:`collect` with the pack compiled only when a log is read."""
    from qwen_triage.engine.scanner import load_compiled

    probe = None
    if options.gpu_snapshot:
        from qwen_triage.preflight.machine.nvml import ReplayProbe

        probe = ReplayProbe(options.gpu_snapshot)
    return collect(list(options.logs), units=list(options.units), kernel=options.kernel,
                   compiled=lambda: load_compiled(options.rule_dirs, options.engine), gpu_probe=probe)
