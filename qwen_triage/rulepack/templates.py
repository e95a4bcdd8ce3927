"""The template syntax of a rule's texts (`explain`, fix steps, action values), said once for the engine
that fills them and for lint that checks them.

``{name}`` is a fact captured by a pattern (plain substitution: no attribute access, no format specs).
``[[…]]`` is an optional part: kept, without its brackets, when every fact it names has a value, dropped
whole when one has none ("the GGUF's layout does not match[[ (tensor '{tensor}')]]").
"""

from __future__ import annotations

import re

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
OPTIONAL_PART = re.compile(r"\[\[(.*?)\]\]", re.S)


def outside_optional(text: str) -> list[str]:
    """The facts a text names outside its optional parts: each must have a value whenever the rule fires."""
    return PLACEHOLDER.findall(OPTIONAL_PART.sub("", text))
