"""Issue 26 §2: every rule's `match` examples re-rendered under the wrappers the normaliser strips and the
drift releases show; a rule that stops firing is named with the variant that broke it, and a pattern that
spells a whole sentence is named with a shorter core."""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_triage.authoring.lint.variants import drift_variants, variant_runs, wrapper_variants
from qwen_triage.engine.normalize import WRAPPER_SAMPLES
from tests.authoring.lint.rulefiles import lint, rule, rules_dir


def _messages(tmp_path: Path, text: str, check: str) -> list[str]:
    return [p.message for p in lint(rules_dir(tmp_path, text), select=[check])]


@pytest.mark.parametrize(("pattern", "example", "variant", "rendered"), [
    ("frobnicate failed badly", "frobnicate failed badly", "case of a sentence's first word flipped",
     "Frobnicate failed badly"),
    (r"(?i)the widget 'spanner' could not be found", "The widget 'spanner' could not be found", "quotes swapped",
     'The widget "spanner" could not be found'),
    (r"(?i)the widget 'spanner' could not be found", "The widget 'spanner' could not be found", "quotes dropped",
     "The widget spanner could not be found"),
    (r"(?i)\[Errno 98\] Address already in use", "OSError: [Errno 98] Address already in use", "errno moved",
     "OSError: Address already in use (errno 98)"),
    (r"^RuntimeError: (?i:frobnicate failed)", "RuntimeError: frobnicate failed", "exception name repeated",
     "RuntimeError: RuntimeError: frobnicate failed"),
    (r"^torch\.FrobError: (?i:frobnicate failed)", "torch.FrobError: frobnicate failed",
     "exception printed without its module", "FrobError: frobnicate failed"),
    (r"(?i)frobnicate failed badly because the widget could not be found in the top drawer",
     "frobnicate failed badly because the widget could not be found in the top drawer",
     "a word added inside a matched phrase", "frobnicate failed badly because the now widget could not be found"),
])
def test_a_rule_keyed_on_a_sentence_is_named_with_the_drift_that_breaks_it(
        tmp_path: Path, pattern: str, example: str, variant: str, rendered: str) -> None:
    text = rule(match=f"any: [{_quoted(pattern)}]", example=example, no_match="all is well")
    messages = _messages(tmp_path, text, "robust-drift")
    mine = [m for m in messages if f"drift {variant}" in m]
    assert len(mine) == 1, messages
    assert rendered in mine[0] and repr(example) in mine[0]


def test_a_rule_keyed_on_the_core_survives_the_same_drift(tmp_path: Path) -> None:
    robust = rule(match=r"any: ['(?i)widget \W?spanner\W? could not be found', '(?i)Address already in use']",
                  example="The widget 'spanner' could not be found", no_match="all is well")
    assert _messages(tmp_path, robust, "robust") == []


def test_a_wrapped_example_that_stops_firing_is_named_with_the_wrapper(tmp_path: Path) -> None:
    """A kernel rule keyed in the middle of free text fires on the bare example but not on the kernel's own
    line, where a match must begin at the kernel's message."""
    text = rule(match="any: ['(?i)frobnicate failed badly']", sources="kernel",
                example="one two three four five frobnicate failed badly")
    problems = lint(rules_dir(tmp_path, text), select=["robust-wrapper"])
    assert problems and {p.level for p in problems} == {"error"}
    wrappers = {p.message.split("`")[1] for p in problems}
    assert {"[ 1234.567890] ", "Nov 29 10:00:01 host1 kernel: "} <= wrappers, wrappers
    # only wrappers a kernel rule reads are rendered: no server's logger around a kernel line
    assert not any("vllm-process" in p.message or "ollama[" in p.message for p in problems)


def test_a_rule_keyed_on_its_logger_keeps_the_logger_head_under_every_wrapper(tmp_path: Path) -> None:
    """`where: {logger: …}` reads the Python logger's name off the line's own head: the wrappers go around the
    whole line, head kept, and no other program's head replaces it; without the where the same rule misses
    nothing either (the head is stripped), so the check is about the head staying, not the words."""
    keyed = rule(match="any: ['^[Ff]robnicate failed badly']\n      where: {logger: 'frob(?:\\.\\w+)?'}",
                 example="2026-11-29 10:00:01,123 - frob.core - ERROR - frobnicate failed badly",
                 no_match="2026-11-29 10:00:01,123 - other - ERROR - frobnicate failed badly")
    assert _messages(tmp_path, keyed, "robust") == []
    problems = lint(rules_dir(tmp_path / "b", keyed))
    assert not [p for p in problems if p.level == "error"], [p.message for p in problems]


