"""Byte sizes: parsing what users type, printing what they read."""

from __future__ import annotations

import re

from qwen_triage.lazyre import lazy

GiB = 2**30
MiB = 2**20

_SIZE = lazy(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([KMGTP]?)(i?)(B?)\s*$", re.IGNORECASE)
_POWER = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5}
MAX_SIZE = 2**80  # no byte count anyone prints is larger; a longer number is not a size


class SizeError(ValueError):
    pass


def parse_size(text: str, bare: int = GiB) -> int:
    """A byte size as people and programs write it: the one size parser of the package.

    ``24GiB``, ``24G``, ``24g``, ``24 Gi`` are binary; ``24GB`` (a ``B`` without
    ``i``) is decimal, because that is what the SI unit is; a bare ``G`` is
    binary because that is what docker (``--shm-size 16g``), vLLM and
    nvidia-smi mean. A bare number is in units of ``bare``: GiB for what a user
    types (nobody has a GPU measured in bytes), MiB for nvidia-smi, bytes for a
    log's "500 bytes".
    """
    m = _SIZE.match(text) if len(text) <= 64 else None
    if not m:
        raise SizeError(f"cannot read size {text[:64]!r} (try 24GiB, 24GB or 80G)")
    number, prefix, binary, byte = m.groups()
    value = float(number)
    prefix = prefix.upper()
    if not prefix:
        out = int(value * (1 if byte else bare))
    else:
        base = 1000 if (byte and not binary) else 1024
        out = int(value * base ** _POWER[prefix])
    if out > MAX_SIZE:
        raise SizeError(f"size {text[:64]!r} is out of range")
    return out


def human(n: int | float | None) -> str:
    """Short binary size for tables (``64.0 MiB``, ``23.99 GiB``)."""
    if n is None:
        return "?"
    for unit, size in (("TiB", 2**40), ("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


MAX_INT_DIGITS = 20  # a pid, a port, a byte count: none is longer; a longer run of digits is not a number


def bounded_int(text: object, base: int = 10, max_digits: int = MAX_INT_DIGITS) -> int | None:
    """An integer read from log text, or None when it is not one or has more than ``max_digits`` digits.

    Python refuses to convert more than 4300 digits (and a long conversion is
    quadratic below that), so every number taken from a log goes through here
    with its length checked first.
    """
    if not isinstance(text, str):
        return None
    s = text.strip().replace(",", "") if base == 10 else text.strip()
    if base == 16 and s[:2].lower() == "0x":
        s = s[2:]
    digits = s[1:] if s[:1] in "+-" else s
    if not digits or len(digits) > max_digits:
        return None
    try:
        return int(s, base)
    except ValueError:
        return None


def port_number(value: object) -> int | None:
    """A TCP port named in a log (``bind ... port 99999``): 1..65535, otherwise None."""
    number = value if isinstance(value, int) and not isinstance(value, bool) else bounded_int(str(value), max_digits=5)
    return number if number is not None and 1 <= number <= 65535 else None


_COUNT = lazy(r"^(\d+(?:\.\d+)?)([kKmMgGtT])$")


def parse_count(value: str) -> int:
    """A count as vLLM's ``human_readable_int_or_auto`` reads it: 1k=1000, 1K=1024, 'auto'/-1 → -1.

    Lower-case suffixes are decimal and upper-case ones binary (vLLM's rule for
    ``--max-model-len``); a binary suffix takes no decimals.
    """
    v = value.strip()
    if v == "-1" or v.lower() == "auto":
        return -1
    m = _COUNT.match(v)
    if m:
        number, suffix = m.groups()
        if suffix.islower():
            return int(float(number) * {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}[suffix])
        if "." in number:
            raise ValueError(f"decimals are not allowed with binary suffix {suffix}: {value!r}")
        return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
    if len(v) > 40:
        raise ValueError(f"not a count: {value[:40]!r}")
    return int(v)

