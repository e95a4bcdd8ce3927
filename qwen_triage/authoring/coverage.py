"""`rules coverage`: which of a program's own messages the pack knows.

Matching what reports printed does not reach what a program can print. This
reads the program instead: every message its source can raise or log
(``msgs_python`` for Python, ``msgs_clike`` for C, C++, CUDA and Go), renders an
example line of each (``msg_template``), and runs that line through the compiled
pack exactly as ``scan`` would (the same matcher and correlator, one example at a
time so that examples cannot combine into a finding none of them makes alone).

Bounded on purpose, since a tree is input from outside: files are read up to
``MAX_FILE_BYTES``, binary files and symbolic links are skipped, the walk stops at
``MAX_FILES`` files and ``MAX_TEMPLATES`` templates (a note says so), and the
scanned code is parsed, never imported or run.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from qwen_triage.authoring.msg_template import Template, render
from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.correlate import Correlator
from qwen_triage.engine.matcher import Matcher
from qwen_triage.engine.sources import Block

MAX_FILE_BYTES = 2 * 2**20
MAX_FILES = 100_000
MAX_TEMPLATES = 200_000
MAX_SKIPPED_LISTED = 100
MIN_LETTERS = 4  # a template with fewer fixed letters ("%s: %s") is no message to match
MAX_EXAMPLE = 4096

PY_EXT = frozenset({".py"})
C_EXT = frozenset({".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".cu", ".cuh", ".m", ".mm"})
GO_EXT = frozenset({".go"})
# Not what the program prints to its users: its tests, and build or VCS directories.
SKIP_DIRS = frozenset({".git", "__pycache__", "node_modules", "test", "tests", "testing", "testdata", ".venv",
                       "build", "dist", "docs", "doc", "examples", "benchmarks"})
_TEST_FILE = re.compile(r"^(?:test_.*\.py|.*_test\.py|.*_test\.go|test-.*|conftest\.py)$")
# Directory names that only hold code, skipped when naming a file's top-level module.
CONTAINERS = frozenset({"src", "lib", "pkg", "internal", "source", "tools", "cmd", "csrc"})

# Start-up paths first: the first group whose words occur in a module's path gives its place. Loading,
# configuration and distributed initialisation come before engine start, and request-time paths last;
# a module none names sits between engine start and request time.
STAGES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("config", re.compile(r"config|arg|cli|env|launch|main|setup|bootstrap|init|option|param", re.I)),
    ("distributed", re.compile(r"distributed|parallel|rendezvous|elastic|c10d|nccl|transport|\bnet|topo|"
                               r"graph|proxy|socket|\bib\b|plugin|collective|\bray\b|\bcomm\b|communicat", re.I)),
    ("loading", re.compile(r"load|weight|download|hub|tokeniz|gguf|safetensor|model|checkpoint|convert|"
                           r"quant|vocab|file|manifest|registry", re.I)),
    ("engine start", re.compile(r"engine|executor|worker|platform|device|cuda|gpu|memory|kv_?cache|compil|"
                                r"backend|discover|runner|ggml|alloc|kernel", re.I)),
    ("other", re.compile(r"(?!)")),
    ("request time", re.compile(r"serve|server|entrypoint|openai|api|route|sampl|schedul|request|chat|"
                                r"complet|handler|generat|http|middleware|stream", re.I)),
)
_OTHER = next(i for i, (name, _) in enumerate(STAGES) if name == "other")


@dataclass(slots=True)
class Result:
    template: Template
    module: str
    class_: str | None
    rule: str | None
    benign: bool


@dataclass
class Coverage:
    results: list[Result] = field(default_factory=list)
    files: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Source:
    path: Path
    rel: str  # relative to the parent of the PATH given, so it starts with the tree's own name
    lang: str


def stage_of(module: str) -> tuple[int, str]:
    """The place of a module in the start-up ordering, and its stage's name (the tree's own name aside)."""
    below = module.split("/", 1)[-1]
    for i, (name, pattern) in enumerate(STAGES):
        if pattern.search(below):
            return i, name
    return _OTHER, "other"


def module_of(rel: str) -> str:
    """``vllm/engine/arg_utils.py`` -> ``vllm/engine``; ``nccl/src/transport/net.cc`` -> ``nccl/transport``."""
    parts = rel.split("/")
    root, below = parts[0], parts[1:]
    while len(below) > 1 and below[0] in CONTAINERS:
        below = below[1:]
    if not below:
        return root
    head = below[0] if len(below) > 1 else below[0].rsplit(".", 1)[0]
    return f"{root}/{head}"


def _lang(path: Path) -> str | None:
    ext = path.suffix.lower()
    return "python" if ext in PY_EXT else "c" if ext in C_EXT else "go" if ext in GO_EXT else None


def _walk(roots: Iterable[Path], cov: Coverage) -> Iterator[_Source]:
    count = 0
    for root in roots:
        base = root.parent
        if root.is_file() and not root.is_symlink():
            lang = _lang(root)
            if lang:
                yield _Source(root, root.name, lang)
            continue
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
            for name in sorted(filenames):
                path = Path(dirpath) / name
                lang = _lang(path)
                if lang is None or _TEST_FILE.match(name) or path.is_symlink():
                    continue
                count += 1
                if count > MAX_FILES:
                    cov.notes.append(f"stopped after {MAX_FILES} files")
                    return
                yield _Source(path, path.relative_to(base).as_posix(), lang)


def _read(src: _Source, cov: Coverage) -> str | None:
    try:
        size = src.path.stat().st_size
        if size > MAX_FILE_BYTES:
            cov.skipped.append((src.rel, f"larger than {MAX_FILE_BYTES} bytes"))
            return None
        data = src.path.read_bytes()[:MAX_FILE_BYTES]
    except OSError as exc:
        cov.skipped.append((src.rel, f"unreadable: {exc.strerror or exc}"))
        return None
    if b"\0" in data[:8192]:
        cov.skipped.append((src.rel, "binary"))
        return None
    return data.decode("utf-8", "replace")


def extract(roots: Iterable[Path], cov: Coverage) -> Iterator[Template]:
    """Every message template under ``roots``; files that cannot be read or parsed are noted and skipped."""
    from qwen_triage.authoring.msgs_clike import clike_templates
    from qwen_triage.authoring.msgs_python import python_templates

    total = 0
    for src in _walk(roots, cov):
        text = _read(src, cov)
        if text is None:
            continue
        cov.files += 1
        try:
            if src.lang == "python":
                module = src.rel.rsplit(".", 1)[0].replace("/", ".").removesuffix(".__init__")
                found = list(python_templates(text.encode("utf-8"), src.rel, module))
            else:
                found = list(clike_templates(text, src.rel, go=src.lang == "go"))
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            cov.skipped.append((src.rel, f"not parsed: {type(exc).__name__}"))
            continue
        for t in found:
            if t.literal_chars() < MIN_LETTERS:
                continue
            total += 1
            if total > MAX_TEMPLATES:
                cov.notes.append(f"stopped after {MAX_TEMPLATES} templates")
                return
            yield t


class Classifier:
    """One example at a time through the compiled pack: the matcher and correlator of `scan`."""

    def __init__(self, compiled: CompiledPack):
        self.compiled = compiled
        self.benign = compiled.benign_patterns()
        self.seen: dict[str, tuple[str | None, str | None, bool]] = {}

    def classify(self, example: str) -> tuple[str | None, str | None, bool]:
        """(class, rule, benign) of one example: the root cause's, else the first observation's."""
        if example in self.seen:
            return self.seen[example]
        matcher = Matcher(self.compiled)
        data = "\n".join(example.splitlines() or [""]).encode("utf-8", "replace") + b"\n"
        findings = list(matcher.feed_block(Block(data=data, first_line=1), "<example>")) + list(matcher.finish())
        correlator = Correlator(self.compiled.pack.classes).extend(findings)
        diagnoses = correlator.diagnoses()
        got: tuple[str | None, str | None, bool]
        if diagnoses:
            got = (diagnoses[0].class_, diagnoses[0].rule, False)
        elif observations := correlator.observations():
            got = (observations[0].class_, observations[0].rule, False)
        elif relays := correlator.relays():  # a relay line is known: it passes on a failure printed before it
            class_, rule, _ = relays[0].speaker()
            got = (class_, rule, False)
        else:
            got = (None, None, any(p.search(line) for p in self.benign for line in example.splitlines()))
        if len(self.seen) < 100_000:
            self.seen[example] = got
        return got


def measure(roots: list[Path], compiled: CompiledPack) -> Coverage:
    """Extract, render and classify every template under ``roots``."""
    cov = Coverage()
    classifier = Classifier(compiled)
    for t in extract(roots, cov):
        t.example = render(t)[:MAX_EXAMPLE]
        class_, rule, benign = classifier.classify(t.example)
        cov.results.append(Result(t, module_of(t.file), class_, rule, benign))
    return cov


def summary(cov: Coverage) -> dict[str, object]:
    """Totals, the covered share, and the same per top-level module (start-up order) and per kind."""
    def share(covered: int, total: int) -> float:
        return round(covered / total, 4) if total else 0.0

    modules: dict[str, list[int]] = {}
    kinds: dict[str, list[int]] = {}
    for r in cov.results:
        for table, key in ((modules, r.module), (kinds, r.template.kind)):
            row = table.setdefault(key, [0, 0, 0])
            row[0] += 1
            row[1] += r.rule is not None
            row[2] += r.benign
    covered = sum(r.rule is not None for r in cov.results)
    benign = sum(r.benign for r in cov.results)
    return {
        "files": cov.files,
        "templates": len(cov.results),
        "covered": covered,
        "benign": benign,
        "share": share(covered, len(cov.results)),
        "by_module": {
            m: {"templates": t, "covered": c, "benign": b, "share": share(c, t), "stage": stage_of(m)[1]}
            for m, (t, c, b) in sorted(modules.items(), key=lambda kv: (stage_of(kv[0])[0], kv[0]))
        },
        "by_kind": {k: {"templates": t, "covered": c, "benign": b, "share": share(c, t)}
                    for k, (t, c, b) in sorted(kinds.items())},
        "skipped": [{"file": f, "why": w} for f, w in cov.skipped[:MAX_SKIPPED_LISTED]],
        "skipped_count": len(cov.skipped),
        "notes": cov.notes,
    }


@dataclass(frozen=True)
class CoverageOptions:
    """``qwen-triage rules coverage``'s options, as the command line gives them."""

    paths: tuple[str, ...]
    """source trees or installed packages of the program whose messages are measured"""
    rule_dirs: tuple[str, ...] = ()
    engine: str = "auto"
    pack_dir: str | None = None
    """measure the rule files of this directory instead of the bundled ones (another version of the pack)"""


