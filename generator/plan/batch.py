"""Solve the batch triple (micro, accumulation, global) from any sufficient subset.

Only values that follow exactly are filled in. A subset that does not divide, does not suffice
(GL018) or misses its token target by more than 10% (GL019) is left for the rules to report with
every factor. Choosing a global batch for a token target is the one rounding, and it is reported.
"""

from __future__ import annotations

from fractions import Fraction

from generator.values import value


@value
class SolvedBatch:
    """The batch triple after solving global = micro × accumulation × dp, and how."""

    micro_batch_size: int | None
    gradient_accumulation_steps: int | None
    global_batch_size: int | None
    how: str
    used_token_target: bool = False
    rounding: str | None = None


def solve_batch(micro: int | None, accumulation: int | None, global_: int | None,
                tokens: int | None, dp: int, seq_length: int) -> SolvedBatch:
    """Fill in what the given values determine exactly."""
    if micro and accumulation:
        return SolvedBatch(micro, accumulation, global_ or micro * accumulation * dp,
                           "micro and accumulation given" if global_ is None else "all three given")
    if global_ and (micro or accumulation):
        step = (micro or accumulation) * dp
        other = global_ // step if global_ % step == 0 else None
        if micro:
            return SolvedBatch(micro, other, global_, "global and micro given")
        return SolvedBatch(other, accumulation, global_, "global and accumulation given")
    if tokens and (micro or accumulation):
        fixed = micro or accumulation
        name = "micro" if micro else "accumulation"
        k = closest_multiple(tokens, fixed * dp * seq_length)
        global_ = k * fixed * dp
        actual = global_ * seq_length
        deviation = Fraction(actual - tokens, tokens)
        rounding = (f"tokens_per_step target {tokens:,} → global batch {global_} "
                    f"({name} {fixed} × {k} × dp {dp}) = {actual:,} tokens "
                    f"({float(deviation) * 100:+.2f}% from the target)")
        return SolvedBatch(micro or k, accumulation or k, global_,
                           f"tokens_per_step target and {name} given", True,
                           rounding if deviation else None)
    return SolvedBatch(micro, accumulation, global_, "underdetermined")


def closest_multiple(target: int, unit: int) -> int:
    """The k ≥ 1 whose k × unit is closest to ``target`` (ties go to the smaller)."""
    low = max(1, target // unit)
    return min((low, low + 1), key=lambda c: (abs(c * unit - target), c))
