"""Helpers that turn a broken value into the nearest valid alternatives for a message."""

from __future__ import annotations

from math import isqrt

# trial division stops here: complete for any n up to its square (10^10), the small divisors and
# their cofactors beyond (a script may give any number; suggestions stay cheap)
_TRIAL_LIMIT = 100_000


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` (for n above 10^10: those up to 10^5 and their cofactors)."""
    small = [d for d in range(1, min(isqrt(n), _TRIAL_LIMIT) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def nearest(choices: list[int], value: int, count: int = 2) -> list[int]:
    """The ``count`` choices closest to ``value``, in increasing order."""
    return sorted(sorted(choices, key=lambda c: (abs(c - value), c))[:count])


def nearest_multiples(value: int, step: int) -> list[int]:
    """The multiples of ``step`` just below and above ``value`` (positive ones only)."""
    below = value // step * step
    return [m for m in (below, below + step) if m > 0 and m != value]


def or_list(items: list) -> str:
    """'a', 'a or b', 'a, b or c'."""
    words = [str(i) for i in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
