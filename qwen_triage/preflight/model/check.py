"""``check-model``: is a model directory (or one file) complete and readable, without loading it?

Only headers are read, plus the last MiB of each shard; hashing, when asked
for, streams the files in 8 MiB chunks. Findings use the classes a failed
launch would be triaged into (shard missing, shard corrupt, GGUF corrupt,
format mismatch), so the runner can act on either.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from qwen_triage.engine.check_finding import CheckFinding, finding
from qwen_triage.preflight.findings import act, ev, fix, to_report
from qwen_triage.preflight.model import gguf_check as ggufcheck
from qwen_triage.preflight.model import jsontext
from qwen_triage.preflight.model import safetensors_check as stcheck
from qwen_triage.preflight.model.config_check import check_config, check_tokenizer
from qwen_triage.preflight.model.hashes import ChecksumFileError, ProgressStart, blob_digest, parse_sums, sha256_file
from qwen_triage.preflight.model.scan_state import FileReport, ScanState
from qwen_triage.preflight.output import PreflightOutput
from qwen_triage.report.model import Diagnosis, Observation
from qwen_triage.rulepack.actions import Redownload, VerifyFile
from qwen_triage.rulepack.spec import ClassSpec

_SHARD = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.(?P<ext>safetensors|bin)$")
SMALL_SHARD = 0.5  # of the median sibling


class ModelPathError(ValueError):
    """Bad input (no such path, unreadable checksum list); the CLI exits 2."""


class CheckModelResult(PreflightOutput):
    kind: str = "check-model"
    path: str
    format: str = Field(description="safetensors, gguf, pytorch, mixed or none")
    files: list[FileReport] = Field(default_factory=list)
    diagnoses: list[Diagnosis] = Field(default_factory=list)
    observations: list[Observation] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def _missing_finding(root: Path, names: list[str], why: str) -> CheckFinding:
    return finding(
        "preflight.model.shard-missing",
        f"{len(names)} shard(s) {why} are missing: {', '.join(names[:5])}"
        + (f" and {len(names) - 5} more." if len(names) > 5 else "."),
        facts={"missing": names},
        evidence=[ev(root / n, f"{n}: No such file ({why})") for n in names],
        fix=[fix(f"download {n} again", act(Redownload, what=n)) for n in names[:5]]
        + [fix("compare the files with model.safetensors.index.json", act(VerifyFile, path=str(root)))],
    )


def _check_index(st: ScanState, index_path: Path) -> dict[str, str]:
    """weight_map of a safetensors (or pytorch) index; reports absent shards."""
    try:
        data = jsontext.loads(index_path.read_text(encoding="utf-8"))
        weight_map = data["weight_map"]
        if not isinstance(weight_map, dict):
            raise TypeError("weight_map is not an object")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        st.file(index_path.name, "index", index_path.stat().st_size, ok=False, detail=str(exc))
        st.findings.append(
            stcheck.corrupt(
                index_path,
                "preflight.model.index-invalid",
                f"{index_path.name} cannot be read: {exc}.",
                [str(exc)],
            )
        )
        return {}
    st.file(index_path.name, "index", index_path.stat().st_size, detail=f"{len(weight_map)} tensors")
    shards = sorted(set(weight_map.values()))
    missing = [s for s in shards if not (st.root / s).exists()]
    if missing:
        dangling = [s for s in missing if (st.root / s).is_symlink()]
        why = f"named by {index_path.name}"
        if dangling:
            why += " (dangling links into the hub cache: the blob never finished downloading)"
        st.findings.append(_missing_finding(st.root, missing, why))
        for s in missing:
            st.file(s, "safetensors" if s.endswith(".safetensors") else "weights", None, ok=False, detail="missing")
    return weight_map


def _check_series(st: ScanState, names: list[str]) -> None:
    """``model-0000N-of-0000M`` names without an index still say how many shards there should be."""
    series: dict[tuple[str, int, str], set[int]] = {}
    for name in names:
        m = _SHARD.match(name)
        if m:
            series.setdefault((m["stem"], int(m["count"]), m["ext"]), set()).add(int(m["no"]))
    for (stem, count, ext), have in series.items():
        missing = [f"{stem}-{i:05d}-of-{count:05d}.{ext}" for i in range(1, count + 1) if i not in have]
        missing = [n for n in missing if n not in st.files]
        if missing:
            st.findings.append(_missing_finding(st.root, missing, f"of the {count}-part series"))
            for n in missing:
                st.file(n, ext, None, ok=False, detail="missing")


def _check_siblings(st: ScanState, names: list[str]) -> None:
    by_series: dict[tuple[str, int], list[tuple[int, str, int]]] = {}
    for name in names:
        m = _SHARD.match(name)
        report = st.files.get(name)
        # A shard already found damaged needs no second finding for its size.
        if m and report and report.ok and report.bytes is not None:
            by_series.setdefault((m["stem"], int(m["count"])), []).append((int(m["no"]), name, report.bytes))
    for (_stem, count), shards in by_series.items():
        body = sorted(s for s in shards if s[0] != count)  # the last shard is legitimately smaller
        if len(body) < 2:
            continue
        sizes = sorted(s[2] for s in body)
        median = sizes[len(sizes) // 2]
        for _no, name, size in body:
            if size < SMALL_SHARD * median:
                st.findings.append(
                    stcheck.corrupt(
                        st.root / name,
                        "preflight.model.shard-small",
                        f"{name} is {size} bytes, {100 * size / median:.0f}% of its siblings' median {median}: "
                        "probably an interrupted download.",
                        [f"{name}: {size} bytes; sibling median {median} bytes"],
                        {"bytes": size, "median_bytes": median},
                    )
                )
                st.fail(name, "much smaller than its siblings")


def _check_index_agreement(st: ScanState, weight_map: dict[str, str], index_name: str) -> None:
    expected: dict[str, set[str]] = {}
    for tensor, shard in weight_map.items():
        expected.setdefault(shard, set()).add(tensor)
    for shard, names in expected.items():
        header = st.headers.get(shard)
        if header is None:
            continue
        have = set(header.tensors)
        absent = sorted(names - have)
        extra = sorted(have - names - {t for s, ns in expected.items() if s != shard for t in ns})
        if absent:
            st.findings.append(
                finding(
                    "preflight.model.index-disagrees",
                    f"{index_name} puts {len(absent)} tensor(s) in {shard} that its header lacks "
                    f"(first: {absent[0]}): the shard is from another revision.",
                    facts={"shard": shard, "absent": absent[:20]},
                    evidence=[ev(st.root / shard, f"{absent[0]} named by the index, not in the header")],
                    fix=[fix(f"download {shard} from the same revision as the index", act(Redownload, what=shard))],
                )
            )
            st.fail(shard, "tensors missing from header")
        if extra:
            st.findings.append(
                finding(
                    "preflight.model.index-disagrees",
                    f"{shard} holds {len(extra)} tensor(s) the index does not name (first: {extra[0]}).",
                    variant="extra",
                    facts={"shard": shard, "extra": extra[:20]},
                    evidence=[ev(st.root / shard, f"{extra[0]} in the header, not in {index_name}")],
                    fix=[fix(f"download {shard} and {index_name} from the same revision", act(Redownload, what=shard))],
                )
            )


def _check_hashes(
    st: ScanState,
    sums: dict[str, str] | None,
    hash_all: bool,
    candidates: list[Path],
    progress: ProgressStart | None,
    list_name: str,
) -> None:
    targets: dict[str, Path] = {}
    if sums is not None:
        for name in sums:
            targets[name] = st.root / name if st.root.is_dir() else st.root.parent / name
    if hash_all:
        for p in candidates:
            targets.setdefault(p.name, p)
    for name, p in targets.items():
        report = st.files.get(name) or st.files.get(Path(name).name)
        if not p.exists():
            if sums is not None and name in sums and not (report and report.detail == "missing"):
                st.findings.append(
                    _missing_finding(st.root if st.root.is_dir() else st.root.parent, [name], f"listed in {list_name}")
                )
            continue
        digest = sha256_file(p, progress)
        if report is None:
            report = st.file(name, "other", p.stat().st_size)
        report.sha256 = digest
        want = (sums or {}).get(name) or blob_digest(p)
        if want and want != digest:
            gguf = report.kind == "gguf"
            st.findings.append(
                finding(
                    "preflight.model.sha256-mismatch",
                    f"{name}: sha256 {digest[:16]}... does not match the expected {want[:16]}....",
                    variant="gguf" if gguf else None,
                    facts={"file": name, "sha256": digest, "expected": want},
                    evidence=[ev(p, f"sha256 {digest}, expected {want}")],
                    fix=[fix(f"delete and download {name} again", act(Redownload, what=name))],
                )
            )
            report.ok = False
            report.detail = report.detail or "sha256 mismatch"
    if sums is not None:
        unlisted = [p.name for p in candidates if p.name not in sums]
        if unlisted:
            st.notes.append(f"not in {list_name}, so not verified: {', '.join(unlisted[:10])}")


def _classify(path: Path) -> str:
    name = path.name
    if name.endswith(".safetensors"):
        return "safetensors"
    if name.endswith(".gguf") or blob_digest(path):
        return "gguf"
    if name.endswith((".bin", ".pt", ".pth")) and not name.startswith("training_args"):
        return "pytorch"
    return "other"


def _sniff_kind(path: Path) -> str:
    kind = _classify(path)
    if kind != "gguf" or path.name.endswith(".gguf"):
        return kind
    try:
        with path.open("rb") as fh:
            return "gguf" if fh.read(4) == ggufcheck.MAGIC else "other"
    except OSError:
        return "other"


def _read_sums(sha256_list: str | Path | None) -> tuple[dict[str, str] | None, str]:
    """The checksum list (name -> sha256) and its file name; ModelPathError when it cannot be read."""
    if sha256_list is None:
        return None, ""
    list_path = Path(sha256_list)
    try:
        return parse_sums(list_path.read_text(encoding="utf-8")), list_path.name
    except (OSError, UnicodeDecodeError, ChecksumFileError) as exc:
        raise ModelPathError(f"{list_path}: {exc}") from None


def _check_indexes(st: ScanState) -> tuple[dict[str, str], str]:
    """The safetensors index's weight map and name (empty without one); PyTorch indexes are checked too."""
    weight_map: dict[str, str] = {}
    index_name = ""
    indexes = sorted(st.root.glob("*.safetensors.index.json"), key=lambda p: p.name != "model.safetensors.index.json")
    if indexes:
        index_name = indexes[0].name
        weight_map = _check_index(st, indexes[0])
    for pt_index in st.root.glob("*.bin.index.json"):
        _check_index(st, pt_index)
    return weight_map, index_name


