"""GGUF files: header walk with byte-exact bounds, then a confirming read by the ``gguf`` package.

``gguf.GGUFReader`` memory-maps the file and is the reference reader, but on
a truncated download it fails with a numpy reshape or index error that says
nothing about what is missing. So the header is first walked here, streamed
and bounded by the file size, to name the cut (inside the metadata, or which
tensor's data lies past the end and by how many bytes); the package then
reads every file the walk passed.
"""

from __future__ import annotations

import itertools
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from qwen_triage.engine.check_finding import CheckFinding, finding
from qwen_triage.preflight.findings import act, ev, fix
from qwen_triage.rulepack.actions import Redownload, UpgradePackage, VerifyFile

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4
# Sanity bounds: a header value beyond these is damage, not a real model.
MAX_STRING = 1 << 30
MAX_COUNT = 1 << 34
# Legacy GGML container magics as they appear on disk (little-endian words).
LEGACY = {b"lmgg": "GGML", b"fmgg": "GGMF", b"tjgg": "GGJT"}

_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9
_SPLIT_NAME = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


class GgufDamage(Exception):
    """The file is not a readable GGUF; ``kind`` says how, with byte counts where known."""

    def __init__(self, kind: str, message: str, *, file_size: int = 0, needed: int = 0, version: int | None = None):
        super().__init__(message)
        self.kind = kind  # magic, legacy, lfs-pointer, html, version, truncated, bad-header
        self.file_size = file_size
        self.needed = needed
        self.version = version


@dataclass
class GgufTensor:
    name: str
    type_id: int
    type_name: str | None  # None: a ggml type this gguf package does not know
    shape: list[int]
    offset: int  # absolute
    n_bytes: int | None
    n_elements: int


@dataclass
class GgufHeader:
    path: Path
    version: int
    file_size: int
    alignment: int
    data_offset: int
    kv: dict[str, Any] = field(default_factory=dict)
    array_lengths: dict[str, int] = field(default_factory=dict)
    tensors: list[GgufTensor] = field(default_factory=list)

    @property
    def tensor_bytes(self) -> int:
        return sum(t.n_bytes or 0 for t in self.tensors)

    @property
    def tensor_elements(self) -> int:
        return sum(t.n_elements for t in self.tensors)

    @property
    def data_end(self) -> int:
        ends = [t.offset + t.n_bytes for t in self.tensors if t.n_bytes is not None]
        return max(ends, default=self.data_offset)


class _Reader:
    def __init__(self, fh: BinaryIO, size: int):
        self.fh = fh
        self.size = size
        self.pos = 0
        self.where = "the header"

    def take(self, n: int) -> bytes:
        if self.pos + n > self.size:
            raise GgufDamage(
                "truncated",
                f"file ends at byte {self.size} inside {self.where} (needs at least {self.pos + n} bytes)",
                file_size=self.size,
                needed=self.pos + n,
            )
        data = self.fh.read(n)
        self.pos += n
        return data

    def skip(self, n: int) -> None:
        if self.pos + n > self.size:
            self.take(n)
        self.fh.seek(n, 1)
        self.pos += n

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.scalar("<Q")
        if n > MAX_STRING:
            raise GgufDamage("bad-header", f"string length {n} at byte {self.pos - 8} in {self.where} is not plausible")
        return self.take(n).decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        n = self.scalar("<Q")
        if n > MAX_STRING:
            raise GgufDamage("bad-header", f"string length {n} at byte {self.pos - 8} in {self.where} is not plausible")
        self.skip(n)


