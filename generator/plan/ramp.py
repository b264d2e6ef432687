"""A global batch that changes during the run: Megatron's ramp-up (start, increment, samples) or
a step schedule (token thresholds). Both become one list of (first sample, global batch) entries,
from which the consumed-samples → batch sequence, the iteration count and Megatron's flag texts
follow (megatron-core's num_microbatches_calculator.py, RampupBatchsizeNumMicroBatchesCalculator)."""

from __future__ import annotations

from generator.values import value

MAX_ENTRIES = 100_000  # a ramp-up of more increments than this is refused (batch.rampup)


@value
class BatchRamp:
    """A global batch that grows during the run (Megatron's rampup, or a token schedule)."""

    kind: str  # "rampup" or "schedule"
    entries: tuple[tuple[int, int], ...]  # (from this many consumed samples, global batch)
    rampup: tuple[int, int, int] | None = None

    def batch_at(self, consumed: int) -> int:
        batch = self.entries[0][1]
        for threshold, size in self.entries:
            if consumed >= threshold:
                batch = size
        return batch

    def steps_for(self, samples: int) -> int:
        """Optimizer steps until ``samples`` are consumed, stepping by the current batch (as
        Megatron's training loop does for sample-based runs)."""
        return self._walk(samples=samples)[0]

    def samples_after(self, steps: int) -> int:
        """The samples the first ``steps`` optimizer steps consume."""
        return self._walk(steps=steps)[1]

    def _walk(self, samples: int | None = None, steps: int | None = None) -> tuple[int, int]:
        """(steps, consumed) when ``samples`` are consumed or ``steps`` are taken: within an
        entry the batch is constant, so each entry is one division (work: the entries)."""
        consumed = taken = index = 0
        while (samples is None or consumed < samples) and (steps is None or taken < steps):
            while index + 1 < len(self.entries) and consumed >= self.entries[index + 1][0]:
                index += 1
            size = self.entries[index][1]
            last = index + 1 == len(self.entries)
            goal = samples if last or (samples is not None and samples < self.entries[index + 1][0]) \
                else self.entries[index + 1][0]
            n = -(-(goal - consumed) // size) if goal is not None else None
            if steps is not None:
                n = steps - taken if n is None else min(n, steps - taken)
            consumed += n * size
            taken += n
        return taken, consumed

    def step_schedule_text(self, seq_length: int) -> str:
        """--step-batch-size-schedule: THRESHOLD:BATCH pairs, thresholds in tokens."""
        return " ".join(f"{threshold * seq_length}:{size}" for threshold, size in self.entries)


def from_rampup(start: int, increment: int, samples: int, global_batch_size: int) -> BatchRamp:
    """Megatron's ramp-up calculator: for consumed c ≤ R the batch is S + int(c / (R / n))·I with
    n = (G − S) / I increments, G afterwards; entry k starts at ceil(k·R/n) samples."""
    increments = max((global_batch_size - start) // increment, 1)
    entries = [(-(-k * samples // increments), start + k * increment) for k in range(increments + 1)]
    entries[-1] = (entries[-1][0], global_batch_size)
    return BatchRamp("rampup", tuple(entries), (start, increment, samples))


def from_schedule(schedule: tuple[tuple[int, int], ...], seq_length: int) -> BatchRamp:
    """Token thresholds → sample thresholds (tokens // seq_length, as Megatron divides them)."""
    entries = sorted((tokens // seq_length, size) for tokens, size in schedule)
    return BatchRamp("schedule", tuple(entries))