def _check_weight_files(st: ScanState, st_files: list[Path], gguf_files: list[Path], pt_files: list[Path]) -> None:
    """Each weights file by its format's reader: its report line, its findings, its header kept for later."""
    for kind, files, check in (
        ("safetensors", st_files, stcheck.check_safetensors),
        ("gguf", gguf_files, ggufcheck.check_gguf),
    ):
        for p in files:
            findings, header = check(p)
            st.file(
                p.name,
                kind,
                p.stat().st_size,
                ok=not any(f.severity.rank <= 1 for f in findings),
                tensors=len(header.tensors) if header else None,
                detail=findings[0].title if findings else "",
            )
            st.findings += findings
            if header is None:
                continue
            if isinstance(header, ggufcheck.GgufHeader):
                st.findings += ggufcheck.info_findings(p, header)
            else:
                st.headers[p.name] = header
    for p in pt_files:
        st.file(p.name, "pytorch", p.stat().st_size, detail="PyTorch pickle: presence checked only")


def _stray_shards(st: ScanState, st_files: list[Path], weight_map: dict[str, str], index_name: str) -> None:
    stray = [p.name for p in st_files if p.name not in set(weight_map.values())]
    if stray:
        st.findings.append(
            finding(
                "preflight.model.stray-shard",
                f"{', '.join(stray[:5])} are not named by {index_name} (left from another revision?); "
                "vLLM loads only the indexed ones.",
                evidence=[ev(st.root / n, f"{n} not in {index_name}") for n in stray],
            )
        )


