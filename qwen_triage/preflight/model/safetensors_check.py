"""safetensors files: the header, parsed here for byte counts, then opened by the ``safetensors`` package.

A safetensors file is an 8-byte little-endian header length, a JSON header,
and a data buffer the header's ``data_offsets`` must tile exactly. Only the
header is read (at most 100 MB, the format's own limit); ``safe_open``
memory-maps the file and runs the package's own validation, whose error text
is the one vLLM users see (``Error while deserializing header: ...``).
"""

from __future__ import annotations

import itertools
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

from qwen_triage.engine.check_finding import CheckFinding, finding
from qwen_triage.preflight.findings import act, ev, fix
from qwen_triage.preflight.model import jsontext
from qwen_triage.preflight.model.gguf_check import sniff
from qwen_triage.rulepack.actions import Redownload, VerifyFile

MAX_HEADER = 100_000_000  # safetensors refuses larger headers ("HeaderTooLarge")
TAIL_PROBE = 1 << 20
TAIL_MIN_DATA = 4 << 20

DTYPE_SIZE = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "U16": 2,
    "U32": 4,
    "U64": 8,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "C64": 8,
}


class StDamage(Exception):
    def __init__(self, kind: str, message: str, *, file_size: int = 0, needed: int = 0):
        super().__init__(message)
        self.kind = kind  # short, lfs-pointer, html, header-too-large, truncated, header-json, header-shape
        self.file_size = file_size
        self.needed = needed


@dataclass
class StTensor:
    name: str
    dtype: str
    shape: list[int]
    start: int  # relative to the data buffer
    end: int


@dataclass
class StHeader:
    path: Path
    file_size: int
    header_len: int
    tensors: dict[str, StTensor] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def data_len(self) -> int:
        return self.file_size - 8 - self.header_len

    @property
    def data_end(self) -> int:
        return max((t.end for t in self.tensors.values()), default=0)


def read_header(path: Path) -> StHeader:
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise StDamage("short", f"file is {size} bytes, too short for a safetensors header", file_size=size)
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER:
            fh.seek(0)
            sniffed = sniff(fh.read(64))
            if sniffed:
                raise StDamage(sniffed[0], sniffed[1], file_size=size)
            raise StDamage("header-too-large", f"header length {n} is not plausible (HeaderTooLarge)", file_size=size)
        if 8 + n > size:
            raise StDamage(
                "truncated",
                f"file is {size} bytes but its header alone needs {8 + n}",
                file_size=size,
                needed=8 + n,
            )
        raw = fh.read(n)
    try:
        parsed = jsontext.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StDamage("header-json", f"header is not valid JSON: {exc}", file_size=size) from None
    if not isinstance(parsed, dict):
        raise StDamage("header-json", "header is not a JSON object", file_size=size)
    header = StHeader(path=path, file_size=size, header_len=n)
    for name, spec in parsed.items():
        if name == "__metadata__":
            header.metadata = spec if isinstance(spec, dict) else {}
            continue
        try:
            start, end = (int(v) for v in spec["data_offsets"])
            header.tensors[name] = StTensor(name, str(spec["dtype"]), [int(d) for d in spec["shape"]], start, end)
        except (KeyError, TypeError, ValueError):
            raise StDamage(
                "header-shape", f"tensor {name!r} has a malformed entry: {spec!r}"[:300], file_size=size
            ) from None
    return header


def _redownload(path: Path) -> list:
    return [
        fix(f"check {path.name} against the hub's sha256", act(VerifyFile, path=str(path))),
        fix(f"download {path.name} again", act(Redownload, what=path.name)),
    ]


def corrupt(
    path: Path,
    check_id: str,
    summary: str,
    texts: list[str],
    facts: dict | None = None,
    variant: str | None = None,
) -> CheckFinding:
    """A damaged shard: its evidence lines and the verify-then-download-again fix every such finding shares."""
    return finding(
        check_id,
        summary,
        variant=variant,
        facts={"file": path.name, **(facts or {})},
        evidence=[ev(path, t) for t in texts],
        fix=_redownload(path),
    )


def damage_finding(path: Path, d: StDamage) -> CheckFinding:
    if d.kind == "lfs-pointer":
        f = corrupt(
            path,
            "preflight.model.lfs-pointer",
            f"{path.name} is {d}. Run `git lfs pull` in the clone, or download with `huggingface-cli download`.",
            [str(d)],
        )
        return f
    if d.kind == "truncated":
        return corrupt(
            path,
            "preflight.model.shard-truncated",
            f"{path.name} is truncated inside its header: {d}.",
            [str(d)],
            {"file_bytes": d.file_size, "needed_bytes": d.needed, "missing_bytes": d.needed - d.file_size},
            variant="in-header",
        )
    return corrupt(
        path,
        f"preflight.model.header-{d.kind}",
        f"{path.name}: {d}.",
        [f"Error while deserializing header: {d}"],
    )


