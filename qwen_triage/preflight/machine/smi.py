"""What users paste: ``nvidia-smi -q -x`` (XML) and ``nvidia-smi topo -m`` (text).

Both become a :class:`GpuSnapshot`, so ``doctor`` judges someone else's
machine with the same checks as its own. The XML parser is the standard
library's, fed text that is already in memory; pasted XML carries no DTD we
would fetch (``xml.etree`` does not resolve external entities).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from qwen_triage.preflight.machine.nvml import (
    Ecc,
    Gpu,
    GpuProcess,
    GpuSnapshot,
    Memory,
    Pcie,
    RemappedRows,
    ReplayProbe,
)
from qwen_triage.units import MiB, SizeError, parse_size

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_DEVICE = re.compile(r"^(GPU\d+|NIC\d+)$")

# Compute capability by architecture, for XML from drivers that do not print it.
_ARCH_CC = {
    "pascal": "6.1",
    "volta": "7.0",
    "turing": "7.5",
    "ampere": "8.6",
    "ada lovelace": "8.9",
    "hopper": "9.0",
    "blackwell": "10.0",
}
_NAME_CC = [
    (re.compile(r"\b(A100|A30|A800)\b"), "8.0"),
    (re.compile(r"\bRTX 50\d0|RTX PRO \d000 Blackwell"), "12.0"),
    (re.compile(r"\b(H100|H200|H800|H20|GH200)\b"), "9.0"),
    (re.compile(r"\bRTX 40\d0|\bL4\b|\bL40S?\b|RTX \d000 Ada"), "8.9"),
    (re.compile(r"\bRTX 30\d0|\bA10G?\b|\bA40\b|RTX A\d000|\bA16\b|\bA2\b"), "8.6"),
    (re.compile(r"\b(T4|RTX 20\d0|TITAN RTX|Quadro RTX)\b"), "7.5"),
    (re.compile(r"\bV100\b|TITAN V"), "7.0"),
    (re.compile(r"\bP100\b"), "6.0"),
    (re.compile(r"\b(P40|P4|GTX 10\d0)\b"), "6.1"),
]


class SmiParseError(ValueError):
    pass


def compute_capability_for(name: str, architecture: str | None = None) -> str | None:
    for pattern, cc in _NAME_CC:
        if pattern.search(name):
            return cc
    return _ARCH_CC.get((architecture or "").strip().lower())


def _txt(node: ET.Element | None, path: str) -> str | None:
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in ("", "N/A", "[N/A]", "Not Supported", "[Not Supported]", "Unknown Error") else value


def _int(node: ET.Element | None, path: str) -> int | None:
    value = _txt(node, path)
    if value is None:
        return None
    m = re.match(r"^\s*(\d+)", value)
    return int(m.group(1)) if m else None


def _bytes(node: ET.Element | None, path: str) -> int | None:
    value = _txt(node, path)
    if value is None:
        return None
    try:
        return parse_size(value, bare=MiB)  # nvidia-smi prints MiB
    except SizeError:
        return None


def _yes(node: ET.Element | None, path: str) -> bool | None:
    value = _txt(node, path)
    if value is None:
        return None
    return value.lower() in ("yes", "enabled", "true")


def parse_nvidia_smi_xml(text: str, source: str = "nvidia-smi -q -x") -> GpuSnapshot:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise SmiParseError(f"not nvidia-smi XML: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise SmiParseError(f"not nvidia-smi -q -x output (root element <{root.tag}>)")
    gpus = []
    for index, g in enumerate(root.findall("gpu")):
        name = _txt(g, "product_name") or "?"
        total, used, free = (
            _bytes(g, "fb_memory_usage/total"),
            _bytes(g, "fb_memory_usage/used"),
            _bytes(g, "fb_memory_usage/free"),
        )
        link = g.find("pci/pci_gpu_link_info")
        remap = g.find("remapped_rows")
        remapped = None
        if remap is not None and _txt(g, "remapped_rows") is None and len(remap):
            remapped = RemappedRows(
                correctable=_int(remap, "remapped_row_corr") or 0,
                uncorrectable=_int(remap, "remapped_row_unc") or 0,
                pending=bool(_yes(remap, "remapped_row_pending")),
                failure=bool(_yes(remap, "remapped_row_failure")),
            )
        procs = [
            GpuProcess(
                pid=int(_txt(p, "pid") or 0),
                name=_txt(p, "process_name"),
                used_bytes=_bytes(p, "used_memory"),
            )
            for p in g.findall("processes/process_info")
        ]
        numa = _int(g, "numa_node") if _txt(g, "numa_node") else None
        gpus.append(
            Gpu(
                index=index,
                name=name,
                uuid=_txt(g, "uuid"),
                pci_bus_id=g.get("id") or _txt(g, "pci/pci_bus_id") or f"gpu{index}",
                vbios=_txt(g, "vbios_version"),
                serial=_txt(g, "serial"),
                memory=Memory(
                    total=total or 0, used=used or 0, free=free or 0, reserved=_bytes(g, "fb_memory_usage/reserved")
                ),
                compute_capability=_txt(g, "compute_cap")
                or compute_capability_for(name, _txt(g, "product_architecture")),
                pcie=Pcie(
                    gen_current=_int(link, "pcie_gen/current_link_gen"),
                    gen_max=_int(link, "pcie_gen/max_link_gen"),
                    width_current=_int(link, "link_widths/current_link_width"),
                    width_max=_int(link, "link_widths/max_link_width"),
                    replay_counter=_int(g, "pci/replay_counter"),
                ),
                ecc=Ecc(
                    enabled=_yes(g, "ecc_mode/current_ecc"),
                    volatile_uncorrected=_int(g, "ecc_errors/volatile/dram_uncorrectable")
                    if _txt(g, "ecc_errors/volatile/dram_uncorrectable")
                    else _int(g, "ecc_errors/volatile/double_bit/total"),
                    aggregate_uncorrected=_int(g, "ecc_errors/aggregate/dram_uncorrectable")
                    if _txt(g, "ecc_errors/aggregate/dram_uncorrectable")
                    else _int(g, "ecc_errors/aggregate/double_bit/total"),
                ),
                remapped_rows=remapped,
                processes=procs,
                compute_mode=_txt(g, "compute_mode"),
                persistence_mode=_yes(g, "persistence_mode"),
                mig_enabled=_yes(g, "mig_mode/current_mig"),
                numa_node=numa,
            )
        )
    if not gpus:
        raise SmiParseError("the XML lists no <gpu> elements")
    return GpuSnapshot(
        source=source,
        driver_version=_txt(root, "driver_version"),
        cuda_driver_version=_txt(root, "cuda_version"),
        gpus=gpus,
    )


class Topology:
    def __init__(
        self, gpus: list[str], matrix: list[list[str]], cpu_affinity: list[str | None], numa: list[int | None]
    ):
        self.gpus = gpus
        self.matrix = matrix
        self.cpu_affinity = cpu_affinity
        self.numa = numa


def parse_topo_matrix(text: str) -> Topology:
    """``nvidia-smi topo -m``: the GPU x GPU block (NIC columns dropped), CPU and NUMA affinity."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    # The header row starts with GPU0 GPU1...; the GPU0 data row with GPU0 X.
    header_at = next(
        (i for i, line in enumerate(lines) if line.split()[:1] == ["GPU0"] and line.split()[1:2] != ["X"]),
        None,
    )
    if header_at is None:
        raise SmiParseError("no `GPU0 GPU1 ...` header row: is this `nvidia-smi topo -m` output?")
    columns = [tok for tok in lines[header_at].split() if _DEVICE.match(tok)]
    gpu_cols = [i for i, c in enumerate(columns) if c.startswith("GPU")]
    rows: dict[str, list[str]] = {}
    affinity: dict[str, str | None] = {}
    numa: dict[str, int | None] = {}
    for line in lines[header_at + 1 :]:
        tokens = line.split()
        if not tokens or not re.match(r"^GPU\d+$", tokens[0]):
            if rows and (not tokens or tokens[0].startswith(("Legend", "NIC"))):
                break
            continue
        cells = tokens[1 : 1 + len(columns)]
        if len(cells) < len(columns):
            raise SmiParseError(f"row {tokens[0]} has {len(cells)} cells for {len(columns)} columns")
        rows[tokens[0]] = [cells[i] for i in gpu_cols]
        rest = tokens[1 + len(columns) :]
        affinity[tokens[0]] = rest[0] if rest and rest[0] != "N/A" else None
        numa[tokens[0]] = int(rest[1]) if len(rest) > 1 and rest[1].isdigit() else None
    names = [columns[i] for i in gpu_cols]
    missing = [n for n in names if n not in rows]
    if missing:
        raise SmiParseError(f"no row for {', '.join(missing)}")
    matrix = [rows[n] for n in names]
    return Topology(names, matrix, [affinity[n] for n in names], [numa[n] for n in names])


