"""report.formats.write_format: the format name picks the renderer; what it returns or writes reaches the stream."""

from __future__ import annotations

import io
import json

from qwen_triage.report.formats import json_renderer, pick, write_format


class _Stream(io.StringIO):
    flushed = 0

    def flush(self) -> None:
        self.flushed += 1
        super().flush()


def _renderers(calls: list[str]):  # type: ignore[no-untyped-def]
    def text(stream):  # type: ignore[no-untyped-def]
        calls.append("text")
        stream.write("written by the text renderer\n")  # writes itself, returns None

    def markdown(stream):  # type: ignore[no-untyped-def]
        calls.append("markdown")
        return "# returned by markdown\n"

    return {"text": text, "markdown": markdown, "json": json_renderer(lambda: '{"a": 1}')}


def test_the_named_format_alone_renders_and_the_stream_is_flushed() -> None:
    calls: list[str] = []
    out = _Stream()
    write_format("markdown", _renderers(calls), out)
    assert calls == ["markdown"]
    assert out.getvalue() == "# returned by markdown\n"
    assert out.flushed >= 1


def test_a_renderer_may_write_to_the_stream_itself() -> None:
    calls: list[str] = []
    out = _Stream()
    write_format("text", _renderers(calls), out)
    assert calls == ["text"] and out.getvalue() == "written by the text renderer\n"


def test_an_unknown_format_falls_back_to_the_default() -> None:
    calls: list[str] = []
    out = _Stream()
    write_format("yaml", _renderers(calls), out)
    assert calls == ["text"]
    calls.clear()
    write_format("yaml", _renderers(calls), out, default="markdown")
    assert calls == ["markdown"]


def test_json_gets_one_newline_and_no_terminal_controls() -> None:
    out = _Stream()
    raw = json.dumps({"line": "red\u202e\x9b"}, ensure_ascii=False)  # JSON leaves bidi and C1 controls raw
    assert "\u202e" in raw
    write_format("json", {"json": json_renderer(lambda: raw)}, out)
    text = out.getvalue()
    assert text.endswith("}\n") and text.count("\n") == 1
    assert "\u202e" not in text and "\x9b" not in text
    assert json.loads(text) == json.loads(raw)  # the same data


def test_pick_gives_the_named_renderer_else_the_default_s() -> None:
    renderers = {"npd": "npd-form", "json": "json-form", "text": "text-form"}
    assert pick("npd", renderers) == "npd-form" and pick("json", renderers) == "json-form"
    assert pick("prometheus", renderers) == "text-form"
    assert pick("yaml", {"markdown": 1, "json": 2}, default="markdown") == 1


def test_no_command_switches_on_the_format_by_hand() -> None:
    """`--format` is switched in report/formats only: no `fmt == "json"` ladder is left in a command."""
    from pathlib import Path

    import qwen_triage

    package = Path(qwen_triage.__file__).parent
    ladders = [f"{path.relative_to(package)}:{n}" for path in package.rglob("*.py")
               for n, line in enumerate(path.read_text().splitlines(), 1)
               if any(f'fmt == "{name}"' in line for name in ("json", "markdown", "npd"))]
    assert ladders == []