def check_header(path: Path, h: StHeader) -> list[CheckFinding]:
    out = []
    bad_size = []
    for t in h.tensors.values():
        width = DTYPE_SIZE.get(t.dtype)
        count = 1
        for d in t.shape:
            count *= d
        if t.end < t.start or (width is not None and t.end - t.start != count * width):
            bad_size.append(t)
    if bad_size:
        t = bad_size[0]
        out.append(
            corrupt(
                path,
                "preflight.model.header-offsets",
                f"{len(bad_size)} tensor(s) in {path.name} have data_offsets that do not match dtype x shape.",
                [f"{t.name}: {t.dtype} {t.shape} at [{t.start}, {t.end})"],
            )
        )
    need, have = h.data_end, h.data_len
    if need > have:
        cut = sorted((t for t in h.tensors.values() if t.end > have), key=lambda t: t.start)
        missing = need - have
        out.append(
            corrupt(
                path,
                "preflight.model.shard-truncated",
                f"{path.name} is truncated: the header promises {need} bytes of tensor data, the file holds {have} "
                f"({missing} bytes, {100 * missing / max(need, 1):.1f}%, missing; "
                f"{len(cut)} of {len(h.tensors)} tensors cut).",
                [
                    f"tensor {cut[0].name!r} needs bytes [{cut[0].start}, {cut[0].end}) of the data buffer; the file "
                    f"is {h.file_size} bytes ({have} of data)"
                ],
                {
                    "file_bytes": h.file_size,
                    "needed_bytes": h.file_size + missing,
                    "missing_bytes": missing,
                    "tensors_cut": len(cut),
                },
            )
        )
    elif need < have:
        out.append(
            corrupt(
                path,
                "preflight.model.shard-trailing",
                f"{path.name} has {have - need} bytes after the last tensor: the file is not the one the "
                "header describes (a bad merge or an appended download).",
                [f"data buffer {have} bytes, tensors cover {need}"],
            )
        )
    spans = sorted((t.start, t.end, t.name) for t in h.tensors.values())
    for (_s1, e1, n1), (s2, _e2, n2) in itertools.pairwise(spans):
        if s2 != e1:
            what = "overlap" if s2 < e1 else "leave a gap"
            out.append(
                corrupt(
                    path,
                    "preflight.model.header-offsets",
                    f"tensors {n1!r} and {n2!r} {what} in {path.name}.",
                    [f"{n1!r} ends at {e1}, {n2!r} starts at {s2}"],
                )
            )
            break
    return out


def zero_tail(path: Path, file_size: int, data_len: int) -> CheckFinding | None:
    """A preallocated download that never finished has the right size and a zero tail."""
    if data_len < TAIL_MIN_DATA:
        return None
    with path.open("rb") as fh:
        fh.seek(file_size - TAIL_PROBE)
        tail = fh.read(TAIL_PROBE)
    if tail.count(0) != len(tail):
        return None
    return corrupt(
        path,
        "preflight.model.zero-tail",
        f"the last {TAIL_PROBE >> 20} MiB of {path.name} are all zero bytes: a preallocated download "
        "that never finished writing. Verify the checksum.",
        [f"bytes {file_size - TAIL_PROBE}..{file_size} are zero"],
    )


def library_open(path: Path) -> tuple[str | None, list[str]]:
    """Open with the safetensors package (memory-mapped, nothing loaded): (error, tensor names)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            return None, list(f.keys())
    except Exception as exc:  # SafetensorError, OSError
        return str(exc), []


def check_safetensors(path: Path) -> tuple[list[CheckFinding], StHeader | None]:
    try:
        header = read_header(path)
    except StDamage as d:
        finding = damage_finding(path, d)
        error, _ = library_open(path)
        if error:
            finding.evidence.append(ev(path, f"safetensors: {error}"))
        return [finding], None
    except OSError as exc:
        return [
            corrupt(path, "preflight.model.shard-unreadable", f"{path.name}: {exc}", [str(exc)])
        ], None
    findings = check_header(path, header)
    error, _names = library_open(path)
    if error and findings:
        findings[0].evidence.append(ev(path, f"safetensors: {error}"))
    elif error:
        findings.append(
            corrupt(
                path,
                "preflight.model.shard-library",
                f"the safetensors package cannot open {path.name}: {error}",
                [error],
            )
        )
    if not findings:
        tail = zero_tail(path, header.file_size, header.data_len)
        if tail:
            findings.append(tail)
    return findings, header