def merge_topology(snapshot: GpuSnapshot | None, topo: Topology, source: str) -> GpuSnapshot:
    """Attach a pasted topology to a snapshot, or make a bare snapshot from the topology alone."""
    if snapshot is None:
        snapshot = GpuSnapshot(
            source=source,
            gpus=[
                Gpu(
                    index=i,
                    name="?",
                    pci_bus_id=f"GPU{i}",
                    memory=Memory(total=0, used=0, free=0),
                    numa_node=topo.numa[i],
                )
                for i in range(len(topo.gpus))
            ],
        )
    gpus = [
        g.model_copy(
            update={
                "numa_node": g.numa_node if g.numa_node is not None else (topo.numa[i] if i < len(topo.numa) else None)
            }
        )
        for i, g in enumerate(snapshot.gpus)
    ]
    return snapshot.model_copy(update={"topology": topo.matrix, "cpu_affinity": topo.cpu_affinity, "gpus": gpus})


class PastedDataError(ValueError):
    """A pasted or recorded file could not be read (the command exits 2 with this reason)."""


def pasted_snapshot(replay: ReplayProbe | None, nvidia_smi: str | Path | None,
                    topo: str | Path | None) -> GpuSnapshot | None:
    """Another machine's GPUs, as ``plan`` and ``doctor`` take them: a recording (``doctor --record``) or
    ``nvidia-smi -q -x`` output, with its ``nvidia-smi topo -m`` matrix; None when none is given."""
    snap: GpuSnapshot | None = None
    try:
        if nvidia_smi is not None:
            snap = parse_nvidia_smi_xml(
                Path(nvidia_smi).read_text(encoding="utf-8"), source=f"nvidia-smi: {nvidia_smi}"
            )
        elif replay is not None:
            snap = replay.snapshot()
        if topo is not None:
            snap = merge_topology(snap, parse_topo_matrix(Path(topo).read_text(encoding="utf-8")), f"topo: {topo}")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise PastedDataError(str(exc)) from None
    return snap
