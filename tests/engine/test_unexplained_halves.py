"""Halves of messages are not errors of their own (issue 27): the errors no rule explains are whole messages.

- A line with no words but its stamp and level (unittest's verdict ``… ERROR`` on its own line) names nothing.
- An exception line that is only its class and a colon (``torch.OutOfMemoryError:``) takes its text from the next
  line (engine.multiline's forward-only family): that text is what is listed and looked up, and where a rule
  diagnosed that next line, the header is part of the diagnosis.
- An exception earlier in a chain (``During handling of the above exception …``) is part of the diagnosis of the
  exception that ends the chain; a bare ``AssertionError`` holds the code line above it that raised it.
- An exception whose detail or text a relay rule took is that relay's: listed as the relay, not besides it.
"""

from __future__ import annotations

from pathlib import Path

from qwen_triage.engine.multiline import FAMILIES, Assembly, continuing_family, family_of, may_span
from qwen_triage.engine.scanner import Scanner, scan_paths
from qwen_triage.engine.sources import Block
from qwen_triage.inputs.source import Source


def _scan(tmp_path: Path, compiled, text: str):  # type: ignore[no-untyped-def]
    log = tmp_path / "run.log"
    log.write_text(text)
    return scan_paths([str(log)], compiled)


def _listed(report) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(u.kind, u.template) for u in report.unrecognised]


def test_a_line_of_only_a_stamp_and_a_level_is_not_listed(tmp_path: Path, compiled) -> None:
    report = _scan(tmp_path, compiled, "[2026-04-22 21:34:21] test_quux (__main__.QuuxTest.test_quux) ... \n"
                                       "[2026-04-22 21:34:21] ERROR\n")
    assert report.unrecognised == []
    # the same level with words after it is a message, and is listed (the bracketed stamp is a wrapper the
    # normaliser strips, so the template starts at the level)
    report = _scan(tmp_path, compiled, "[2026-04-22 21:34:21] ERROR quux table emb is not aligned\n")
    assert _listed(report) == [("error", "ERROR quux table emb is not aligned")]


def test_a_bare_exception_line_takes_its_text_from_the_next_line(tmp_path: Path, compiled) -> None:
    report = _scan(tmp_path, compiled, "Traceback (most recent call last):\n"
                                       '  File "/opt/quux/loader.py", line 42, in load\n'
                                       "    raise QuuxError(msg)\n"
                                       "quux.loader.QuuxError:\n"
                                       "quux table emb is not aligned to 64 bytes\n")
    (item,) = report.unrecognised
    assert item.kind == "exception" and item.exception == "QuuxError"
    assert item.template == "quux.loader.QuuxError: quux table emb is not aligned to <N> bytes"
    assert item.evidence.line == 4  # evidence cites the exception's own line


def test_a_bare_exception_whose_text_a_rule_diagnosed_is_part_of_that_diagnosis(tmp_path: Path, compiled) -> None:
    text = ("torch.OutOfMemoryError:\n"
            "CUDA out of memory. Tried to allocate 130.00 MiB. GPU 0 has a total capacity of 79.10 GiB of which "
            "12.81 MiB is free. Including non-PyTorch memory, this process has 79.08 GiB memory in use.\n")
    report = _scan(tmp_path, compiled, text)
    assert [d.class_ for d in report.diagnoses] == ["memory.gpu_oom"]
    assert report.diagnoses[0].evidence[0].line == 2  # the rule's line, not the header
    assert report.unrecognised == []


def test_the_exception_family_reads_forward_only() -> None:
    (family,) = [f for f in FAMILIES if f.name == "exception_text"]
    assert family_of("  RuntimeError:") is family and family_of("torch.OutOfMemoryError: ") is family
    assert family_of("RuntimeError: CUDA error") is None and family_of("Traceback (most recent call last):") is None
    assert may_span("ImportError:") and not may_span("ImportError: libnvrtc.so.12")
    # any line of words continues it, so it is never looked back from (that line stays its own record)
    assert continuing_family("The detected CUDA version (12.1) mismatches the version") is None
    joined = Assembly(family, "RuntimeError:")
    assert joined.offer("  The detected CUDA version (12.1) mismatches") and joined.done is False
    assert joined.message == "RuntimeError: The detected CUDA version (12.1) mismatches"
    assert not joined.offer("  PyTorch (11.8).")  # one line: the head of the text is what is looked up
    for structure in ('  File "/x.py", line 3, in f', "Traceback (most recent call last):", "ValueError:", "   "):
        assert not Assembly(family, "RuntimeError:").offer(structure)


