"""Issue 29 §3: a rule's text names a fact only where the line gave one.

``[[…]]`` in an explanation, a fix step or an action value is an optional part: kept without its brackets when
every fact it names has a value, dropped whole when one has none, so a report never says "tensor '?'" for a
line that did not name a tensor.
"""

from __future__ import annotations

from qwen_triage.engine.correlate import fill

LAYOUT = "The layout does not match[[ (tensor '{tensor}')]][[ ({vocab})]]: convert it again."


def test_a_part_whose_fact_is_set_is_kept_without_its_brackets() -> None:
    assert fill(LAYOUT, {"tensor": "blk.0.attn_q.weight"}) == \
        "The layout does not match (tensor 'blk.0.attn_q.weight'): convert it again."


def test_a_part_whose_fact_is_unset_is_dropped_whole() -> None:
    assert fill(LAYOUT, {}) == "The layout does not match: convert it again."
    assert fill(LAYOUT, {"vocab": "cannot find tokenizer merges"}) == \
        "The layout does not match (cannot find tokenizer merges): convert it again."


def test_an_empty_or_blank_fact_counts_as_unset() -> None:
    assert fill("fetch failed[[ ({cause})]].", {"cause": ""}) == "fetch failed."
    assert fill("fetch failed[[ ({cause})]].", {"cause": "  "}) == "fetch failed."


def test_a_part_with_two_facts_needs_both() -> None:
    text = "waited for the store[[ at {host}:{port}]]"
    assert fill(text, {"host": "10.0.0.1", "port": 29500}) == "waited for the store at 10.0.0.1:29500"
    assert fill(text, {"port": 29500}) == "waited for the store"


def test_a_fact_outside_any_part_is_filled_as_before() -> None:
    assert fill("GPU {gpu}[[ ({free} free)]]", {"gpu": 0}) == "GPU 0"
    assert fill("GPU {gpu}[[ ({free} free)]]", {}) == "GPU"  # no "?": the unset fact takes its word along


def test_a_value_from_the_log_is_masked_and_never_read_as_a_part() -> None:
    # a fact that holds brackets, braces or a secret is text: substituted after the parts are decided
    assert fill("keys[[ {keys}]]", {"keys": "[[{secret}]]"}) == "keys [[{secret}]]"
    assert "hf_" not in fill("token[[ {t}]]", {"t": "hf_abcdefghijklmnopqrstuvwxyz0123456789"})


def test_a_fact_unset_outside_an_optional_part_takes_its_word_never_a_question_mark() -> None:
    """Issue 29 §3: a group optional inside its pattern leaves a fact unset that lint cannot see: the report drops
    the word that holds it, keeps the sentence's punctuation and balance, and prints no '?'."""
    from qwen_triage.engine.correlate import fill

    facts = {"ran_ms": 300, "op": "ALLREDUCE"}
    text = fill("Rank {rank} waited {ran_ms} ms for collective #{seq} ({op}): check `ethtool -S {iface}`.", facts)
    assert text == "Rank waited 300 ms for collective (ALLREDUCE): check `ethtool -S`."
    assert fill("the context allows ({key}={derived}).", {"key": "max_position_embeddings"}) == "the context allows."
    assert fill("tensor '{tensor}', pre-tokenizer '{pretok}'", {"pretok": "qwen2"}) == "tensor, pre-tokenizer 'qwen2'"
    assert "?" not in fill("{derived}", {})
