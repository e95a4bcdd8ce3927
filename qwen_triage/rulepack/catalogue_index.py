"""Which catalogue template a line no rule explains was printed from: an index on the templates' literal words.

The scan path never pays for it: :class:`CatalogueIndex` reads nothing when it is made, and the scanner asks
it only about the lines it already lists as unexplained (engine.locate), so a scan of a healthy log opens no
catalogue file. The first lookup builds the index — each template keyed by its rarest literal word, beside
the templates' JSON lines as the catalogue holds them — and keeps it in the private cache, keyed by the
catalogue files' contents, so later runs read one file and parse only the templates a line's words point at.
A lookup then costs a few dictionary probes per word of the line, a subset test per candidate, and a `regex`
search (under a timeout, as the engine confirms rules) per template whose words are all there; only the
templates that answer are validated into :class:`~qwen_triage.rulepack.catalogue.TemplateEntry` models.

A template locates a line only when it says enough of it (a long sentence, or most of the line's own words,
or a template of the program or file the line's record names): `unexpected error` is in many programs' mouths.
Several templates may match one line (a short ``{str} must be divisible by {str}`` and the long sentence that
contains it; one message in two programs): the most specific answers: the one from the file the line's own
traceback or logger names, then from the program or library that printed it, then the one with the exception
the line names, then the one with the most literal text.
"""

from __future__ import annotations

import builtins
import gzip
import json
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qwen_triage.rulepack.catalogue import MANIFEST, MAX_FILE_BYTES, MAX_LINE_BYTES
from qwen_triage.rulepack.paths import CATALOGUE_DIR

if TYPE_CHECKING:
    from qwen_triage.rulepack.catalogue import Catalogue, TemplateEntry
    from qwen_triage.rulepack.codes import PrintedCode

INT_FIELD = r"(?:-?\d+)"  # authoring.msg_template.TYPE_REGEX["int"], as typed_regex wraps it
NUMBER_FIELD = r"(?:-?\d+(?:\.\d+)?)"
INDEX_FORMAT = b"6"  # of the built index kept in the cache; 2: the programs' display names in the head, 3: their
# files, 4-6: the exception classes one program owns (by the name a line gives them)
MAX_MANIFEST_BYTES = 2**20  # also a code table's
CODES_FORMAT = b"1"  # of the code texts kept in the cache (code_of)
MAX_LINE = 2000  # characters of a line that are looked up (a template's regex runs on them)
MAX_FILE_PARTS = 8  # path components of a traceback frame's file compared with the catalogue's files
TIMEOUT = 0.05  # seconds per regex search: a template's pattern is data, and the line comes from outside
MAX_CANDIDATES = 400  # templates confirmed per line at most (the most specific first)
LINE_BUDGET = 0.25  # seconds of regex confirmation per line: a hostile line costs at most this
MIN_LITERAL = 12  # letters of literal words a template must share with the line to locate it
MIN_WORDS = 2
# A short template locates a line only where it is most of the line: `unexpected error` or `CUDA runtime error:
# {any}` are in many programs' mouths, and a line that only contains them was as likely printed by another one.
MIN_SHARE = 0.5  # of the line's letters (its values masked, the exception's name left out) ...
SURE_LITERAL, SURE_WORDS = 30, 4  # ... unless the template's own text is a sentence this long
# A line that names the program's own exception class (``httpx2.HTTPStatusError: Client error '403 Forbidden' for
# url '…'``), raised by that program, needs less of the template's own text: `for url` is enough beside both
NAMED_LITERAL = 6

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_']*[A-Za-z0-9]")  # authoring.msg_template.literal_words' words
_PART = re.compile(r"[A-Za-z]{3,}")  # the letters of a word fused to a number (`rank3`) or a name (`max_len`)
_VALUES = re.compile(r"""(?:[A-Za-z]:)?(?:/|\\)[^\s'",:)\]]+|'[^'\s]{1,200}'|"[^"\s]{1,200}"|`[^`\s]{1,200}`"""
                     r"|\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{16,}\b")  # what unrecognised.template_of masks, roughly
_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w{0,60}\.){0,8}(?P<exc>[A-Z]\w{0,80}):")
# Python's own exception classes: whoever raises one, its name says nothing of the program (a class one program of
# the catalogue owns, `GatedRepoError`, names that program where the line does not name its module)
_BUILTIN_EXCEPTIONS = frozenset(n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException))


