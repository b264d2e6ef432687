"""Run length and warmup in optimizer steps, from tokens, samples, iterations or a fraction.

Megatron counts its scheduler in samples and DeepSpeed in optimizer steps; with a constant
batch both follow from one integer step count, so the plan stores steps and derives the rest.
Every rounding (a budget that is not a whole number of steps) is reported.
"""

from __future__ import annotations

from fractions import Fraction

from generator.plan.ramp import BatchRamp
from generator.spec.model import Training, Warmup
from generator.values import value


@value
class Schedule:
    """Iterations, warmup and decay of the run, in Megatron's units, and how each was derived."""

    train_iters: int
    warmup_iters: int
    sample_based: bool
    iters_derivation: str
    warmup_derivation: str
    notes: tuple[str, ...]
    # with a changing batch (ramp-up, step schedule) the samples are the exact quantities
    train_samples: int | None = None
    warmup_samples: int | None = None


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _steps(amount: int, per_step: int, unit: str, what: str, notes: list[str]) -> tuple[int, str]:
    steps = _ceil_div(amount, per_step)
    derivation = f"ceil({amount:,} / {per_step:,}) = {steps:,}" if amount % per_step else \
        f"{amount:,} / {per_step:,} = {steps:,}"
    if amount % per_step:
        notes.append(f"{what}: {amount:,} {unit} is not a whole number of steps of {per_step:,} "
                     f"{unit}; rounded up to {steps:,} steps ({steps * per_step:,} {unit}, "
                     f"+{steps * per_step - amount:,})")
    return steps, derivation


def plan_schedule(training: Training, global_batch_size: int, seq_length: int,
                  ramp: BatchRamp | None = None) -> Schedule:
    if ramp is not None:
        return _ramped_schedule(training, seq_length, ramp)
    notes: list[str] = []
    tokens_per_step = global_batch_size * seq_length
    if training.train_iters is not None:
        iters, how = training.train_iters, f"train_iters = {training.train_iters:,} (given)"
    elif training.train_samples is not None:
        iters, d = _steps(training.train_samples, global_batch_size, "samples", "train_samples", notes)
        how = f"train_iters = train_samples / global = {d}"
    else:
        iters, d = _steps(training.train_tokens or 0, tokens_per_step, "tokens", "train_tokens", notes)
        how = f"train_iters = train_tokens / tokens_per_step = {d}"
    warmup, warmup_how = _warmup(training.warmup, iters, global_batch_size, tokens_per_step, notes)
    return Schedule(iters, warmup, training.train_iters is None, how, warmup_how, tuple(notes))


def _ramped_schedule(training: Training, seq_length: int, ramp: BatchRamp) -> Schedule:
    """Sample-based: Megatron counts the run, the warmup and the decay in samples, and the
    iterations follow from stepping through the changing batch."""
    notes: list[str] = []
    if training.train_samples is not None:
        samples, how = training.train_samples, f"train_samples = {training.train_samples:,} (given)"
    else:
        samples = _ceil_div(training.train_tokens or 0, seq_length)
        how = f"train_samples = ceil(train_tokens / seq_length) = {samples:,}"
        if (training.train_tokens or 0) % seq_length:
            notes.append(f"train_tokens: rounded up to {samples:,} whole samples")
    iters = ramp.steps_for(samples)
    how += f"; {iters:,} steps through the changing batch"
    warmup = training.warmup
    if warmup.unit == "fraction":
        exact = Fraction(warmup.amount) * samples
        warmup_samples = int(exact + Fraction(1, 2))
        if exact != warmup_samples:
            notes.append(f"warmup: {float(warmup.amount) * 100:g}% of {samples:,} samples rounded "
                         f"to {warmup_samples:,}")
    elif warmup.unit == "samples":
        warmup_samples = int(warmup.amount)
    elif warmup.unit == "tokens":
        warmup_samples = _ceil_div(int(warmup.amount), seq_length)
    else:  # iterations: the samples the first steps consume
        warmup_samples = ramp.samples_after(int(warmup.amount))
    warmup_iters = ramp.steps_for(warmup_samples)
    return Schedule(iters, warmup_iters, True, how,
                    f"warmup_samples = {warmup_samples:,} ({warmup_iters:,} steps)", tuple(notes),
                    samples, warmup_samples)


def _warmup(warmup: Warmup, iters: int, global_batch_size: int, tokens_per_step: int,
            notes: list[str]) -> tuple[int, str]:
    if warmup.unit == "iters":
        return int(warmup.amount), f"warmup_iters = {int(warmup.amount):,} (given)"
    if warmup.unit == "samples":
        steps, d = _steps(int(warmup.amount), global_batch_size, "samples", "warmup", notes)
        return steps, f"warmup_iters = warmup samples / global = {d}"
    if warmup.unit == "tokens":
        steps, d = _steps(int(warmup.amount), tokens_per_step, "tokens", "warmup", notes)
        return steps, f"warmup_iters = warmup tokens / tokens_per_step = {d}"
    exact = Fraction(warmup.amount) * iters
    steps = int(exact + Fraction(1, 2))  # round half up
    percent = f"{float(warmup.amount) * 100:g}%"
    if exact != steps:
        notes.append(f"warmup: {percent} of {iters:,} steps = {float(exact):,.2f}, rounded to "
                     f"{steps:,} steps")
    return steps, f"warmup_iters = {percent} × {iters:,} = {steps:,}"
