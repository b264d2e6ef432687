"""A run in stages: one plan per stage (run.py's stage_specs, resolved independently by
run.resolve_run), each starting from the previous stage's checkpoint; here the one schedule they
share, their folders and their timeline."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from generator.plan.plan import Plan, RunSchedule


def one_schedule(plans: list[Plan]) -> list[Plan]:
    """The stages of a Megatron run as one run: one warmup and one decay over the whole run (a
    fractional warmup is of the whole run, any other the first stage's), in samples since a stage
    may change the batch; each stage trains to its cumulative end, and a stage after the first
    takes the scheduler's values from the checkpoint it resumes.

    With checkpoint.schedule: spec, each stage has a schedule of its own instead (its lr, min_lr,
    decay style, warmup), which it imposes from the sample it resumes at
    (--override-opt_param-scheduler): Megatron counts a schedule from sample 0, so a stage's decay
    ends where the stage ends and its warmup is counted from the run's start."""
    if plans[0].spec.checkpoint.schedule == "spec":
        out, end = [], 0
        for plan in plans:
            end += plan.train_samples
            t = plan.spec.training
            wsd = int(t.wsd_decay * end + Fraction(1, 2)) if t.decay == "wsd" else None
            out.append(replace(plan, run=RunSchedule(end, end, plan.warmup_samples, wsd, False)))
        return out
    total = sum(p.train_samples for p in plans)
    first = plans[0]
    warmup = first.spec.training.warmup
    warmup_samples = int(warmup.amount * total + Fraction(1, 2)) if warmup.unit == "fraction" \
        else first.warmup_samples
    wsd = first.spec.training.wsd_decay
    wsd_samples = int(wsd * total + Fraction(1, 2)) if first.spec.training.decay == "wsd" else None
    out, end = [], 0
    for index, plan in enumerate(plans):
        end += plan.train_samples
        out.append(replace(plan, run=RunSchedule(end, total, warmup_samples, wsd_samples, index > 0)))
    return out


def stage_folder(index: int, plan: Plan) -> str:
    return f"stage-{index}-{plan.spec.stage}"


def timeline(plans: list[Plan]) -> list[str]:
    run = plans[0].run
    if run is not None and plans[0].spec.checkpoint.schedule == "spec":
        lines = ["Stages of one run, each with a schedule of its own (checkpoint.schedule: spec), imposed "
                 "from the sample it resumes at (--override-opt_param-scheduler); each resumes from the "
                 "previous stage's checkpoint (checkpoint.dir)"]
    elif run is not None:
        lines = [f"Stages of one run: each resumes from the previous stage's checkpoint (checkpoint.dir); "
                 f"one warmup of {run.warmup_samples:,} samples and one decay over all "
                 f"{run.decay_samples:,}, passed to every stage (Megatron refuses a checkpoint whose "
                 "schedule differs)"]
    else:
        lines = ["Stages (each starts from the previous stage's checkpoint)"]
    total = 0
    for index, plan in enumerate(plans, start=1):
        total += plan.train_tokens
        lines.append(f"  {stage_folder(index, plan)}: {plan.train_tokens:,} tokens "
                     f"({plan.schedule.train_iters:,} steps) at seq {plan.model.seq_length}, "
                     f"{plan.global_batch_size} × {plan.model.seq_length} = "
                     f"{plan.tokens_per_step:,} tokens per step; {total:,} tokens in all"
                     + (f"; trains to sample {plan.run.end_samples:,} of the run"
                        + ("; takes the schedule from the checkpoint it resumes" if plan.run.resumes else "")
                        if plan.run is not None else ""))
    return lines
