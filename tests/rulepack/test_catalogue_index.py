"""The catalogue's lookup index: lazy, confirmed by each template's regex, the most specific template first."""

from __future__ import annotations

from pathlib import Path

from qwen_triage.rulepack.catalogue import TemplateEntry, write_program
from qwen_triage.rulepack.catalogue_index import CatalogueIndex, Hints


def T(program: str, file: str, template: str, regex: str, words: list[str], *, exception: str | None = "ValueError",
      kind: str = "raise", level: str | None = None, function: str | None = None) -> TemplateEntry:
    return TemplateEntry(program=program, releases=["0.8.0", "0.11.0"], file=file, function=function, kind=kind,
                         level=level, exception=exception, template=template, regex=regex, words=words)


HEADS = T("eng", "eng/config/parallel.py",
          "Total number of attention heads ({int}) must be divisible by tensor parallel size ({int}).",
          r"Total\s+number\s+of\s+attention\s+heads\s+\((?:-?\d+)\)\s+must\s+be\s+divisible\s+by\s+tensor\s+parallel"
          r"\s+size\s+\((?:-?\d+)\)\.",
          ["Total", "number", "attention", "heads", "must", "divisible", "tensor", "parallel", "size"],
          function="ParallelConfig.verify")
MID = T("eng", "eng/layers.py", "heads ({int}) must be divisible by tensor parallel size ({int})",
        r"heads\s+\((?:-?\d+)\)\s+must\s+be\s+divisible\s+by\s+tensor\s+parallel\s+size\s+\((?:-?\d+)\)",
        ["heads", "must", "divisible", "tensor", "parallel", "size"])
SHORT = T("eng", "eng/util.py", "{str} must be divisible by {str}", r"(?:.+?)\s+must\s+be\s+divisible\s+by\s+",
          ["must", "divisible"])
LOGGED = T("other", "src/loader.cc", "failed to load model '{path}': {any}",
           r"failed\s+to\s+load\s+model\s+'(?:\S+)':\s+", ["failed", "load", "model"], exception=None, kind="printf",
           level="error")
TWIN_A = T("eng", "eng/a.py", "cannot allocate the KV cache blocks now", r"cannot\s+allocate\s+the\s+KV\s+cache\s+blocks\s+now",
           ["cannot", "allocate", "the", "cache", "blocks", "now"])
TWIN_B = T("eng", "eng/b.py", "cannot allocate the KV cache blocks now", r"cannot\s+allocate\s+the\s+KV\s+cache\s+blocks\s+now",
           ["cannot", "allocate", "the", "cache", "blocks", "now"], exception="RuntimeError")


def catalogue(tmp_path: Path) -> CatalogueIndex:
    (tmp_path / "catalogue").mkdir()
    write_program(tmp_path / "catalogue" / "eng.jsonl.gz", [HEADS, MID, SHORT, TWIN_A, TWIN_B])
    write_program(tmp_path / "catalogue" / "other.jsonl.gz", [LOGGED])
    return CatalogueIndex(tmp_path)


def test_nothing_is_read_before_the_first_lookup(tmp_path: Path) -> None:
    index = catalogue(tmp_path)
    assert not index.loaded
    assert index.lookup("ValueError: nothing like any template here") is None
    assert index.loaded and index.lookups == 1


def test_a_rendered_message_finds_its_template_numbers_as_numbers(tmp_path: Path) -> None:
    index = catalogue(tmp_path)
    line = "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (6)."
    found = index.lookup(line)
    assert found is not None and found.file == "eng/config/parallel.py" and found.function == "ParallelConfig.verify"
    # the words are there but not the template's shape: a word where it prints a number
    found = index.lookup("Total number of attention heads (forty) must be divisible by tensor parallel size (6).")
    assert found is None or found.file != "eng/config/parallel.py"


def test_the_most_specific_template_answers_when_several_match(tmp_path: Path) -> None:
    index = catalogue(tmp_path)
    line = "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (6)."
    assert [e.file for e in index.matches(line)] == ["eng/config/parallel.py", "eng/layers.py"]
    assert index.lookup("ValueError: width must be divisible by 8").file == "eng/util.py"


def test_a_short_template_locates_no_line_it_is_a_small_part_of(tmp_path: Path) -> None:
    index = catalogue(tmp_path)
    # another program's sentence that happens to hold a short template's words
    assert index.lookup("[TM][ERROR] the tile width of this kernel must be divisible by the warp size of the GPU") is None


