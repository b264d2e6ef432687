"""Helpers that turn a broken value into the nearest valid alternatives for a message."""

from __future__ import annotations

from math import gcd, isqrt

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


def world_alternatives(world_size: int, group: int, gpus_per_node: int | None) -> str:
    """The worlds nearest ``world_size`` that ``group`` divides: whole nodes (their count and
    GPUs) when the GPUs per node are known and the world is made of them, else GPU counts."""
    per_node = gpus_per_node or 0
    if per_node < 1 or world_size % per_node:
        return f"a world of {or_list(nearest_multiples(world_size, group))} GPUs"
    nodes = world_size // per_node
    counts = nearest_multiples(nodes, group // gcd(group, per_node))
    noun = "node" if counts == [1] else "nodes"
    return f"{or_list(counts)} {noun} ({or_list([n * per_node for n in counts])} GPUs)"


def ramp_alternative(start: int, increment: int, global_batch_size: int,
                     step: int = 1) -> tuple[int, int] | None:
    """The (start, increment) closest to the given ones for a ramp-up to ``global_batch_size`` whose
    start and increment are multiples of ``step`` (micro × dp) and whose increment divides
    global − start; None when the global batch is not a multiple of ``step`` itself."""
    if global_batch_size % step or global_batch_size <= step:
        return None
    starts = [s for s in nearest_multiples(start, step) + [start]
              if 0 < s < global_batch_size and s % step == 0]
    pairs = [(s, step * d) for s in starts for d in divisors((global_batch_size - s) // step)]
    return min(pairs, key=lambda p: (abs(p[0] - start) / start + abs(p[1] - increment) / max(increment, 1),
                                     p[0], p[1])) if pairs else None