def test_a_rule_keyed_on_its_format_is_not_tried_under_the_wrappers_it_rules_out(tmp_path: Path) -> None:
    """A rule whose `where: {format: …}` excludes a wrapper (the words printed bare are fatal, the same words
    through a logger only a warning) is no robustness miss under that wrapper; under the others it is tried."""
    text = rule(match="any: ['^frobnicate failed badly']\n      where: {format: '(?:(?!dash-logger).)*'}",
                example="frobnicate failed badly",
                no_match="2026-11-29 10:00:01,123 - frob - WARNING - frobnicate failed badly")
    assert _messages(tmp_path, text, "robust-wrapper") == []
    from qwen_triage.authoring.lint.variants import wrapper_variants
    from qwen_triage.rulepack.pack import load_pack

    lr = next(r for r in load_pack([rules_dir(tmp_path / "c", text)], bundled=False).rules)
    names = {v.name.split(" ", 1)[0] for v in wrapper_variants(lr, "frobnicate failed badly")}
    assert "dash-logger" not in names and "journald" in names, names


def test_wrappers_come_from_the_normaliser_and_are_stripped_back() -> None:
    from qwen_triage.engine.normalize import normalize
    from qwen_triage.rulepack.pack import load_pack

    lr = next(r for r in load_pack([]).rules if set(r.rule.sources) == {"vllm"})
    variants = list(wrapper_variants(lr, "ValueError: frobnicate failed"))
    templates = {t.partition("{}")[0] for _, t in WRAPPER_SAMPLES}
    assert {v.name.split("`")[1] for v in variants} <= templates
    assert len(variants) >= 15  # every application wrapper: journald, compose, vLLM, Ray, torchrun, glog, logfmt…
    assert all(normalize(v.text).message == "ValueError: frobnicate failed" for v in variants)
    assert not list(drift_variants(lr, "12345"))  # nothing to change: no variant


@pytest.mark.parametrize("engine", ["hyperscan", "literal"])
def test_the_bundled_pack_survives_every_wrapper_under_each_prefilter(engine: str, request) -> None:  # type: ignore[no-untyped-def]
    """The bundled pack passes the check (`tests/rulepack/test_rule_files.py` lints it whole): no wrapper, engine
    head or drift breaks a rule; the literal prefilter must not lose a variant either. Under the literal prefilter
    every head and drift variant runs and each wrapper on a spread quarter of the examples (``wrappers_every``):
    all ~115 000 wrapped variants took that prefilter 40 minutes of a loaded 2-core machine, ten times Hyperscan's
    time, and made one test most of the suite's length."""
    if engine == "hyperscan":
        pytest.importorskip("hyperscan")
    compiled = request.getfixturevalue("warm_cache" if engine == "hyperscan" else "compiled_literal")
    runs = variant_runs(compiled.pack, compiled, wrappers_every=1 if engine == "hyperscan" else 4)
    wrapped = [r for r in runs if r.variant.kind == "wrapper"]
    assert len(wrapped) > (100000 if engine == "hyperscan" else 25000)
    assert {r.variant.name.split(" ", 1)[0] for r in wrapped} == {fmt for fmt, _ in WRAPPER_SAMPLES}  # each carrier
    assert [r.describe() for r in wrapped if not r.ok] == []
    # issue 26's done-when: the engines' heads and the drift releases show break no bundled rule either
    reworded = [r for r in runs if r.variant.kind in ("head", "drift")]
    assert len(reworded) > 1000
    assert [f"{r.loaded.rule.id}: {r.describe()}" for r in reworded if not r.ok] == []


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def test_a_rule_keyed_on_the_file_nccl_prints_is_wrapped_with_that_file_kept(tmp_path: Path) -> None:
    """`where: {source: …}` reads the `transport/nvls.cc:244` NCCL prints before `NCCL WARN`: a carrier (journald,
    `kubectl logs`, compose) passes the whole line on, so the wrappers go around it, head kept, and the rule still
    fires; the same rule without the file in its example's line does not."""
    nccl_line = "node2:120:140 [1] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'"
    where = "      where: {source: 'transport/nvls\\.cc:\\d+'}\n"
    keyed = rule(match="any: ['NCCL WARN Cuda failure']", sources="nccl", example=nccl_line,
                 no_match="node2:120:140 [1] transport/p2p.cc:244 NCCL WARN Cuda failure 1 'invalid argument'",
                 extra=where)
    problems = lint(rules_dir(tmp_path / "a", keyed), select=["robust-wrapper", "example"])
    assert problems == []  # every wrapper fires, and the no_match line (another file) does not
    bare = rule(match="any: ['NCCL WARN Cuda failure']", sources="nccl",
                example="NCCL WARN Cuda failure 1 'invalid argument'", extra=where)
    assert any("does not fire" in m for m in _messages(tmp_path / "b", bare, "example"))


