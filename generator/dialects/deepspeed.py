"""DeepSpeed's dialect (deepspeed.yaml): the ds_config.json keys, walked forward into the
config a plan renders and backward by the JSON reader and `import`."""

from __future__ import annotations

from typing import Any

from generator.dialects.keyed import KeyedDialect, keyed_dialect


def dialect() -> KeyedDialect:
    return keyed_dialect("deepspeed")


def deepspeed_values(plan) -> dict[str, Any]:
    """The values ds_config.json carries, under the names deepspeed.yaml uses; None where the
    run does not use them (plain DeepSpeed owns the optimizer and scheduler; Megatron-DeepSpeed
    passes its own)."""
    t, p = plan.spec.training, plan.spec.parallelism
    plain = plan.framework_record.plain_deepspeed
    return {
        "global_batch_size": plan.global_batch_size, "micro_batch_size": plan.micro_batch_size,
        "gradient_accumulation_steps": plan.gradient_accumulation_steps,
        "log_interval": t.log_interval, "clip_grad": t.gradient_clipping,
        "offload_optimizer": p.zero_offload != "none",
        "offload_param": p.zero_offload == "optimizer_and_params",
        # ZeRO-3 under the Trainer: save_model writes whole 16-bit weights, not empty shards
        "gather_16bit_weights": plan.uses_trainer and plan.zero_stage == 3,
        "zero_stage": plan.zero_stage, "precision": t.precision,
        "overlap_comm": plan.overlap_grad_reduce and bool(plan.zero_stage),
        "pipeline_stages": plan.pp if plain and plan.pp > 1 else None,
        "sequence_parallel_size": plan.cp if plain and plan.cp > 1 else None,
        "optimizer": plain, "optimizer_lr": plan.lr if plain else None,
        "adam_betas": list(t.adam_betas) if plain else None,
        "adam_eps": t.adam_eps if plain else None, "weight_decay": t.weight_decay if plain else None,
        "torch_adam": plain and plan.gpu.get("vendor") == "cpu",
        "scheduler": t.decay if plain else None,
        "total_num_steps": plan.schedule.train_iters if plain else None,
        "warmup_num_steps": plan.schedule.warmup_iters if plain else None,
        "cos_min_ratio": plan.min_lr_ratio if plain else None,
        "warmup_max_lr": plan.lr if plain else None,
    }


def config(plan) -> dict[str, Any]:
    """The DeepSpeed config of a plan, keys in the table's order."""
    return dialect().build(deepspeed_values(plan))
