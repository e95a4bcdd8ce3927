"""JSON from a stranger's model directory: a document nested too deep is invalid JSON, not a crash.

``json.loads`` recurses once per level and raises ``RecursionError`` on a ``config.json`` of 100 000
nested brackets; every reader of a model's JSON files (config, index, tokenizer, a safetensors header)
goes through :func:`loads`, so each turns that into the finding it already gives for broken JSON.
"""

from __future__ import annotations

import json
from typing import Any


def loads(text: str) -> Any:
    """``json.loads``; a document nested deeper than the interpreter can follow is a ``JSONDecodeError``."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("not valid JSON: nested too deep", text[:64], 0) from None
