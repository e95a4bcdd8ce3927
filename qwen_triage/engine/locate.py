"""Errors no rule explains, located: which program printed each, where, and what that part of it means.

The scanner hands over only what it already lists as unexplained (a traceback's final exception, an error
line), never a line a rule explained, a stall or a relay; a scan with nothing unexplained calls nothing here,
so no catalogue file is opened (rulepack.catalogue_index). Each such line is looked up in the message
catalogue: where its template is found, the line gains ``printed_by`` (program, releases, file, function);
where none is, an exception raised in a file of a catalogue program (its traceback's innermost frame) gains
``printed_by`` without a template (:func:`by_frame`).
Where the catalogue gives the template a class — a rule of the pack matches its rendered example, or the
reviewed map of module families (``rules/catalogue-map.yaml``) says what an error of that file means — and
the template is no warning or notice, the line becomes a finding of that class, ``because: catalogue``: it
goes through the correlator like a check's finding, ranks after what any rule found and never makes a rule's
diagnosis its symptom (engine.correlate).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from qwen_triage.engine.correlate import evidence_of
from qwen_triage.engine.unrecognised import Item
from qwen_triage.redact import redact_text
from qwen_triage.report.model import PrintedBy
from qwen_triage.report.summary import printed_by_phrase

if TYPE_CHECKING:
    from qwen_triage.engine.check_finding import CheckFinding
    from qwen_triage.engine.compiled import CompiledPack
    from qwen_triage.rulepack.catalogue import TemplateEntry
    from qwen_triage.rulepack.catalogue_index import CatalogueIndex
    from qwen_triage.rulepack.catalogue_map import CatalogueMap, Family
    from qwen_triage.rulepack.spec import ClassSpec

LOCATED_KINDS = ("exception", "error")  # what says something failed; stalls and relays are not printed lines
CATALOGUE = "catalogue"  # a diagnosis' `because` when the catalogue, not a rule, classed its line
MAX_LOOKUPS = 50  # lines looked up per scan (the report lists at most as many)
MAX_SOURCE_AT = 300  # characters of a line's head searched for a logger's `file.py:123`
# the function a kernel message's own prefix names: DRM's `[drm:nv_drm_load [nvidia_drm]] *ERROR* ` (drm_err's
# `[drm:%ps [%s]]`), and the same as FreeBSD's DRM prints it (`[drm ERROR :nv_drm_load]`)
_FUNCTION_IN_LINE = re.compile(r"\[drm(?::| [A-Z]+ :)(?P<fn>[A-Za-z_]\w{0,80})(?: \[(?P<mod>\w{1,40})\])?\]")
# where a C++ exception was thrown, as c10 and gloo prefix its message (`RuntimeError: [/pytorch/third_party/gloo/
# gloo/transport/tcp/pair.cc:538] Read error …`): the raising site, nearer than any Python frame
_THROWN_AT = re.compile(r"^(?:[\w.]{1,200}:\s*)?\[(?P<file>[^\]\s:]{1,300}\.(?:cc|cpp|cu|cxx|c|h|hpp)):\d{1,6}\]")
_SOURCE_IN_LINE = re.compile(r"(?<![\w/.-])(?P<file>[A-Za-z_][\w.-]{0,80}\.(?:py|cc|cpp|cu|c|h|hpp|go|rs)):\d{1,6}\b")
_ERRNO_HEAD = re.compile(r"^\[Errno -?\d{1,5}\]\s*")
# where an installed package or the interpreter's own library lives: a frame there is not the user's own code
_INSTALLED = ("site-packages/", "dist-packages/", "/lib/python", "/lib64/python", "python.framework/")
SCRIPT = "script"  # printed_by's program for an exception raised in code outside any installed package
RULE_TIMEOUT = 0.05  # seconds per rule pattern tried on a classed line (read_by_rule)
MAX_WRAPPERS = 3  # templates ending in `{any}` looked through for the message they pass on (_passed_on)


@dataclass
class Located:
    """One unexplained line the catalogue placed: where it was printed, and the finding it makes, if any."""

    item: Item
    printed_by: PrintedBy
    finding: CheckFinding | None = None


@functools.cache
def bundled_index() -> CatalogueIndex:
    """The bundled catalogue's index, once per process (``eval`` scans hundreds of logs)."""
    from qwen_triage.rulepack.cache import user_cache_path
    from qwen_triage.rulepack.catalogue_index import CatalogueIndex
    from qwen_triage.rulepack.paths import bundled_rules_dir

    return CatalogueIndex(bundled_rules_dir(), cache_dir=user_cache_path())