def _value(r: _Reader, vtype: int, key: str, header: GgufHeader) -> Any:
    if vtype in _SCALARS:
        return r.scalar(_SCALARS[vtype])
    if vtype == _STRING:
        return r.string()
    if vtype == _ARRAY:
        etype = r.scalar("<I")
        count = r.scalar("<Q")
        if count > MAX_COUNT:
            raise GgufDamage("bad-header", f"array {key!r} claims {count} elements")
        header.array_lengths[key] = count
        if etype in _SCALARS:
            width = struct.calcsize(_SCALARS[etype])
            if count <= 64:
                return [r.scalar(_SCALARS[etype]) for _ in range(count)]
            r.skip(width * count)
            return None
        if etype == _STRING:
            if count <= 64:
                return [r.string() for _ in range(count)]
            for _ in range(count):
                r.skip_string()
            return None
        raise GgufDamage("bad-header", f"array {key!r} has element type {etype}, which GGUF does not define")
    raise GgufDamage("bad-header", f"key {key!r} has value type {vtype}, which GGUF does not define")


def sniff(head: bytes) -> tuple[str, str] | None:
    if head[:4] in LEGACY:
        return "legacy", f"a legacy {LEGACY[head[:4]]} file, not GGUF"
    if head.startswith(b"version https://git-lfs"):
        return "lfs-pointer", "a git-lfs pointer, not the file: the clone ran without git-lfs"
    stripped = head.lstrip().lower()
    if stripped.startswith((b"<!doctype", b"<html")):
        return "html", "an HTML page (an error or login page saved in place of the file)"
    return None