def _check_directory(
    st: ScanState, entries: list[Path], files: dict[str, list[Path]], weight_map: dict[str, str], index_name: str
) -> None:
    """What only a directory can say: the shard series, sizes and index agree; config and tokenizer fit."""
    named = [p.name for p in entries]
    if not weight_map:
        _check_series(st, named)
    _check_siblings(st, named)
    if weight_map:
        _check_index_agreement(st, weight_map, index_name)
        _stray_shards(st, files["safetensors"], weight_map, index_name)
    shapes = {n: t.shape for h in st.headers.values() for n, t in h.tensors.items()}
    if weight_map:
        shapes = {**{n: [] for n in weight_map}, **shapes}
    has_weights = bool(files["safetensors"] or files["pytorch"] or weight_map)
    cfg = check_config(st, has_weights, shapes) if (has_weights or (st.root / "config.json").exists()) else None
    if has_weights:
        check_tokenizer(st, cfg)
    if files["gguf"] and not has_weights:
        st.findings.append(
            finding(
                "preflight.model.gguf-only",
                "only GGUF weights: llama.cpp and Ollama load them; vLLM needs the .gguf path and "
                "--tokenizer naming the original repository.",
                evidence=[ev(files["gguf"][0], "GGUF file, no safetensors")],
            )
        )


