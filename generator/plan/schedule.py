"""Run length and warmup in optimizer steps, from tokens, samples, iterations or a fraction.

Megatron counts its scheduler in samples and DeepSpeed in optimizer steps; with a constant
batch both follow from one integer step count, so the plan stores steps and derives the rest.
Every rounding (a budget that is not a whole number of steps) is reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from generator.spec.model import Training, Warmup


@dataclass(frozen=True)
class Schedule:
    train_iters: int
    warmup_iters: int
    sample_based: bool
    iters_derivation: str
    warmup_derivation: str
    notes: tuple[str, ...]


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


def plan_schedule(training: Training, global_batch_size: int, seq_length: int) -> Schedule:
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