def read_header(path: Path) -> GgufHeader:
    """Walk the GGUF header without reading tensor data. Raises :class:`GgufDamage`."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(64)
        fh.seek(0)
        if head[:4] != MAGIC:
            sniffed = sniff(head)
            if sniffed:
                raise GgufDamage(sniffed[0], sniffed[1], file_size=size)
            if size < 4:
                raise GgufDamage("truncated", f"file is {size} bytes, too short for the GGUF magic", file_size=size)
            raise GgufDamage("magic", f"bad magic {head[:4]!r}: not a GGUF file", file_size=size)
        r = _Reader(fh, size)
        r.take(4)
        version = r.scalar("<I")
        if version not in SUPPORTED_VERSIONS:
            raise GgufDamage("version", f"GGUF version {version}", file_size=size, version=version)
        tensor_count = r.scalar("<Q")
        kv_count = r.scalar("<Q")
        if tensor_count > MAX_COUNT or kv_count > MAX_COUNT:
            raise GgufDamage("bad-header", f"implausible counts: {tensor_count} tensors, {kv_count} keys")
        header = GgufHeader(path=path, version=version, file_size=size, alignment=DEFAULT_ALIGNMENT, data_offset=0)
        for i in range(kv_count):
            r.where = f"the metadata (key {i + 1} of {kv_count})"
            key = r.string()
            header.kv[key] = _value(r, r.scalar("<I"), key, header)
        infos = []
        for i in range(tensor_count):
            r.where = f"the tensor infos (tensor {i + 1} of {tensor_count})"
            name = r.string()
            n_dims = r.scalar("<I")
            if n_dims > MAX_DIMS:
                raise GgufDamage("bad-header", f"tensor {name!r} claims {n_dims} dimensions")
            dims = [r.scalar("<Q") for _ in range(n_dims)]
            infos.append((name, dims, r.scalar("<I"), r.scalar("<Q")))
        alignment = header.kv.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise GgufDamage("bad-header", f"general.alignment {alignment!r} is not a power of two")
        header.alignment = alignment
        header.data_offset = (r.pos + alignment - 1) // alignment * alignment

    for name, dims, type_id, rel in infos:
        n_elems = 1
        for d in dims:
            n_elems *= d
        try:
            qtype = GGMLQuantizationType(type_id)
            block, type_size = GGML_QUANT_SIZES[qtype]
            type_name: str | None = qtype.name
            n_bytes: int | None = n_elems // block * type_size
        except (ValueError, KeyError):
            type_name, n_bytes = None, None
        header.tensors.append(GgufTensor(name, type_id, type_name, dims, header.data_offset + rel, n_bytes, n_elems))
    return header


# --- findings --------------------------------------------------------------------------


def _redownload(path: Path) -> list:
    return [
        fix(f"verify {path.name} against the published sha256", act(VerifyFile, path=str(path))),
        fix(
            f"delete and download {path.name} again (`ollama pull`, `huggingface-cli download`)",
            act(Redownload, what=path.name),
        ),
    ]


def _corrupt(path: Path, check_id: str, summary: str, text: str, facts: dict | None = None) -> CheckFinding:
    """A damaged GGUF file: one evidence line and the verify-then-download-again fix every such finding shares."""
    return finding(check_id, summary, facts=facts or {}, evidence=[ev(path, text)], fix=_redownload(path))


def damage_finding(path: Path, d: GgufDamage) -> CheckFinding:
    if d.kind == "legacy":
        return finding(
            "preflight.model.gguf-legacy",
            f"{path.name} is {d}; llama.cpp and Ollama no longer load it. Convert it or download a GGUF.",
            evidence=[ev(path, str(d))],
            fix=[fix("download the GGUF release of the model", act(Redownload, what=path.name))],
        )
    if d.kind == "version":
        old = (d.version or 0) < SUPPORTED_VERSIONS[0]
        return finding(
            "preflight.model.gguf-version",
            f"{path.name} is GGUF version {d.version}; current loaders read versions 2 and 3."
            + (" Re-convert or re-download it." if old else " Upgrade llama.cpp/Ollama (or the file is damaged)."),
            facts={"version": d.version},
            evidence=[ev(path, f"unsupported GGUF version {d.version}")],
            fix=[fix("upgrade the loader", act(UpgradePackage, package="ollama"))] if not old else _redownload(path),
        )
    if d.kind == "truncated":
        missing = d.needed - d.file_size
        return _corrupt(
            path,
            "preflight.model.gguf-truncated",
            f"{path.name} is truncated: {d}. The download stopped early.",
            f"{d} (at least {missing} bytes missing)",
            {"file_bytes": d.file_size, "needed_bytes": d.needed, "missing_bytes": missing},
        )
    return _corrupt(
        path,
        f"preflight.model.gguf-{d.kind}",
        f"{path.name} is not a readable GGUF file: {d}.",
        str(d),
        {"file_bytes": d.file_size},
    )


def _truncated(path: Path, header: GgufHeader, beyond: list[GgufTensor]) -> CheckFinding:
    need = header.data_end
    missing = need - header.file_size
    first = min(beyond, key=lambda t: t.offset)
    pct = 100 * missing / max(need, 1)
    return _corrupt(
        path,
        "preflight.model.gguf-truncated",
        f"{path.name} is a truncated download: the tensor data needs {need} bytes, the file has "
        f"{header.file_size} ({missing} bytes, {pct:.1f}%, missing; "
        f"{len(beyond)} of {len(header.tensors)} tensors cut).",
        f"tensor '{first.name}' data is not within the file bounds: needs bytes "
        f"{first.offset}..{first.offset + (first.n_bytes or 0)}, file has {header.file_size}",
        {"file_bytes": header.file_size, "needed_bytes": need, "missing_bytes": missing, "tensors_cut": len(beyond)},
    )


def check_header(path: Path, header: GgufHeader) -> list[CheckFinding]:
    out = []
    unknown = [t for t in header.tensors if t.type_name is None]
    if unknown:
        t = unknown[0]
        out.append(
            finding(
                "preflight.model.gguf-type",
                f"{len(unknown)} tensor(s) use a ggml type id this gguf package does not know "
                f"(first: {t.name!r}, type {t.type_id}): the quantization is newer than the loader, or the "
                "header is damaged.",
                evidence=[ev(path, f"tensor {t.name!r}: ggml type {t.type_id}")],
            )
        )
    beyond = [t for t in header.tensors if t.n_bytes is not None and t.offset + t.n_bytes > header.file_size]
    if beyond:
        out.append(_truncated(path, header, beyond))
    misaligned = [t for t in header.tensors if (t.offset - header.data_offset) % header.alignment]
    if misaligned:
        t = misaligned[0]
        out.append(
            _corrupt(
                path,
                "preflight.model.gguf-misaligned",
                f"{len(misaligned)} tensor offset(s) are not multiples of the alignment {header.alignment}.",
                f"tensor {t.name!r} at offset {t.offset - header.data_offset}",
            )
        )
    spans = sorted((t.offset, t.offset + t.n_bytes, t.name) for t in header.tensors if t.n_bytes)
    for (_s1, e1, n1), (s2, _e2, n2) in itertools.pairwise(spans):
        if s2 < e1:
            out.append(
                _corrupt(
                    path,
                    "preflight.model.gguf-overlap",
                    f"tensors {n1!r} and {n2!r} overlap: the tensor infos are damaged.",
                    f"{n1!r} ends at {e1}, {n2!r} starts at {s2}",
                )
            )
            break
    return out


def info_findings(path: Path, header: GgufHeader) -> list[CheckFinding]:
    import gguf

    arch = str(header.kv.get("general.architecture", "?"))
    counts: dict[str, int] = {}
    for t in header.tensors:
        counts[t.type_name or f"type{t.type_id}"] = counts.get(t.type_name or f"type{t.type_id}", 0) + 1
    file_type = header.kv.get("general.file_type")
    try:
        ftype = gguf.LlamaFileType(file_type).name if file_type is not None else None
    except ValueError:
        ftype = f"file_type {file_type}"
    named = [ev(path, f"general.architecture = {arch}")]
    out = [
        finding(
            "preflight.model.gguf-info",
            f"{path.name}: GGUF v{header.version}, architecture {arch}, "
            f"{ftype or 'file type not stated'}, {len(header.tensors)} tensors "
            f"({', '.join(f'{k} x{v}' for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))}).",
            facts={"architecture": arch, "file_type": ftype, "tensor_types": counts, "version": header.version},
            evidence=named,
        )
    ]
    if arch != "?" and arch not in set(gguf.MODEL_ARCH_NAMES.values()):
        out.append(
            finding(
                "preflight.model.gguf-arch",
                f"architecture {arch!r} is not among those the gguf package knows; an older "
                "llama.cpp/Ollama may not load it.",
                evidence=named,
            )
        )
    return out


def split_findings(path: Path, header: GgufHeader) -> list[CheckFinding]:
    count = header.kv.get("split.count")
    m = _SPLIT_NAME.match(path.name)
    if not isinstance(count, int) or count <= 1 or not m:
        return []
    if int(m["no"]) != 1:
        return []
    missing = [
        f"{m['stem']}-{i:05d}-of-{count:05d}.gguf"
        for i in range(1, count + 1)
        if not (path.parent / f"{m['stem']}-{i:05d}-of-{count:05d}.gguf").exists()
    ]
    if not missing:
        return []
    return [
        finding(
            "preflight.model.gguf-split-missing",
            f"{path.name} is part 1 of {count}; missing: {', '.join(missing)}.",
            facts={"missing": missing, "split_count": count},
            evidence=[ev(path.parent / name, f"split.count = {count}; {name} not found") for name in missing],
            fix=[fix(f"download {name}", act(Redownload, what=name)) for name in missing[:5]],
        )
    ]


def library_read(path: Path) -> str | None:
    """Let the gguf package read the whole header and map every tensor; the error, if any."""
    import gguf

    try:
        reader = gguf.GGUFReader(path, "r")
        del reader
    except Exception as exc:  # the reader raises ValueError, IndexError, KeyError...
        return f"{type(exc).__name__}: {exc}"
    return None


def check_gguf(path: Path) -> tuple[list[CheckFinding], GgufHeader | None]:
    try:
        header = read_header(path)
    except GgufDamage as d:
        return [damage_finding(path, d)], None
    except OSError as exc:
        return [
            _corrupt(path, "preflight.model.gguf-unreadable", f"{path.name}: {exc}", str(exc))
        ], None
    findings = check_header(path, header)
    if not findings:
        error = library_read(path)
        if error:
            findings.append(
                _corrupt(
                    path,
                    "preflight.model.gguf-reader",
                    f"gguf {_gguf_version()} cannot read {path.name}: {error}",
                    error,
                )
            )
    findings += split_findings(path, header)
    return findings, header


def _gguf_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gguf")
    except PackageNotFoundError:
        return "?"
