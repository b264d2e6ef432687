"""accelerate's dialect (accelerate.yaml): the keys of accelerate_config.yaml, walked forward
into the config a plan renders and backward by the config reader."""

from __future__ import annotations

from typing import Any

from generator.dialects.keyed import KeyedDialect, keyed_dialect


def dialect() -> KeyedDialect:
    return keyed_dialect("accelerate")


def accelerate_values(plan) -> dict[str, Any]:
    """The values accelerate_config.yaml carries, under the names accelerate.yaml uses."""
    s, p, t = plan.spec, plan.spec.parallelism, plan.spec.training
    fsdp = plan.framework_record.fsdp
    deepspeed = plan.framework_record.deepspeed_engine
    return {
        "framework": plan.framework,
        "mixed_precision": {"bf16": "bf16", "fp16": "fp16"}.get(t.precision, "no") if fsdp else None,
        "nodes": s.cluster.nodes, "world_size": plan.world_size,
        "use_cpu": plan.gpu.get("vendor") == "cpu",
        "deepspeed": deepspeed,
        "zero3_init": plan.zero_stage == 3 if deepspeed else None,
        "fsdp": fsdp,
        "reshard_after_forward": plan.fsdp_reshard_after_forward if fsdp else None,
        "offload_params": p.zero_offload != "none" if fsdp else None,
        "activation_checkpointing": t.recompute != "none" if fsdp else None,
        "dp_replicate_size": s.cluster.nodes if fsdp and p.hybrid_shard else None,
        "dp_shard_size": s.cluster.gpus_per_node if fsdp and p.hybrid_shard else None,
    }


def config(plan) -> dict[str, Any]:
    return dialect().build(accelerate_values(plan))
