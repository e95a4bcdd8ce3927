"""The message catalogue: what each program a user runs can print, read from its released sources.

Generated data (``scripts/catalogue/build.py``), shipped with the rules: one gzip'd JSON-lines file per
program under ``rules/catalogue/`` and a ``manifest.yaml`` saying which releases each was read from. It
answers "which program printed this line, in which file and function, in which releases" for a line no
rule explains, so nothing here is read at import or on a scan that explains everything: the loader opens
the manifest on the first question and a program's file only when its entries are asked for.

The files ship inside the package but are still treated as input: the manifest goes through the strict
YAML loader, a program's key names its file (so it cannot point outside the directory), a file is read up
to a size cap and a line up to a length cap, and an entry that does not validate is skipped, counted.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from functools import cached_property
from pathlib import Path
from typing import Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from qwen_triage.atomicfile import write_atomic
from qwen_triage.rulepack.errors import RuleFileError
from qwen_triage.rulepack.paths import CATALOGUE_DIR

MANIFEST = "manifest.yaml"
PROGRAM_KEY = r"^[a-z][a-z0-9_]{1,40}$"
MAX_FILE_BYTES = 64 * 2**20  # uncompressed, per program (the largest real one is a few MB)
MAX_LINE_BYTES = 64 * 2**10
PLACEHOLDERS = ("int", "float", "hex", "path", "str", "any")  # the typed fields of ``TemplateEntry.template``


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class TemplateEntry(_Frozen):
    """One message a program's released source can print, with where it sits and what it matches."""

    program: str  # the manifest's key: "vllm", "llamacpp", "nccl", "torch" ...
    releases: list[str]  # the pinned releases whose source holds this template, oldest first
    file: str  # path inside the release ("vllm/config/parallel.py")
    function: str | None = None  # enclosing function (Class.method when the extractor knows it)
    kind: Literal["raise", "log", "printf"]
    level: str | None = None  # log / printf: "error" | "warning" | "info" | "debug" | "fatal"
    exception: str | None = None  # raise: the exception class as written (ValueError, RuntimeError ...)
    template: str  # the message, placeholders typed: {int} {float} {hex} {path} {str} {any}
    regex: str  # a `regex`-module pattern for the message's rendered forms (search, not match)
    words: list[str]  # its literal words of three letters or more, for a lookup index
    example: str | None = None  # a line as printed (exception or logger prefix and all), values by type
    class_: str | None = Field(None, alias="class")  # a pack class, when a rule matches a rendered example
    class_from: Literal["rule"] | None = None

    def dump(self) -> dict[str, object]:
        """The JSON object of one line of a catalogue file (the class under its file name ``class``)."""
        return self.model_dump(by_alias=True, exclude_none=True)


class ReleaseInfo(_Frozen):
    """One pinned release a program's templates were read from."""

    version: str
    source: str  # "pypi:vllm==0.8.0 (sdist)", "github:NVIDIA/nccl@<commit>"
    sha256: str | None = None  # of the downloaded archive (package index)
    commit: str | None = None  # of the repository read (public repositories)
    templates: int = 0  # templates found in this release


class ProgramInfo(_Frozen):
    """One program of the catalogue: its name as users know it and the releases read."""

    display: str  # "vLLM", "llama.cpp (llama-cpp-python)"
    releases: list[ReleaseInfo]  # oldest first
    templates: int = 0  # distinct templates over all its releases (lines of its file)
    parts: str | None = None  # what of the program was read, when not all of it ("c10d, elastic, run")


class Manifest(_Frozen):
    """``rules/catalogue/manifest.yaml``: written by the build script, never by hand."""

    builder: str  # the build script and its version
    built: str  # ISO date of the build
    build_seconds: float | None = None
    programs: dict[str, ProgramInfo]


class Catalogue:
    """The catalogue of one rules directory, read lazily: nothing is opened before the first question."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.skipped = 0  # entries that did not validate or were too long, over all reads

    @classmethod
    def load(cls, rules_dir: Path) -> "Catalogue":
        """The catalogue under ``rules_dir/catalogue``; an absent one is an empty catalogue."""
        return cls(Path(rules_dir) / CATALOGUE_DIR)

    @cached_property
    def manifest(self) -> Manifest:
        path = self.directory / MANIFEST
        if not path.is_file():
            return Manifest(builder="", built="", programs={})
        from qwen_triage.rulepack.yamlload import load_yaml

        loaded = load_yaml(path)
        manifest: Manifest = loaded.validate(Manifest)
        for key in manifest.programs:
            if not re.match(PROGRAM_KEY, key):
                raise RuleFileError(path, 1, 1, f"program key {key!r} is not a plain name")
        return manifest

    def programs(self) -> dict[str, ProgramInfo]:
        """Every program of the manifest, by key, in the manifest's order."""
        return dict(self.manifest.programs)

    def path_of(self, program: str) -> Path:
        return self.directory / f"{program}.jsonl.gz"

    def entries(self, program: str | None = None) -> Iterator[TemplateEntry]:
        """The entries of one program, or of all in manifest order; read as they are asked for."""
        keys = [program] if program is not None else list(self.manifest.programs)
        for key in keys:
            if key not in self.manifest.programs:
                raise KeyError(f"no program {key!r} in the catalogue")
            yield from self._read(self.path_of(key))

    def _read(self, path: Path) -> Iterator[TemplateEntry]:
        if not path.is_file():
            return
        read = 0
        with gzip.open(path, "rb") as f:
            for raw in f:
                read += len(raw)
                if read > MAX_FILE_BYTES:
                    self.skipped += 1
                    return
                if not raw.strip():
                    continue
                if len(raw) > MAX_LINE_BYTES:
                    self.skipped += 1
                    continue
                try:
                    yield TemplateEntry.model_validate(json.loads(raw))
                except (ValueError, ValidationError):
                    self.skipped += 1


def write_program(path: Path, entries: list[TemplateEntry]) -> None:
    """One program's file, reproducibly: sorted entries, fixed gzip header (no name, no time)."""
    lines = sorted(json.dumps(e.dump(), ensure_ascii=False, sort_keys=True) for e in entries)
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as f:
        f.write(data)
    write_atomic(path, raw.getvalue(), mode=0o644)  # a data file of the package: everyone reads it
