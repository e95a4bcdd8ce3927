"""The ways a case damages a freshly written ``tiny.gguf``, shared by the gguf-py and llama.cpp programs.

Each value is Python run after the case's writer script, with ``raw`` (the intact file's bytes) and
``struct`` in scope; the same damage reaches both readers, so their messages can be compared.
"""

BAD_MAGIC = "open('tiny.gguf', 'wb').write(b'GGML' + raw[4:])"
HTML_PAGE = "open('tiny.gguf', 'w').write('<!DOCTYPE html><html><head><title>404</title></head></html>\\n' * 4)"
FUTURE_VERSION = "open('tiny.gguf', 'wb').write(raw[:4] + struct.pack('<I', 9) + raw[8:])"
# the type field of the first tensor info: after the name, n_dims and the dims
UNKNOWN_GGML_TYPE = (
    "i = raw.index(b'token_embd.weight') + len('token_embd.weight')\n"
    "n_dims = struct.unpack('<I', raw[i:i + 4])[0]\n"
    "t = i + 4 + 8 * n_dims\n"
    "open('tiny.gguf', 'wb').write(raw[:t] + struct.pack('<I', 251) + raw[t + 4:])"
)


def truncated(keep: str) -> str:
    """The file cut to ``raw[:keep]`` (``keep`` is Python, e.g. ``"120"`` or ``"len(raw) - 4096"``)."""
    return f"open('tiny.gguf', 'wb').write(raw[:{keep}])"