@pytest.mark.parametrize(("pattern", "example"), [
    # CPython prints every frame as `File "path", line N, in func`, double-quoted, and echoes its source line:
    # neither is a message a release rewords
    (r'File "/opt/frob/widget\.py", line \d+, in spin',
     '  File "/opt/frob/widget.py", line 12, in spin\n    data = frob(\'x\')\nValueError: the widget jammed'),
    # the line closing a traceback names a non-builtin exception with its module, always
    (r"^frob\.errors\.WidgetError: ",
     '  File "/opt/frob/widget.py", line 12, in spin\n    raise WidgetError(x)\nfrob.errors.WidgetError: 42'),
    # a value after `key=` is quoted by its formatter (Go's logfmt, a Python repr), always the same way
    (r'[Ff]rob runner terminated error="exit status \d+"', 'frob runner terminated error="exit status 2"'),
    (r"FrobPool\(host='[\w.]+'", "FrobPool(host='frob.example', port=443): Max retries exceeded"),
    # a KeyError's message is the key's repr, and so is an exception printed with repr()
    (r"KeyError: '\w+'$", "KeyError: 'qwen9'"),
    (r"[Ff]ailed to import from frob\._C with ImportError\('libfrob",
     "Failed to import from frob._C with ImportError('libfrob.so.1: cannot open shared object file')"),
    # a captured value is the log's, not the rule's: a short phrase with a long list after it is a core
    (r"\bnot used by the FrobParser: (?P<args>\[.{1,300}?\])",
     "ValueError: Some keys are not used by the FrobParser: ['bf16', 'do_train', 'eval steps', 'learning rate', "
     "'logging steps', 'save steps', 'warmup ratio']"),
    # a column layout is not prose: no word goes between its headings
    (r"#\s+size\s+count\s+type\s+redop\s+root\s+time\s+algbw\s+busbw\s+#wrong\s+time\s+algbw\s+busbw",
     "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw"),
])
def test_what_no_release_rewords_is_not_drifted(tmp_path: Path, pattern: str, example: str) -> None:
    text = rule(match=f"any: [{_quoted(pattern)}]", example=example, no_match="all is well")
    assert _messages(tmp_path, text, "robust-drift") == []


def test_a_word_is_added_between_two_words_of_prose_not_between_a_field_and_its_value(tmp_path: Path) -> None:
    pattern = r"[Ff]rob socket has timed out after \d+ms while trying to connect to \(\S+, \d+\)"
    example = "frob socket has timed out after 600000ms while trying to connect to (10.1.2.3, 25000)."
    text = rule(match=f"any: [{_quoted(pattern)}]", example=example, no_match="all is well")
    [message] = _messages(tmp_path, text, "robust-drift")
    assert "frob socket has timed out after 600000ms while now trying to connect" in message, message


def test_an_engine_head_goes_on_its_log_records_not_on_the_traceback_they_carry(tmp_path: Path) -> None:
    """SGLang's logger heads the record it writes; the traceback appended to it (frames, source lines and the
    exception line closing them) follows unheaded, so a rule keyed on the traceback is not asked to see heads."""
    from qwen_triage.authoring.lint.variants import head_variants
    from qwen_triage.rulepack.pack import load_pack

    lr = next(r for r in load_pack([]).rules if "sglang" in r.rule.sources)
    example = ('Scheduler hit an exception:\n  File "/venv/sglang/srt/models/qwen2.py", line 437, in load_weights\n'
               "    param = params_dict[name]\nKeyError: 'model.layers.0.mlp.g_idx'")
    [variant] = list(head_variants(lr, example))
    lines = variant.text.splitlines()
    assert lines[0] == "[2026-11-29 10:00:01 TP0] Scheduler hit an exception:"
    assert lines[1:] == example.splitlines()[1:]