@dataclass(frozen=True)
class Hints:
    """What the line's record says about where it came from; each only orders the templates that match."""

    file: str | None = None  # the innermost traceback frame's file (LineRecord.raised_in)
    source: str | None = None  # the logger's `file.py:123` (LineRecord.extra["source"])
    program: str | None = None  # the program the line's wrapper names (ollama, nccl ...)
    library: str | None = None  # the library of the frame that raised (vllm, transformers ...)
    exception: str | None = None  # the exception class the line names
    function: str | None = None  # the function the line's own prefix names (the kernel's `[drm:nv_drm_load [nvidia_drm]]`)
    module: str | None = None  # the kernel module it names (`nvidia_drm`: the folder `nvidia-drm/` of a program's source)


@dataclass
class _Template:
    """One catalogue line as read: the raw object (validated only if it answers) and what the index needs."""

    raw: dict[str, Any]
    words: tuple[str, ...]  # the literal words its regex holds (a message's first line only)
    literal: int  # letters of those words: how specific it is
    compiled: Any = None  # its regex, compiled on first use; False when it does not compile

    def pattern(self) -> Any:
        if self.compiled is None:
            import regex

            try:
                self.compiled = compile_template(str(self.raw["regex"]))
            except (regex.error, TypeError, RecursionError):
                self.compiled = False
        return self.compiled


def compile_template(text: str) -> Any:
    """A template's regex as lookups run it: an integer placeholder takes any number (`requiring {int} GPUs`
    prints `4.0` when the value was a float: the extractor types by name; Python prints whatever it got)."""
    import regex

    return regex.compile(text.replace(INT_FIELD, NUMBER_FIELD), regex.VERSION0)