def hints_of(item: Item) -> Any:
    """What the line's record says of where it came from: the frame that raised, the logger's ``file.py:123``
    (a format the normaliser knows, else the first such name in the line: DeepSpeed's
    ``[runner.py:248:_parse_hostfile]``), the program and library."""
    from qwen_triage.rulepack.catalogue_index import Hints

    rec = item.first
    source = rec.extra.get("source")
    if not source and (m := _SOURCE_IN_LINE.search(rec.text[:MAX_SOURCE_AT])):
        source = m["file"]
    site = _FUNCTION_IN_LINE.search(rec.message[:MAX_SOURCE_AT])
    thrown = _THROWN_AT.search(rec.message.strip()[:MAX_SOURCE_AT])
    return Hints(file=thrown["file"] if thrown else item.raised_in or rec.raised_in, source=source,
                 program=rec.program, library=rec.raised_by, exception=item.exception,
                 function=site["fn"] if site else None, module=site["mod"] if site else None)


def locate(items: Sequence[Item], compiled: CompiledPack, index: CatalogueIndex | None = None) -> list[Located]:
    """The items the catalogue places, in their order; each with its finding where its template has a class."""
    from qwen_triage.rulepack.catalogue_map import CatalogueMap

    wanted = [i for i in items if i.kind in LOCATED_KINDS][:MAX_LOOKUPS]
    if not wanted:
        return []
    index = index if index is not None else bundled_index()
    cmap = CatalogueMap.from_dicts(compiled.pack.catalogue_map)
    out = []
    for item in wanted:
        entry = index.lookup(item.first.message, hints_of(item))
        if entry is None:
            placed = by_frame(item, index) or by_code(item, index) or by_script(item)
            if placed is not None:
                out.append(Located(item, placed))
            continue
        family = cmap.family_of(entry)
        if class_of(entry, family) is None:
            entry, family = _passed_on(entry, item.first.message, index, cmap) or (entry, family)
        printed_by = _printed_by(entry, family, index)
        finding = _finding(item, entry, family, printed_by, compiled.pack.classes) if _whole(entry, item) else None
        if finding is not None and read_by_rule(item.first.message, compiled):
            finding = None  # a rule read the line and did not take it (its `where` or its table said no)
        out.append(Located(item, printed_by, finding))
    return out


def _passed_on(entry: TemplateEntry, message: str, index: CatalogueIndex,
               cmap: CatalogueMap) -> tuple[TemplateEntry, Family | None] | None:
    """The message a wrapper template passes on, where that one has a class and the wrapper has none.

    A template ending in ``{any}`` (Triton's ``failed to load '{str}' version {int}: {any}``, a loader's
    ``Failed to load model: {any}``) only prefixes what another call said; the logger's ``file.cc:123`` names the
    wrapper's file, so the lookup finds the wrapper first. The text after its fixed part is looked up again, up to
    MAX_WRAPPERS deep, with the wrapper's program as the hint; an error wrapper passes on an error, so a warning
    or notice wrapper passes on nothing."""
    from qwen_triage.rulepack.catalogue_index import Hints
    from qwen_triage.rulepack.catalogue_map import may_diagnose

    for _ in range(MAX_WRAPPERS):
        if not entry.template.endswith("{any}") or not may_diagnose(entry):
            return None
        inner = _after_prefix(entry, message)
        if not inner:
            return None
        found = index.lookup(inner, Hints(program=entry.program))
        if found is None or found.template == entry.template:
            return None
        family = cmap.family_of(found)
        if class_of(found, family) is not None:
            return found, family
        entry, message = found, inner
    return None


def _after_prefix(entry: TemplateEntry, message: str) -> str:
    """What follows the fixed part of a template ending in ``{any}`` (its regex stops before the ``{any}``)."""
    import regex

    from qwen_triage.rulepack.catalogue_index import compile_template

    try:
        m = compile_template(entry.regex).search(message, timeout=RULE_TIMEOUT)
    except (regex.error, TimeoutError, RecursionError):
        return ""
    return message[m.end():].strip(" :-") if m else ""


def _whole(entry: TemplateEntry, item: Item) -> bool:
    """Whether the line says all of its template: a message of several lines is found by its first one, which
    siblings share (huggingface_hub's `{any} Client Error.` opens its gated-repo, entry-not-found and
    revision-not-found messages alike); only its later words tell which of them it is, and so what it means."""
    if "\n" not in entry.template:
        return True
    text = item.first.message
    return all(word in text for word in entry.words)


def _structural(rule: Any) -> bool:
    """A rule of the raising site (`raised:`) reads a line's shape, not its sentence: its pattern finds every
    ``ValueError: …``, and only the frame decides; its pattern finding a line says nothing of the line."""
    return bool(rule.match.raised_module or rule.match.raised_exception)


def read_by_rule(message: str, compiled: CompiledPack) -> bool:
    """Whether a rule's pattern (not a veto) finds the line although no rule took it: a `where` that failed, a
    code its table leaves out (``[Errno 101] Network is unreachable`` stays listed by design). The pack has
    read that line and declined it; the catalogue does not overrule it. One part of a rule's `all` set has not
    read it: `hub.too-many-error-responses`' context part (`huggingface|modelscope|…`) finds any line naming the
    hub; only every part of the set on the line is that rule's reading."""
    data = message.encode("utf-8", "replace").replace(b"\n", b" ") + b"\n"
    pids = {pid for found in compiled.prefilter.candidates(data).values() for pid in found}
    for pid in sorted(pids):
        readers = [(ri, role) for ri, role in compiled.users[pid]
                   if role != "unless" and not _structural(compiled.rules[ri].rule)]
        if not readers or not _finds(compiled, pid, message):
            continue
        if any(role == "any" or all(_finds(compiled, q, message) for q in compiled.rules[ri].all_ids if q != pid)
               for ri, role in readers):
            return True
    return False


