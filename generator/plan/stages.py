"""A run in stages: one plan per stage (see spec.model.stage_specs), resolved independently, each
starting from the previous stage's checkpoint."""

from __future__ import annotations

from dataclasses import replace

from generator.plan.plan import Plan, PlanError, resolve
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
    return plans


def stage_folder(index: int, plan: Plan) -> str:
    return f"stage-{index}-{plan.spec.stage}"


def timeline(plans: list[Plan]) -> list[str]:
    lines = ["Stages (each starts from the previous stage's checkpoint: point --load at its --save)"]
    total = 0
    for index, plan in enumerate(plans, start=1):
        total += plan.train_tokens
        lines.append(f"  {stage_folder(index, plan)}: {plan.train_tokens:,} tokens "
                     f"({plan.schedule.train_iters:,} steps) at seq {plan.model.seq_length}, "
                     f"{plan.global_batch_size} × {plan.model.seq_length} = "
                     f"{plan.tokens_per_step:,} tokens per step; {total:,} tokens in all")
    return lines