class CatalogueIndex:
    """Lookups in the catalogue of one rules directory; nothing is read before the first one.

    ``cache_dir``: where the built index is kept (rulepack.cache: private, keyed by the catalogue files'
    contents), so only the first lookup after an install or a rebuild of the catalogue parses every template;
    later ones read one file and parse only the templates a line's words point at.
    """

    def __init__(self, rules_dir: Path, cache_dir: Path | None = None):
        self.rules_dir = Path(rules_dir)
        self.cache_dir = cache_dir
        self._keys: dict[str, list[int]] | None = None  # rarest literal word -> template numbers
        self._spans: list[list[int]] = []  # template number -> [offset, length] of its JSON line in _data
        self._data = b""
        self._base = 0  # where the JSON lines start in _data
        self._display: dict[str, str] = {}  # program key -> its display name (the manifest's, kept in the index)
        self._file_programs: dict[str, list[Any]] = {}  # file in a release -> [program key, releases holding it, oldest first]
        self._raisers: dict[str, str] = {}  # an exception class one program owns (defines, or alone raises) -> it
        self._parsed: dict[int, _Template | None] = {}
        self._catalogue: Catalogue | None = None
        self.lookups = 0
        self.skipped = 0  # catalogue lines that could not be read (too long, not JSON, no words)
        self.cut_short = 0  # lookups that ran out of LINE_BUDGET
        self._codes: dict[str, list[Any]] | None = None  # a code table's printed text or name -> its PrintedCode

    # -- reading ----------------------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self._keys is not None

    def _files(self) -> list[Path]:
        directory = self.rules_dir / CATALOGUE_DIR
        return sorted(directory.glob("*.jsonl.gz")) if directory.is_dir() else []

    def _load(self) -> dict[str, list[int]]:
        if self._keys is not None:
            return self._keys
        from qwen_triage.rulepack.cache import Cache, digest

        raw: list[tuple[Path, bytes]] = []
        for path in self._files():
            try:
                raw.append((path, _read_bounded(path, MAX_FILE_BYTES)))
            except OSError:
                self.skipped += 1
        manifest = self.rules_dir / CATALOGUE_DIR / MANIFEST
        try:
            raw_manifest = _read_bounded(manifest, MAX_MANIFEST_BYTES) if manifest.is_file() else b""
        except OSError:
            raw_manifest = b""
        cache = Cache.open(self.cache_dir) if self.cache_dir is not None and raw else None
        name = "catalogue-" + digest(INDEX_FORMAT, raw_manifest,
                                     *(b for p, data in raw for b in (p.name.encode(), data)))[:40]
        blob = cache.read(name) if cache is not None else None
        if blob is None or not self._take(blob):
            blob = _build(raw, *self._programs())
            self._take(blob)
            if cache is not None and cache.write(name, blob):
                cache.prune("catalogue-", keep=name, keep_newest=1)  # ~30 MB each: one older catalogue at most
        assert self._keys is not None
        return self._keys

    def code_of(self, text: str) -> PrintedCode | None:
        """The code of a locating table (rulepack.codes.LOCATING_TABLES) whose exact text or name ``text`` is:
        a library's own words for a status (CUDA's `driver shutting down`), which place a line no template holds.
        The tables are read once and kept in the cache beside the index, keyed by their bytes."""
        if self._codes is None:
            self._codes = self._load_codes()
        found = self._codes.get(text.strip())
        if not isinstance(found, list) or len(found) != 6:
            return None
        from qwen_triage.rulepack.codes import PrintedCode

        table, title, version, number, name, said = found
        try:
            return PrintedCode(str(table), str(title), str(version), int(number), str(name), str(said))
        except (TypeError, ValueError):
            return None

    def _load_codes(self) -> dict[str, list[Any]]:
        from dataclasses import astuple

        from qwen_triage.rulepack.cache import Cache, digest
        from qwen_triage.rulepack.paths import code_files

        try:
            raw = {p: _read_bounded(p, MAX_MANIFEST_BYTES) for p in code_files(self.rules_dir)}
        except OSError:
            return {}
        if not raw:
            return {}
        cache = Cache.open(self.cache_dir) if self.cache_dir is not None else None
        name = "codes-" + digest(CODES_FORMAT, *(b for p, data in raw.items() for b in (p.name.encode(), data)))[:40]
        blob = cache.read(name) if cache is not None else None
        try:
            loaded = json.loads(blob) if blob is not None else None
        except ValueError:
            loaded = None
        if isinstance(loaded, dict):
            return loaded
        from qwen_triage.rulepack.codes import printed_codes
        from qwen_triage.rulepack.errors import RuleFileError

        try:
            texts = {p: data.decode("utf-8") for p, data in raw.items()}  # the bytes the key was made of
            built = {form: list(astuple(code)) for form, code in printed_codes(texts).items()}
        except (RuleFileError, UnicodeDecodeError):
            return {}
        if cache is not None and cache.write(name, json.dumps(built).encode()):
            cache.prune("codes-", keep=name, keep_newest=1)
        return built

    def _take(self, blob: bytes) -> bool:
        """Use a built index (its JSON head line, then the templates' JSON lines); False when it is not one."""
        head_end = blob.find(b"\n")
        try:
            head = json.loads(blob[:head_end]) if head_end > 0 else None
            if not isinstance(head, dict) or head.get("format") != INDEX_FORMAT.decode():
                return False
            keys, spans = head["keys"], head["spans"]
            if not isinstance(keys, dict) or not isinstance(spans, list):
                return False
        except (ValueError, KeyError):
            return False
        displays = head.get("display")
        files = head.get("files")
        raisers = head.get("raisers")
        self._raisers = {str(k): str(v) for k, v in raisers.items()} if isinstance(raisers, dict) else {}
        self._keys, self._spans, self._data, self._base = keys, spans, blob, head_end + 1
        self._file_programs = files if isinstance(files, dict) else {}
        self._display = {str(k): str(v) for k, v in displays.items()} if isinstance(displays, dict) else {}
        self.skipped += int(head.get("skipped", 0))
        return True

    def _template(self, i: int) -> _Template | None:
        if i not in self._parsed:
            try:
                start, length = self._spans[i]
                at = self._base + int(start)
                self._parsed[i] = _template(self._data[at: at + int(length)])
            except (IndexError, TypeError, ValueError):
                self._parsed[i] = None
        return self._parsed[i]

    def catalogue(self) -> Catalogue:
        from qwen_triage.rulepack.catalogue import Catalogue

        if self._catalogue is None:
            self._catalogue = Catalogue.load(self.rules_dir)
        return self._catalogue

    def _programs(self) -> tuple[dict[str, str], dict[str, list[str]]]:
        """Every program's name as users know it and its releases, oldest first, read from the manifest when the
        index is built (then kept in it, so a lookup parses no YAML)."""
        try:
            programs = self.catalogue().programs()
        except Exception:  # a manifest that does not load must not cost the report its other findings
            return {}, {}
        return ({key: info.display for key, info in programs.items()},
                {key: [r.version for r in info.releases] for key, info in programs.items()})

    def display(self, key: str) -> str | None:
        """A program's name as users know it (``vLLM``), from the built index; None when the manifest has none."""
        self._load()
        return self._display.get(key)

    # -- questions --------------------------------------------------------------------------------------

    def file_of(self, frame_file: str) -> tuple[str, str, list[str]] | None:
        """(program, file, releases) of the catalogue file a traceback frame's path ends with (two components at
        least: ``…/site-packages/llama_cpp/llama.py`` is llama-cpp-python's ``llama_cpp/llama.py``, a bare
        ``socket.py`` is nobody's); the longest such file; None when no program's release holds it."""
        self._load()
        parts = [p for p in frame_file.replace("\\", "/")[-MAX_LINE:].split("/") if p]
        for k in range(min(len(parts), MAX_FILE_PARTS), 1, -1):
            found = self._file_programs.get("/".join(parts[-k:]))
            if isinstance(found, list) and len(found) == 2 and isinstance(found[1], list):
                return str(found[0]), "/".join(parts[-k:]), [str(v) for v in found[1]]
        return None

    def lookup(self, line: str, hints: Hints | None = None) -> TemplateEntry | None:
        """The most specific catalogue template whose regex finds ``line``; None when none does."""
        found = self.matches(line, hints, first=True)
        return found[0] if found else None

    def matches(self, line: str, hints: Hints | None = None, first: bool = False) -> list[TemplateEntry]:
        """Every template that finds ``line``, most specific first (``first``: stop at the first that answers)."""
        from pydantic import ValidationError

        from qwen_triage.rulepack.catalogue import TemplateEntry

        self.lookups += 1
        keys = self._load()
        text = line.strip()[:MAX_LINE]
        if not keys or not text:
            return []
        hints = hints or Hints()
        if hints.exception is None or hints.library is None:
            exception = hints.exception or _exception_of(text)
            library = hints.library or _module_of(text) or (self._raisers.get(exception) if exception else None)
            hints = Hints(hints.file, hints.source, hints.program, library, exception, hints.function, hints.module)
        tokens = set(_WORD.findall(text)) | set(_PART.findall(text))
        letters = _letters(text)
        seen: set[int] = set()
        candidates = []
        for token in tokens:
            for i in keys.get(token, ()):
                if i in seen or not isinstance(i, int):
                    continue
                seen.add(i)
                t = self._template(i)
                if t is not None and all(w in text for w in t.words) and _specific(t, letters, _rank(t, hints)):
                    candidates.append(t)
        candidates.sort(key=lambda t: _rank(t, hints), reverse=True)
        out: list[TemplateEntry] = []
        deadline = time.perf_counter() + LINE_BUDGET
        for t in candidates[:MAX_CANDIDATES]:
            if time.perf_counter() > deadline:
                self.cut_short += 1
                break
            pattern = t.pattern()
            if pattern is False:
                continue
            try:
                if pattern.search(text, timeout=TIMEOUT) is None:
                    continue
            except TimeoutError:
                continue
            try:
                out.append(TemplateEntry.model_validate(t.raw))
            except ValidationError:
                continue
            if first:
                break
        return out


