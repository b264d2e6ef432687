"""The plan's derivation, step by step in the seed article's style (explain and plan.json)."""

from __future__ import annotations

from generator.plan.schedule import Schedule
from generator.spec.model import Spec
from generator.units import human


def scaled_lr(scaling, global_batch_size: int) -> float:
    """The reference LR scaled to this batch: linear (Goyal et al. 2017) or square root (Adam,
    Malladi et al. 2022)."""
    ratio = global_batch_size / scaling.reference_global_batch_size
    return scaling.reference_lr * (ratio if scaling.rule == "linear" else ratio ** 0.5)


def derivation(spec: Spec, world: int, dp: int, solved, schedule: Schedule) -> tuple[str, ...]:
    c, p, m = spec.cluster, spec.parallelism, spec.model
    micro, acc, glob = (solved.micro_batch_size, solved.gradient_accumulation_steps,
                        solved.global_batch_size)
    tokens = glob * m.seq_length
    lines = [
        f"world_size = nodes × gpus_per_node = {c.nodes} × {c.gpus_per_node} = {world}",
        f"dp = world_size / (pp × tp × cp) = {world} / ({p.pp} × {p.tp} × {p.cp}) = {dp}",
    ]
    if solved.how.startswith("global and micro"):
        lines.append(f"gradient_accumulation_steps = global / (micro × dp) = {glob} / ({micro} × "
                     f"{dp}) = {acc}")
    elif solved.how.startswith("global and accumulation"):
        lines.append(f"micro_batch_size = global / (accumulation × dp) = {glob} / ({acc} × {dp}) "
                     f"= {micro}")
    elif solved.used_token_target:
        unit, name = (micro, "micro") if spec.batch.micro_batch_size else (acc, "accumulation")
        target = spec.batch.tokens_per_step or 0
        exact = "=" if target == tokens else "≈"
        lines.append(f"global_batch_size = tokens_per_step target / seq_length = {target:,} / "
                     f"{m.seq_length} {exact} {glob}, a multiple of {name} × dp = {unit} × {dp}")
    lines += [
        f"global_batch_size = micro × accumulation × dp = {micro} × {acc} × {dp} = {glob}",
        f"tokens_per_step = seq_length × global_batch_size = {m.seq_length} × {glob} = "
        f"{tokens:,}" + (f" ≈ {human(tokens)}" if human(tokens) != str(tokens) else ""),
        schedule.iters_derivation,
        schedule.warmup_derivation,
    ]
    scaling = spec.training.lr_scaling
    if scaling is not None:
        factor = (f"{glob} / {scaling.reference_global_batch_size}" if scaling.rule == "linear"
                  else f"sqrt({glob} / {scaling.reference_global_batch_size})")
        lines.append(f"lr = reference_lr × {factor} ({scaling.rule} rule) = {scaling.reference_lr:g} "
                     f"× {factor} = {scaled_lr(scaling, glob):.4g}")
    return tuple(lines)