def test_a_bare_exception_at_a_block_end_takes_the_next_block_s_line(compiled) -> None:
    """Live: the header waits for the next line; that line is still matched as its own record."""
    scanner = Scanner(compiled)
    src = Source(name="<child>", kind="live")
    scanner.add_source(src)
    assert list(scanner.feed(src, Block(data=b"torch.OutOfMemoryError:\n", first_line=1, counted=1))) == []
    found = list(scanner.feed(src, Block(data=b"CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                                              b"capacity of 79.10 GiB of which 12.81 MiB is free.\n",
                                         first_line=2, counted=1)))
    found += list(scanner.flush())
    assert {f.rule.rule.class_ for f in found} == {"memory.gpu_oom"}
    report = scanner.report()
    assert [d.class_ for d in report.diagnoses] == ["memory.gpu_oom"] and report.unrecognised == []


def test_an_exception_earlier_in_a_diagnosed_chain_is_part_of_the_diagnosis(tmp_path: Path, compiled) -> None:
    cause = ("Traceback (most recent call last):\n"
             '  File "/opt/venv/lib/python3.11/site-packages/transformers/configuration_utils.py", line 884, in f\n'
             "    config_dict = cls._dict_from_json_file(resolved_config_file)\n"
             "UnicodeDecodeError: 'utf-8' codec can't decode byte 0x80 in position 175: invalid start byte\n"
             "\n"
             "During handling of the above exception, another exception occurred:\n"
             "\n"
             "Traceback (most recent call last):\n"
             '  File "/opt/venv/lib/python3.11/site-packages/transformers/configuration_utils.py", line 886, in f\n'
             "    raise OSError(msg)\n")
    diagnosed = "OSError: It looks like the config file at '/m/q.gguf' is not a valid JSON file.\n"
    report = _scan(tmp_path, compiled, cause + diagnosed)
    assert [d.class_ for d in report.diagnoses] == ["model.format_mismatch"]
    assert report.unrecognised == []
    # a chain that ends in an exception no rule knows lists its exceptions, the cause among them
    report = _scan(tmp_path, compiled, cause + "quux.loader.QuuxError: quux table emb is not aligned\n")
    assert {u.exception for u in report.unrecognised} == {"UnicodeDecodeError", "QuuxError"}


def test_an_ipython_traceback_chain_is_followed_too(tmp_path: Path, compiled) -> None:
    text = ("UnicodeDecodeError                        Traceback (most recent call last)\n"
            "/usr/lib/python3.10/codecs.py in decode(self, input, final)\n"
            "--> 322         (result, consumed) = self._buffer_decode(data, self.errors, final)\n"
            "\n"
            "UnicodeDecodeError: 'utf-8' codec can't decode byte 0x83 in position 9: invalid start byte\n"
            "\n"
            "During handling of the above exception, another exception occurred:\n"
            "\n"
            "OSError                                   Traceback (most recent call last)\n"
            "/usr/lib/python3.10/site-packages/transformers/configuration_utils.py in _get_config_dict(cls)\n"
            "--> 721             raise EnvironmentError(\n"
            "\n"
            "OSError: It looks like the config file at '/content/q.gguf' is not a valid JSON file.\n")
    report = _scan(tmp_path, compiled, text)
    assert [d.class_ for d in report.diagnoses] == ["model.format_mismatch"]
    assert report.unrecognised == []


def test_a_bare_assertion_holds_the_code_line_above_it(tmp_path: Path, compiled) -> None:
    text = ('vllm/model_executor/models/chatglm.py", line 53, in __init__\n'
            "    assert self.total_num_kv_heads % tp_size == 0\n"
            "AssertionError\n")
    report = _scan(tmp_path, compiled, text)
    assert [d.class_ for d in report.diagnoses] == ["config.tp_indivisible"]
    assert report.unrecognised == []


def test_an_exception_that_carries_a_relay_line_is_listed_as_that_relay(tmp_path: Path, compiled) -> None:
    text = ("Traceback (most recent call last):\n"
            '  File "/usr/lib/python3/dist-packages/vllm/v1/engine/core_client.py", line 90, in make_client\n'
            "    return AsyncMPClient(vllm_config, executor_class, log_stats)\n"
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n")
    report = _scan(tmp_path, compiled, text)
    assert report.diagnoses == []
    assert [u.kind for u in report.unrecognised] == ["relay"]


def test_an_exception_that_carries_a_fallback_line_is_that_fallback(tmp_path: Path, compiled) -> None:
    """vLLM's "failed to be inspected", carried by pydantic's ValidationError, is all the log says: it stands for
    its class (a fallback), and the exception it sits in is part of that diagnosis, not an unexplained error."""
    text = ("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
            "  Value error, Model architectures ['QuuxForCausalLM'] failed to be inspected. Please check the logs "
            "for more details. [type=value_error, input_value=ArgsKwargs((), {'model': 'q'}), input_type=ArgsKwargs]\n")
    report = _scan(tmp_path, compiled, text)
    assert [d.class_ for d in report.diagnoses] == ["model.arch_unsupported"]
    assert report.unrecognised == []