def _read_bounded(path: Path, limit: int) -> bytes:
    with open(path, "rb") as f:
        return f.read(limit + 1)


def _build(raw: list[tuple[Path, bytes]], displays: dict[str, str] | None = None,
           releases: dict[str, list[str]] | None = None) -> bytes:
    """The index of every program's templates: a JSON head line (each template's rarest literal word, where its
    line lies, each file's program and releases), then the templates' JSON lines as the catalogue holds them; a
    line that is no template is left out, counted."""
    lines: list[bytes] = []
    words: list[tuple[str, ...]] = []
    files: dict[str, tuple[str, set[str]]] = {}
    raised: dict[str, set[str]] = {}  # exception class -> the programs that raise it
    owners: dict[str, set[str]] = {}  # exception class -> the top packages of the modules it is raised as
    skipped = 0
    for _path, data in raw:
        try:
            text = gzip.decompress(data) if len(data) <= MAX_FILE_BYTES else b""
        except (OSError, EOFError, gzip.BadGzipFile):
            text = b""
        if not text:
            skipped += 1
            continue
        if len(text) > MAX_FILE_BYTES:
            text = text[:MAX_FILE_BYTES]
            skipped += 1
        for line in text.splitlines():
            if not line.strip():
                continue
            t = _template(line) if len(line) <= MAX_LINE_BYTES else None
            if t is None:
                skipped += 1
                continue
            lines.append(line)
            words.append(t.words)
            file, program, held = t.raw.get("file"), t.raw.get("program"), t.raw.get("releases")
            exception = t.raw.get("exception")
            if isinstance(exception, str) and isinstance(program, str):
                module, _, name = exception.rpartition(".")  # a line names it `GatedRepoError`, not by its module
                if name not in _BUILTIN_EXCEPTIONS:
                    raised.setdefault(name, set()).add(program)
                    if module:  # the module that defines it: `huggingface_hub.utils` (accelerate re-raises it)
                        owners.setdefault(name, set()).add(module.split(".", 1)[0])
            if isinstance(file, str) and isinstance(program, str) and isinstance(held, list):
                files.setdefault(file, (program, set()))[1].update(str(v) for v in held)
    freq: Counter[str] = Counter(w for ws in words for w in ws)
    keys: dict[str, list[int]] = {}
    spans: list[list[int]] = []
    at = 0
    for i, (line, ws) in enumerate(zip(lines, words, strict=True)):
        keys.setdefault(min(ws, key=lambda w: (freq[w], -len(w))), []).append(i)  # the rarest: fewest per probe
        spans.append([at, len(line)])
        at += len(line) + 1
    order = releases or {}
    by_file = {f: [p, sorted(held, key=lambda v: (order.get(p, []).index(v) if v in order.get(p, []) else 99, v))]
               for f, (p, held) in files.items()}
    programs = {p for progs in raised.values() for p in progs}
    raisers = {}
    for exc, progs in sorted(raised.items()):
        owner = owners.get(exc, set()) & programs
        if len(owner) == 1 or len(progs) == 1:  # the program whose module defines it, else its only raiser
            raisers[exc] = next(iter(owner)) if len(owner) == 1 else next(iter(progs))
    head = {"format": INDEX_FORMAT.decode(), "keys": keys, "spans": spans, "skipped": skipped,
            "display": displays or {}, "files": by_file, "raisers": raisers}
    return json.dumps(head, separators=(",", ":")).encode() + b"\n" + b"\n".join(lines) + b"\n"