def inspect_model(
    path: str | Path,
    *,
    sha256_list: str | Path | None = None,
    hash_files: bool = False,
    progress: ProgressStart | None = None,
    classes: dict[str, ClassSpec] | None = None,
) -> CheckModelResult:
    """Check a model directory or a single weights file. Raises :class:`ModelPathError` on bad input."""
    root = Path(path).expanduser()
    if not root.exists() and not root.is_symlink():
        raise ModelPathError(f"{root}: no such file or directory")
    sums, list_name = _read_sums(sha256_list)

    st = ScanState(root)
    if root.is_dir():
        entries = sorted(p for p in root.iterdir() if p.is_file() or p.is_symlink())
    else:
        entries = [root]
    kinds = {p: _sniff_kind(p) for p in entries}
    files = {k: [p for p in entries if kinds[p] == k and p.exists()] for k in ("safetensors", "gguf", "pytorch")}

    weight_map, index_name = _check_indexes(st) if root.is_dir() else ({}, "")
    _check_weight_files(st, files["safetensors"], files["gguf"], files["pytorch"])
    if root.is_dir():
        _check_directory(st, entries, files, weight_map, index_name)

    fmt_kinds = {k for p, k in kinds.items() if k in ("safetensors", "gguf", "pytorch")}
    if weight_map and not fmt_kinds:
        fmt_kinds = {"safetensors"}
    if not fmt_kinds and not any(f.class_id == "model.shard_missing" for f in st.findings):
        st.findings.append(
            finding(
                "preflight.model.no-weights",
                f"{root} holds no .safetensors, .gguf or PyTorch weight files.",
                evidence=[ev(root, "no weight files")],
                fix=[fix("download the model (all files), then check again", act(Redownload, what=str(root)))],
            )
        )

    if sums is not None or hash_files:
        weights = files["safetensors"] + files["gguf"] + files["pytorch"]
        _check_hashes(st, sums, hash_files, weights, progress, list_name)

    diagnoses, observations = to_report(st.findings, classes)
    return CheckModelResult(
        path=str(root),
        format="mixed" if len(fmt_kinds) > 1 else (next(iter(fmt_kinds)) if fmt_kinds else "none"),
        files=sorted(st.files.values(), key=lambda f: f.name),
        diagnoses=diagnoses,
        observations=observations,
        notes=st.notes,
    )


def check_model(path: str | Path, **kwargs: Any) -> list[Diagnosis]:
    """The diagnoses for a model path (the runner's entry point); see :func:`inspect_model`."""
    return inspect_model(path, **kwargs).diagnoses


@dataclass(frozen=True)
class CheckModelOptions:
    """``qwen-triage check-model``'s options, as the command line gives them."""

    path: str
    sha256_list: str | None = None
    """a ``sha256sum``-format file to verify the weights against"""
    hash_files: bool = False
    """hash every weight file (the sums are in the result's files)"""


def run(options: CheckModelOptions, progress: ProgressStart | None = None) -> CheckModelResult:
    """``qwen-triage check-model``: :func:`inspect_model`; bad input raises :class:`~qwen_triage.exits.Failure`.
    ``progress`` is the command line's bar for big files."""
    from qwen_triage.exits import Failure

    try:
        return inspect_model(options.path, sha256_list=options.sha256_list, hash_files=options.hash_files,
                             progress=progress)
    except ModelPathError as exc:
        raise Failure(str(exc)) from None