def test_the_file_the_traceback_names_and_the_exception_decide_between_equal_templates(tmp_path: Path) -> None:
    index = catalogue(tmp_path)
    line = "cannot allocate the KV cache blocks now"
    assert index.lookup("RuntimeError: " + line).file == "eng/b.py"  # by the exception the line names
    frame = Hints(file="/venv/lib/python3.12/site-packages/eng/a.py")
    assert index.lookup("RuntimeError: " + line, frame).file == "eng/a.py"  # the frame that raised beats it
    assert index.lookup(line, Hints(source="a.py:120")).file == "eng/a.py"  # the logger's file:line


def test_a_short_template_inside_a_longer_line_needs_the_record_to_name_its_program(tmp_path: Path) -> None:
    index = catalogue(tmp_path)
    line = "llama_model_load: failed to load model '/models/q.gguf': tensor data is not within bounds"
    assert index.lookup(line) is None  # three words of a long line: any program could have said them
    found = index.lookup(line, Hints(program="other"))
    assert found is not None and found.program == "other" and found.kind == "printf"
    assert index.lookup(line, Hints(source="loader.cc:88")) == found


def test_a_catalogue_that_is_absent_or_broken_locates_nothing(tmp_path: Path) -> None:
    assert CatalogueIndex(tmp_path).lookup("ValueError: anything at all here") is None
    (tmp_path / "catalogue").mkdir()
    (tmp_path / "catalogue" / "bad.jsonl.gz").write_bytes(b"not gzip")
    index = CatalogueIndex(tmp_path)
    assert index.lookup("ValueError: anything at all here") is None and index.skipped == 1


def test_a_hostile_line_is_cut_and_its_confirmation_bounded(tmp_path: Path, monkeypatch) -> None:
    from qwen_triage.rulepack import catalogue_index

    index = catalogue(tmp_path)
    line = "ValueError: " + " ".join(["Total number attention heads must divisible tensor parallel size"] * 2000)
    assert index.lookup(line) is None  # the words are all there, the sentence is not (and only MAX_LINE is read)
    monkeypatch.setattr(catalogue_index, "LINE_BUDGET", -1.0)  # a line whose budget is spent confirms nothing more
    heads = "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (6)."
    assert index.lookup(heads) is None and index.cut_short == 1


def test_an_integer_placeholder_takes_a_number_printed_as_a_float(tmp_path: Path) -> None:
    from qwen_triage.authoring.msg_template import TYPE_REGEX
    from qwen_triage.rulepack.catalogue_index import INT_FIELD

    assert INT_FIELD == "(?:" + TYPE_REGEX["int"] + ")"  # the extractor's integer field, as the index widens it
    index = catalogue(tmp_path)
    found = index.lookup("ValueError: Total number of attention heads (40.0) must be divisible by tensor parallel size (6).")
    assert found is not None and found.file == "eng/config/parallel.py"


def test_a_short_template_locates_a_line_that_names_its_program_and_its_exception(tmp_path: Path) -> None:
    """`for url` is too little of a sentence to place a line, unless the line names the program's own module and the
    exception the template raises (httpx's ``HTTPStatusError: Client error '403 Forbidden' for url '…'``)."""
    (tmp_path / "catalogue").mkdir()
    status = T("httpx", "httpx/_models.py", "{str} '{any} {any}' for url '{str}'",
               r"(?:.+?)\s+'(?:.+?)\s+(?:.+?)'\s+for\s+url\s+'(?:\S+)'", ["for", "url"], exception="HTTPStatusError")
    write_program(tmp_path / "catalogue" / "httpx.jsonl.gz", [status])
    # httpx2 raises the same class: the class alone names no program (tests/engine/test_locate.py: when it does)
    write_program(tmp_path / "catalogue" / "httpx2.jsonl.gz", [status.model_copy(update={
        "program": "httpx2", "file": "httpx2/_models.py"})])
    index = CatalogueIndex(tmp_path)
    line = "Client error '403 Forbidden' for url 'http://127.0.0.1:3/a/config.json'"
    found = index.lookup("httpx.HTTPStatusError: " + line)
    assert found is not None and found.file == "httpx/_models.py"
    assert index.lookup("HTTPStatusError: " + line) is None  # no program named
    assert index.lookup("otherlib.HTTPStatusError: " + line) is None  # another program's
    assert index.lookup("httpx.RemoteProtocolError: " + line) is None  # not the template's exception