def _template(raw: bytes) -> _Template | None:
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("regex"), str) or not isinstance(data.get("words"), list):
        return None
    pattern = data["regex"]
    words = tuple(w for w in data["words"] if isinstance(w, str) and w and w in pattern)
    if not words:
        return None
    return _Template(data, words, sum(sum(c.isalpha() for c in w) for w in words))


def _letters(text: str) -> int:
    """Letters of a line's own words: its values (paths, quoted names, addresses) and its exception's name left out."""
    m = _EXCEPTION.match(text)
    body = text[m.end():] if m else text
    return sum(c.isalpha() for c in _VALUES.sub(" ", body))


def _specific(t: _Template, letters: int, rank: tuple[int, ...]) -> bool:
    """Whether a template says enough of the line to locate it: a long sentence (SURE_LITERAL), most of the line
    (MIN_SHARE), or a template of the file, program or library the line's own record names (``rank``'s first
    three: the record vouches for where it came from); a shorter one (NAMED_LITERAL) only where the line names its
    file, or both the program and the template's exception."""
    if len(t.words) < MIN_WORDS:
        return False
    if t.literal < MIN_LITERAL:
        # the file the line names (its raising frame, its logger's `pair.cc:538`), or the program's own exception
        # raised by the program
        return bool(rank[0] or rank[1] or (rank[2] and rank[3])) and t.literal >= NAMED_LITERAL
    return (any(rank[:3]) or (t.literal >= SURE_LITERAL and len(t.words) >= SURE_WORDS)
            or t.literal >= MIN_SHARE * letters)


def _exception_of(text: str) -> str | None:
    m = _EXCEPTION.match(text)
    return m["exc"] if m else None


def _module_of(text: str) -> str | None:
    """The top package of the exception the line names with its module (``httpx2.HTTPStatusError: …`` → httpx2)."""
    m = _EXCEPTION.match(text)
    return m[0].split(".", 1)[0] if m and "." in m[0][: m.start("exc")] else None


def _top_package(path: str) -> str:
    return path.replace("\\", "/").lstrip("/").split("/", 1)[0]


def _rank(t: _Template, h: Hints) -> tuple[int, int, int, int, int]:
    """How surely a template is the line's: its file (or function) named by the line, its program, its exception,
    its length."""
    raw = t.raw
    file = str(raw.get("file") or "")
    program = str(raw.get("program") or "")
    base = file.rsplit("/", 1)[-1]
    by_frame = bool(h.file and file and h.file.replace("\\", "/").endswith("/" + file))
    by_logger = bool(h.source and base and h.source.split(":", 1)[0].rsplit("/", 1)[-1] == base) or bool(
        h.function and raw.get("function") == h.function)
    by_program = bool((h.program and h.program == program) or (h.library and h.library in (program, _top_package(file)))
                      or (h.module and h.module.replace("_", "-") in file.split("/")[:-1]))
    by_exception = bool(h.exception and str(raw.get("exception") or "").rsplit(".", 1)[-1] == h.exception)
    return (by_frame, by_logger, by_program, by_exception, t.literal)
