"""Records of a block's lines: one raw line normalised, and multi-line records assembled around it.

The matcher reads a block's candidate lines only; these helpers read the lines
around a candidate when a record spans several of them (engine.multiline): the
lines that continue it, and for a continuation, the line its record starts on.
"""

from __future__ import annotations

from qwen_triage.engine.multiline import Assembly, continuing_family
from qwen_triage.engine.normalize import decode_line, normalize
from qwen_triage.engine.records import LineRecord
from qwen_triage.engine.sources import Block, LineMeta
from qwen_triage.engine.unrecognised import frame_file

MAX_SOURCE_LINES = 8  # lines under a frame: a statement over several lines (Python 3.13) and its carets


def normalized(raw: bytes, source_name: str, line_no: int, source_index: int, truncated: bool,
               meta: LineMeta | None) -> LineRecord:
    """One raw line (without its LF) decoded and normalised into a record."""
    return normalize(decode_line(raw), source_name, line_no, source_index=source_index, truncated=truncated,
                     preset=meta.apply if meta is not None else None)


def record_of(block: Block, index: int, raw: bytes, source_name: str, source_index: int) -> LineRecord:
    """The record of line ``index`` of the block, whose bytes are ``raw``."""
    line_no = block.origin_line(index)
    meta = block.meta[index] if block.meta is not None else None
    return normalized(raw, source_name, line_no, source_index, line_no in block.truncated, meta)


def next_line(data: bytes, start: int) -> int:
    """The offset of the line after the one starting at ``start``."""
    end = data.find(b"\n", start)
    return end + 1 if end >= 0 else len(data)


def assemble(assembly: Assembly, block: Block, index: int, pos: int, source_name: str, source_index: int,
             stop_at: int | None = None) -> int:
    """Offer the lines from byte ``pos`` (line ``index``) until the record is complete; lines taken."""
    data = block.data
    taken = 0
    while pos < len(data) and not assembly.done and (stop_at is None or index <= stop_at):
        end = data.find(b"\n", pos)
        raw = data[pos : end if end >= 0 else len(data)]
        message = record_of(block, index, raw, source_name, source_index).message
        if not assembly.offer(message):
            break
        taken += 1
        index += 1
        pos = end + 1 if end >= 0 else len(data)
    return taken


def record_start(block: Block, start: int, index: int, message: str, source_name: str,
                 source_index: int) -> tuple[int, int] | None:
    """For a line that continues a multi-line record: where that record starts in this block.

    The earliest line within the family's reach whose record, assembled forward,
    takes this line in (an NVRM line can both start a message and continue one).
    Returns (offset, line index), or None when the line continues no record here.
    """
    data = block.data
    family = continuing_family(message)
    if family is None:
        return None
    found = None
    pos, i = start, index
    for _ in range(family.max_lines):
        if pos == 0:
            break
        prev_start = data.rfind(b"\n", 0, pos - 1) + 1
        i -= 1
        head = record_of(block, i, data[prev_start : pos - 1], source_name, source_index).message
        pos = prev_start
        if family.starts.search(head):
            assembly = Assembly(family, head)
            taken = assemble(assembly, block, i + 1, next_line(data, prev_start), source_name, source_index,
                             stop_at=index)
            if taken >= index - i:
                found = (prev_start, i)
            elif family.name != "nvrm":
                break
        elif family.name == "nvrm" and not family.continues.search(head):
            break
    return found


def quoted_source(block: Block, start: int, index: int, message: str, source_name: str, source_index: int) -> bool:
    """Whether the line at ``start`` is source code a Python traceback quotes under a ``File "…", line N`` frame.

    Such a line is the program's code, not its words: ``log.error("NVRM: Xid …")`` quoted in a
    traceback says nothing happened to any GPU. It is indented, and the lines between it and its
    frame are too (a statement printed over several lines, carets).
    """
    indent = _indent(message)
    if not indent:
        return False
    data = block.data
    pos, i = start, index
    for _ in range(MAX_SOURCE_LINES):
        if pos == 0:
            return False
        prev_start = data.rfind(b"\n", 0, pos - 1) + 1
        i -= 1
        prev = record_of(block, i, data[prev_start : pos - 1], source_name, source_index).message
        if frame_file(prev) is not None:
            # Python indents a frame by 2 and its source by 4; the exception after them is not indented
            # (a prefix such as torch's `[rank0]: ` adds the same to each)
            return indent > _indent(prev)
        indent = min(indent, _indent(prev))
        if not indent:
            return False
        pos = prev_start
    return False


def may_be_quoted_source(data: bytes, start: int) -> bool:
    """Whether :func:`quoted_source` could say yes for the line at ``start``: some line of the
    ``MAX_SOURCE_LINES`` before it in the block holds ``File `` (a frame's message is part of its raw line; a
    JSON-escaped quote is why the quote is left out). Cheap, on raw bytes: an indented line far from any
    frame (uvicorn's ``INFO:     Application startup complete.``) need not be normalised to know."""
    frame = data.rfind(b"File ", 0, start)
    return frame >= 0 and data.count(b"\n", frame, start) <= MAX_SOURCE_LINES


def _indent(message: str) -> int:
    return len(message) - len(message.lstrip())
