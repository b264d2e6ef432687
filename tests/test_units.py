"""Counts with suffixes and fractions are exact integers / rationals."""

from __future__ import annotations

from fractions import Fraction

import pytest

from generator.units import human, parse_count, parse_fraction


@pytest.mark.parametrize(
    ("text", "value"),
    [("4M", 4_000_000), ("8Mi", 8_388_608), ("300B", 300_000_000_000), ("1T", 10**12),
     ("2.5M", 2_500_000), ("4194304", 4_194_304), (4194304, 4_194_304), ("9_765_625", 9_765_625),
     ("375M", 375_000_000), ("1Ki", 1024), ("1Gi", 2**30), ("12K", 12_000), (" 4 M ", 4_000_000)],
)
def test_counts(text, value) -> None:
    assert parse_count(text, "f") == value


@pytest.mark.parametrize("text", ["4X", "M", "four", "1.0001K", "-4M", "", "4MB", True])
def test_bad_counts_name_the_field(text) -> None:
    with pytest.raises(ValueError, match=r"^\$\.batch\.tokens_per_step: "):
        parse_count(text, "$.batch.tokens_per_step")


@pytest.mark.parametrize(("text", "value"), [("1%", Fraction(1, 100)), (0.01, Fraction(1, 100)),
                                              ("2.5%", Fraction(1, 40)), (0, Fraction(0))])
def test_fractions(text, value) -> None:
    assert parse_fraction(text, "w") == value


def test_human() -> None:
    assert (human(8_388_608), human(524_288), human(768), human(300_000_000_000)) == (
        "8.4M", "524.3K", "768", "300B")