def _finds(compiled: CompiledPack, pid: int, message: str) -> bool:
    try:
        return compiled.regexes[pid].search(message, timeout=RULE_TIMEOUT) is not None
    except TimeoutError:
        return False


def by_frame(item: Item, index: CatalogueIndex) -> PrintedBy | None:
    """Where an exception no template places was raised: the file of its traceback's innermost frame, when a
    program of the catalogue holds that file (for a traceback the log cut before its exception, the innermost
    frame it shows). The words are not the program's own (an OS error's text, a C++ extension's, a bare
    ``AssertionError``), the raising code is; no template, so no class."""
    raised_in = _raised_in(item)
    if not raised_in:
        return None
    found = index.file_of(raised_in)
    if found is None:
        return None
    program, file, releases = found
    return PrintedBy(program=program, releases=releases, file=file, display=index.display(program))


def _raised_in(item: Item) -> str | None:
    """The file of the innermost frame of the item's traceback (for a traceback the log cut before its exception,
    the innermost frame it shows)."""
    return item.raised_in or (item.first.raised_in if item.kind == "exception" else None)


def by_code(item: Item, index: CatalogueIndex) -> PrintedBy | None:
    """An error whose own words are a library's text for a status code (``RuntimeError: invalid argument``,
    ``CUDA error: driver shutting down``): the code table places it, by the words after the line's last colon
    (an ``[Errno N]`` before them left out). Exact and case-kept, so CUDA's `invalid argument` is not
    strerror's `Invalid argument`. Placed, never classed: the same code means different failures in different
    calls, which is what rules read."""
    tail = _ERRNO_HEAD.sub("", item.first.message.strip()[-MAX_SOURCE_AT:].rsplit(": ", 1)[-1]).rstrip(" .")
    code = index.code_of(tail) if tail else None
    if code is None or (tail != code.name and " " not in tail):  # one word of text (`Timeout`) says too little
        return None
    return PrintedBy(program=code.table, releases=[], file=code.name, display=code.title,
                     family=f"the library's text for code {code.code}", template=code.text)


def by_script(item: Item) -> PrintedBy | None:
    """An exception whose traceback was raised in a Python file outside any installed package: the user's own
    script or a source checkout (``/home/user/collect_env.py``, ``/app/serve.py``). No catalogue can hold its
    words; where it was raised is the answer (the file's name only: its folders are the user's)."""
    raised_in = _raised_in(item)
    if not raised_in or not raised_in.endswith(".py") or raised_in.startswith("<"):
        return None
    path = raised_in.replace("\\", "/")
    if any(part in path.lower() for part in _INSTALLED):
        return None
    name = path.rsplit("/", 1)[-1]
    return PrintedBy(program=SCRIPT, releases=[], file=name, display="code outside any installed package")


def _printed_by(entry: TemplateEntry, family: Family | None, index: CatalogueIndex) -> PrintedBy:
    return PrintedBy(program=entry.program, releases=list(entry.releases), file=entry.file, function=entry.function,
                     display=index.display(entry.program), family=family.label if family else None,
                     template=entry.template)


def class_of(entry: TemplateEntry, family: Family | None) -> tuple[str, str] | None:
    """The class and severity a located line means, or None: the pack's class for its template (a rule matched
    its rendered example), else its family's; never for a warning, notice or debug message."""
    from qwen_triage.rulepack.catalogue_map import may_diagnose

    if not may_diagnose(entry):
        return None
    if entry.class_:
        return entry.class_, family.severity if family is not None and family.class_ == entry.class_ else "error"
    if family is not None:
        return family.class_, family.severity
    return None


def _finding(item: Item, entry: TemplateEntry, family: Family | None, printed_by: PrintedBy,
             classes: dict[str, ClassSpec]) -> CheckFinding | None:
    classed = class_of(entry, family)
    if classed is None or classed[0] not in classes:
        return None
    from qwen_triage.engine.check_finding import CheckFinding
    from qwen_triage.rulepack.severity import Severity

    cls = classes[classed[0]]
    where = printed_by_phrase(printed_by)
    summary = f"No rule knows this line; the message catalogue places it: {where}. An error there means: {cls.title}."
    return CheckFinding(
        class_id=cls.id,
        rule=f"catalogue.{family.id}" if family is not None and family.class_ == cls.id else "catalogue.rule-template",
        title=cls.title[:1].upper() + cls.title[1:],
        severity=Severity(classed[1]),
        summary=redact_text(summary),
        evidence=[evidence_of(item.first)],
        because=CATALOGUE,
        printed_by=printed_by,
        count=item.count,
    )

