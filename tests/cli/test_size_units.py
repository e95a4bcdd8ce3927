"""One size parser: binary for bare letters and `iB`, decimal for `B`, a bare number in the caller's unit."""

from __future__ import annotations

import pytest

from qwen_triage.units import GiB, MiB, SizeError, parse_size


@pytest.mark.parametrize(
    "text, bare, expected",
    [
        ("24GiB", GiB, 24 * GiB),
        ("24G", GiB, 24 * GiB),
        ("16g", GiB, 16 * GiB),
        ("24GB", GiB, 24 * 10**9),
        ("500 MB", 1, 500 * 10**6),
        ("1.5 TiB", 1, int(1.5 * 2**40)),
        ("80", GiB, 80 * GiB),
        ("81559 MiB", MiB, 81559 * MiB),
        ("81559", MiB, 81559 * MiB),
        ("512", 1, 512),
        ("2 PB", 1, 2 * 10**15),
    ],
)
def test_parse_size(text: str, bare: int, expected: int) -> None:
    assert parse_size(text, bare=bare) == expected


@pytest.mark.parametrize("text", ["", "GiB", "twelve", "1" * 400, "12 parsecs", "9" * 30 + "PiB"])
def test_not_a_size(text: str) -> None:
    with pytest.raises(SizeError):
        parse_size(text)
