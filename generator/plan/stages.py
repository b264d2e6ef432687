"""A run in stages: one plan per stage (see spec.model.stage_specs), resolved independently, each
starting from the previous stage's checkpoint."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from generator.plan.plan import Plan, PlanError, RunSchedule, resolve
from generator.spec.model import Spec, stage_specs


def resolve_run(spec: Spec) -> list[Plan]:
    """The plans of a spec: one, or one per stage (errors name their stage)."""
    if not spec.stage_names:
        return [resolve(spec)]
    plans, findings = [], []
    for stage_spec in stage_specs(spec):
        try:
            plans.append(resolve(stage_spec))
        except PlanError as exc:
            findings += [replace(f, message=f"[stage {stage_spec.stage}] {f.message}")
                         for f in exc.findings]
    if findings:
        raise PlanError(findings)
    plans = one_schedule(plans) if plans[0].dialect is not None else plans
    refused = stage_resume_findings(plans)
    if refused:
        raise PlanError(refused)
    return plans


def stage_resume_findings(plans: list[Plan]) -> list:
    """GL313: each stage against the checkpoint of the stage before it, as resume-check
    classifies two runs (a change it needs converted or cannot load is refused)."""
    from generator.resume import changes
    from generator.rules import RULES, Fact

    records = [p.to_json() for p in plans]
    out = []
    for k in range(1, len(plans)):
        plan = plans[k]
        for change in changes(records[k - 1], records[k]):
            if change.verdict not in ("convert", "cannot"):
                continue
            fact = Fact((plan.spec.stage, plans[k - 1].spec.stage, change.field, change.old, change.new,
                         change.why, change.fix), _stage_where(plan.spec, k, change.field))
            found = RULES["GL313"].run({"stage_resume": fact})
            if found is not None:
                out.append(found)
    return out


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


def _stage_where(spec: Spec, index: int, field: str) -> str:
    """Where a stage sets a field: the deepest part of it its entry of stages: has."""
    return str(spec.doc.locate(["stages", index, *field.split(".")]))


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
