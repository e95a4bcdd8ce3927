"""Text from outside made safe for a terminal: the one sanitiser of the package.

Log lines, facts captured from them and the command lines of other processes
are written by programs nobody vetted. Printed as they are, their escape
sequences reach the reader's terminal: ``ESC c`` resets it, ``ESC ( 0`` turns
letters into line-drawing glyphs, ``ESC 7``/``ESC 8`` move the cursor back to
overwrite what was said, OSC sets the title or a clipboard, and U+009B starts a
CSI sequence on its own. The normaliser strips the common ANSI colours before
matching, but that is for matching; this module is the defence at the point
where text is printed. Every escape sequence is removed whole, then every
remaining C0 and C1 control character, DEL, and the bidirectional overrides
that make a line read differently from what it says; tab becomes a space, and
line breaks are kept only where a caller asks for them.

Stdlib only (a leaf): every layer may use it.
"""

from __future__ import annotations

import re

# Escape sequences, removed whole so their parameters do not show up as text:
#   CSI (ESC [ or U+009B) parameters, intermediates, final byte
#   OSC, DCS, SOS, PM, APC strings (ESC ] / P / X / ^ / _, or their C1 forms) up to BEL or ST
#   any other ESC + intermediates (0x20-0x2F) + final (0x30-0x7E): ESC c, ESC 7, ESC ( 0, ESC # 8 ...
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x9d\x90\x98\x9e\x9f])[^\x07\x1b\x9c]{0,4096}(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)
# What is left: C0 controls (but tab and line feed), DEL, C1 controls; bidi embeddings,
# overrides and isolates; line and paragraph separators.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029\u200e\u200f\u061c]")
_ANY = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]")


def clean(text: str, *, newlines: bool = False) -> str:
    """``text`` with no escape sequence and no control character; tabs become spaces.

    ``newlines``: keep line feeds (a multi-line summary); otherwise each becomes a
    space, so one value stays on one line. A carriage return never survives: it
    would let a line overwrite what was printed before it.
    """
    if not text or not _ANY.search(text):
        return text
    text = _ESCAPES.sub("", text)
    text = text.replace("\r\n", "\n").replace("\t", " ")
    if not newlines:
        text = text.replace("\n", " ")
    return _CONTROLS.sub("", text)


def clean_lines(lines: list[str]) -> list[str]:
    return [clean(line) for line in lines]


_JSON_RAW = re.compile(r"[\x7f-\x9f\u2028\u2029\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]")


def json_safe(text: str) -> str:
    """JSON text with the control characters JSON leaves raw (DEL, C1, bidi controls) written as ``\\uXXXX``.

    The data is unchanged (a JSON reader gets the same strings); a terminal showing the JSON gets no
    control character. They can only occur inside strings, where the escape is valid.
    """
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m[0]):04x}", text)