def run(options: CoverageOptions) -> Coverage:
    """``qwen-triage rules coverage``: which of a program's own messages the pack (or ``pack_dir``'s) knows.
    A pack that cannot be loaded raises :class:`~qwen_triage.exits.Failure`."""
    return measure([Path(p) for p in options.paths], compiled_for(options.rule_dirs, options.engine, options.pack_dir))


def compiled_for(rule_dirs: tuple[str, ...], engine: str, pack_dir: str | None) -> CompiledPack:
    """The pack a measure runs: the bundled one (and ``rule_dirs``), or ``pack_dir``'s rule files instead."""
    from qwen_triage.engine.scanner import cache_dir, compile_pack, load_compiled
    from qwen_triage.exits import Failure
    from qwen_triage.rulepack.errors import RuleFileError
    from qwen_triage.rulepack.pack import load_pack
    from qwen_triage.rulepack.paths import extra_rule_dirs

    if pack_dir is None:
        return load_compiled(rule_dirs, engine)
    try:
        pack = load_pack([Path(pack_dir), *extra_rule_dirs(list(rule_dirs))], bundled=False, cache_dir=cache_dir())
        return compile_pack(engine=engine, pack=pack)
    except (RuleFileError, FileNotFoundError, ImportError) as exc:
        raise Failure(str(exc)) from None
