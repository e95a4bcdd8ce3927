"""Byte sizes: parsing what users type, printing what they read."""

from __future__ import annotations

import re

GiB = 2**30
MiB = 2**20

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?)(B?)\s*$", re.IGNORECASE)
_POWER = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}


class SizeError(ValueError):
    pass


def parse_size(text: str) -> int:
    """``24GiB``, ``24G``, ``24g`` -> binary; ``24GB`` -> decimal; a bare number means GiB.

    A bare ``G`` is binary because that is what docker (``--shm-size 16g``) and
    nvidia-smi (MiB) mean; ``GB`` is decimal because that is what the SI unit is.
    A bare number is GiB: nobody has a GPU measured in bytes.
    """
    m = _SIZE.match(text)
    if not m:
        raise SizeError(f"cannot read size {text!r} (try 24GiB, 24GB or 80G)")
    number, prefix, binary, byte = m.groups()
    value = float(number)
    prefix = prefix.upper()
    if not prefix and not byte:
        return int(value * GiB)
    if not prefix:
        return int(value)
    base = 1024 if (binary or not byte) else 1000
    return int(value * base ** _POWER[prefix])


def human(n: int | float | None) -> str:
    """Short binary size for tables (``64.0 MiB``, ``23.99 GiB``)."""
    if n is None:
        return "?"
    for unit, size in (("TiB", 2**40), ("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"
