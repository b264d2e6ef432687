"""Human-readable derivation of a plan, in the seed article's style."""

from __future__ import annotations

from generator.plan.plan import Plan
from generator.units import human


def explain_text(plan: Plan) -> str:
    s, t = plan.spec, plan.spec.training
    lines = [
        f"{s.name}: {s.framework} on {s.cluster.nodes} × {s.cluster.gpus_per_node} "
        f"{s.cluster.gpu} (from {s.source})",
        "",
        "Derivation",
        *(f"  {line}" for line in plan.derivation),
        "",
        "Layout",
        f"  tp {plan.tp} × pp {plan.pp} × cp {plan.cp} × dp {plan.dp} = {plan.world_size} GPUs"
        + (f"; vpp {plan.vpp}" if plan.vpp > 1 else "")
        + (f"; ep {plan.ep}, etp {plan.etp}, expert dp {plan.expert_dp}" if s.model.num_experts else "")
        + (f"; ZeRO stage {plan.zero_stage}" if plan.zero_stage is not None else "")
        + ("; distributed optimizer" if s.parallelism.distributed_optimizer else ""),
        f"  {plan.gradient_accumulation_steps} micro-batches of {plan.micro_batch_size} per "
        f"data-parallel rank per step ({plan.batch_how})",
        "",
        "Schedule",
        f"  {plan.schedule.train_iters:,} steps × {plan.tokens_per_step:,} tokens = "
        f"{plan.train_tokens:,} tokens ≈ {human(plan.train_tokens)} "
        f"({plan.train_samples:,} samples)",
        f"  warmup {plan.schedule.warmup_iters:,} steps ({plan.warmup_samples:,} samples), then "
        f"{t.decay} decay from lr {t.lr:g} to {t.min_lr:g} at step {plan.schedule.train_iters:,}",
        "  Megatron counts the schedule in "
        + ("samples (--train-samples)" if plan.schedule.sample_based else "iterations (--train-iters)")
        + ("; DeepSpeed in optimizer steps" if plan.uses_deepspeed else ""),
    ]
    if plan.notes:
        lines += ["", "Roundings", *(f"  - {note}" for note in plan.notes)]
    if plan.warnings:
        lines += ["", "Warnings", *(f"  - {warning}" for warning in plan.warnings)]
    return "\n".join(lines) + "\n"
