"""Counts with size suffixes (``4M``, ``8Mi``, ``300B``) and fractions (``1%``), as exact integers.

K, M, B (or G), T are decimal (4M = 4,000,000); Ki, Mi, Gi, Ti are binary (8Mi = 8,388,608). A
decimal point is allowed when the result is still a whole number (``2.5M`` = 2,500,000).
"""

from __future__ import annotations

import re
from fractions import Fraction

_SUFFIX = {
    "": 1,
    "K": 10**3,
    "M": 10**6,
    "B": 10**9,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
COUNT_PATTERN = r"^\s*([0-9][0-9_]*(?:\.[0-9]+)?)\s*(K|M|B|G|T|Ki|Mi|Gi|Ti)?\s*$"
_COUNT_RE = re.compile(COUNT_PATTERN)
_PERCENT_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*$")


def parse_count(value: int | str, field: str) -> int:
    """Return the exact integer a count denotes, or raise ValueError naming ``field``."""
    if isinstance(value, bool):
        raise ValueError(f"{field}: expected a count such as 4194304 or 4M, got {value!r}")
    if isinstance(value, int):
        return value
    match = _COUNT_RE.match(str(value))
    if not match:
        raise ValueError(
            f"{field}: {value!r} is not a count; use an integer or a number with a suffix "
            "K, M, B, T (decimal) or Ki, Mi, Gi, Ti (binary), e.g. 4M or 8Mi"
        )
    number = Fraction(match.group(1).replace("_", "")) * _SUFFIX[match.group(2) or ""]
    if number.denominator != 1:
        raise ValueError(f"{field}: {value!r} is not a whole number ({float(number):,})")
    return int(number)


def parse_fraction(value: float | int | str, field: str) -> Fraction:
    """A fraction given as ``1%``, ``0.01`` or ``1e-2``; exact (from the decimal text)."""
    if isinstance(value, bool):
        raise ValueError(f"{field}: expected a fraction such as 1% or 0.01, got {value!r}")
    if isinstance(value, str):
        match = _PERCENT_RE.match(value)
        if not match:
            raise ValueError(f"{field}: {value!r} is not a fraction; use e.g. 1% or 0.01")
        return Fraction(match.group(1)) / 100
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


def human(n: int) -> str:
    """Short decimal form for explanations: 8388608 -> '8.4M'."""
    for suffix, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if abs(n) >= scale:
            text = f"{n / scale:.1f}".rstrip("0").rstrip(".")
            return f"{text}{suffix}"
    return str(n)


_SLURM_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d{2}))?(?::(\d{2}))?$")


def slurm_minutes(text: str) -> int | None:
    """A Slurm time limit in whole minutes (seconds rounded up), as sbatch reads --time:
    ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``; None for UNLIMITED / INFINITE."""
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    match = _SLURM_TIME.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a Slurm time limit")
    days, first, second, third = match.groups()
    if days is not None:  # D-H, D-H:M, D-H:M:S
        hours, minutes, seconds = int(first), int(second or 0), int(third or 0)
    elif third is not None:  # H:M:S
        hours, minutes, seconds = int(first), int(second), int(third)
    else:  # M or M:S
        hours, minutes, seconds = 0, int(first), int(second or 0)
    return int(days or 0) * 1440 + hours * 60 + minutes + (1 if seconds else 0)
