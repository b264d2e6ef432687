"""GL2xx: Megatron-LM model-shape and parallelism rules (reference/megatron.md §3-§10)."""

from __future__ import annotations

from generator.rules.registry import rule
from generator.rules.suggest import divisors, nearest, nearest_multiples, or_list


@rule("GL201", "heads-not-divisible-by-tp", "Attention heads must be a multiple of tp.")
def heads_tp(num_attention_heads: int, tp: int) -> str | None:
    """megatron-core: ``num_attention_heads (100) must be a multiple of
    tensor_model_parallel_size (8).``"""
    if num_attention_heads % tp == 0:
        return None
    return (f"num_attention_heads {num_attention_heads} is not divisible by tp {tp}; use tp "
            f"{or_list(nearest(divisors(num_attention_heads), tp))}")


@rule("GL202", "query-groups-vs-tp", "Query groups must be a multiple or a divisor of tp.")
def groups_tp(num_query_groups: int, tp: int) -> str | None:
    """megatron-core ≥ 0.16: ``num_query_groups (3) must be a multiple or divisor of
    tensor_model_parallel_size (8).`` (≤ 0.15 required a multiple)."""
    if num_query_groups % tp == 0 or tp % num_query_groups == 0:
        return None
    return (f"num_query_groups {num_query_groups} is neither a multiple nor a divisor of tp {tp}; "
            f"use tp {or_list(nearest(divisors(num_query_groups), tp))}")


@rule("GL203", "layers-not-divisible-by-pp", "Layers must divide evenly over pipeline stages.")
def layers_pp(num_layers: int, pp: int, framework: str) -> str | None:
    """Megatron-LM: ``Number of layers should be divisible by the pipeline-model-parallel size``
    (megatron-core ≤ 0.9 silently dropped the remainder). Megatron-DeepSpeed's pipeline engine
    balances layers itself, so the rule applies to megatron-lm only."""
    if framework != "megatron-lm" or num_layers % pp == 0:
        return None
    return (f"num_layers {num_layers} is not divisible by pp {pp}; use pp "
            f"{or_list(nearest(divisors(num_layers), pp))}")


@rule("GL204", "layers-per-stage-not-divisible-by-vpp",
      "Layers per pipeline stage must divide evenly over the virtual stages.")
def layers_vpp(num_layers: int, pp: int, vpp: int) -> str | None:
    """Megatron asserts ``number of layers per pipeline stage must be divisible number of layers
    per virtual pipeline stage`` (at model build with --num-virtual-stages-per-pipeline-rank)."""
    if vpp == 1 or num_layers % (pp * vpp) == 0:
        return None
    if num_layers % pp:
        return f"num_layers {num_layers} is not divisible by pp {pp} × vpp {vpp} = {pp * vpp}"
    per_stage = num_layers // pp
    choices = [d for d in divisors(per_stage) if d > 1] or [1]
    return (f"num_layers {num_layers} / pp {pp} = {per_stage} layers per stage is not divisible "
            f"by vpp {vpp}; use vpp in {choices}")


@rule("GL205", "sequence-parallel-needs-tp", "Sequence parallelism needs tp > 1.")
def sp_needs_tp(sequence_parallel: bool, tp: int) -> str | None:
    """megatron-core: ``Cannot use sequence parallelism without tensor parallelism``
    (Megatron-LM's CLI disables it with a warning)."""
    if not sequence_parallel or tp > 1:
        return None
    return "sequence_parallel needs tp > 1 (got tp 1); set sequence_parallel to false"


@rule("GL206", "seq-not-divisible-by-2cp",
      "With context parallelism the sequence length must be a multiple of 2 × cp.")
def seq_cp(seq_length: int, cp: int, framework: str) -> str | None:
    """Megatron: ``seq-length should be a multiple of 2 * context-parallel-size if
    context-parallel-size > 1.`` (each rank takes two load-balanced chunks)."""
    if cp == 1 or framework != "megatron-lm" or seq_length % (2 * cp) == 0:
        return None
    return (f"seq_length {seq_length} is not divisible by 2 × cp {cp} = {2 * cp}; use seq_length "
            f"{or_list(nearest_multiples(seq_length, 2 * cp))}")


@rule("GL207", "max-position-below-seq", "max_position_embeddings must be at least seq_length.")
def max_pos(max_position_embeddings: int, seq_length: int) -> str | None:
    """Megatron: ``max_position_embeddings (P) must be greater than or equal to seq_length (S).``"""
    if max_position_embeddings >= seq_length:
        return None
    return (f"max_position_embeddings {max_position_embeddings} is less than seq_length "
            f"{seq_length}; set max_position_embeddings to at least {seq_length}")


@rule("GL208", "hidden-not-divisible-by-heads", "hidden_size must be a multiple of the heads.")
def hidden_heads(hidden_size: int, num_attention_heads: int) -> str | None:
    """Megatron-LM asserts ``hidden_size % num_attention_heads == 0`` (bare assert) when
    --kv-channels is not given; megatron-core alone silently floors the head dimension."""
    if hidden_size % num_attention_heads == 0:
        return None
    return (f"hidden_size {hidden_size} is not divisible by num_attention_heads "
            f"{num_attention_heads}; the head dimension would be {hidden_size / num_attention_heads:.2f}")


@rule("GL209", "heads-not-divisible-by-groups", "Attention heads must be a multiple of query groups.")
def heads_groups(num_attention_heads: int, num_query_groups: int) -> str | None:
    """Grouped-query attention shares each key/value head among heads / groups query heads."""
    if num_attention_heads % num_query_groups == 0:
        return None
    return (f"num_attention_heads {num_attention_heads} is not divisible by num_query_groups "
            f"{num_query_groups}; use groups in {divisors(num_attention_heads)}")


@rule("GL210", "zero-stage-with-megatron-lm", "zero_stage is a DeepSpeed setting.")
def zero_with_megatron(zero_stage: int, framework: str) -> str | None:
    """Megatron-LM has no ZeRO stages; its equivalent of ZeRO-1 is the distributed optimizer."""
    if framework != "megatron-lm" or zero_stage == 0:
        return None
    return (f"zero_stage {zero_stage} has no effect with megatron-lm; remove it and set "
            "distributed_optimizer: true for ZeRO-1-style sharding")


@rule("GL211", "distributed-optimizer-with-deepspeed",
      "The Megatron distributed optimizer is megatron-lm only.")
def dist_opt_with_deepspeed(distributed_optimizer: bool, framework: str) -> str | None:
    """With DeepSpeed the optimizer state is sharded by ZeRO (zero_stage)."""
    if not distributed_optimizer or framework == "megatron-lm":
        return None
    return (f"distributed_optimizer is a megatron-lm option, not {framework}; use zero_stage 1 "
            "instead")


@rule("GL212", "vpp-without-megatron-lm",
      "Virtual pipeline stages (interleaving) exist only in Megatron-LM's schedules.")
def vpp_framework(vpp: int, framework: str) -> str | None:
    """DeepSpeed's pipeline engine (used by megatron-deepspeed and deepspeed) has no interleaved
    schedule."""
    if vpp == 1 or framework == "megatron-lm":
        return None
    return f"vpp {vpp} is not supported by {framework}; set vpp to 1"


@rule("GL213", "moe-top-k", "moe_top_k needs experts and may not exceed their number.")
def moe_top_k(moe_top_k: int, num_experts: int | None = None) -> str | None:
    """Each token is routed to top-k of num_experts experts."""
    if num_experts is None:
        return f"moe_top_k {moe_top_k} needs model.num_experts; remove it for a dense model"
    if moe_top_k <= num_experts:
        return None
    return f"moe_top_k {moe_top_k} exceeds num_experts {num_experts}"


@rule("GL214", "min-lr-above-lr", "min_lr may not exceed lr.")
def min_lr_above_lr(min_lr: float, lr: float) -> str | None:
    """Megatron's scheduler asserts ``min_lr <= lr``."""
    if min_lr <= lr:
        return None
    return f"min_lr {min_lr} is greater than lr {lr}; use a min_lr below lr (often lr / 10)"


@rule("GL215", "alibi-needs-megatron-deepspeed",
      "ALiBi position embeddings exist only in the Megatron-DeepSpeed (BigScience) code.")
def alibi(position_embedding: str, framework: str) -> str | None:
    """megatron-core offers learned_absolute, rope and none."""
    if position_embedding != "alibi" or framework != "megatron-lm":
        return None
    return "position_embedding alibi is not available in megatron-lm; use rope or megatron-deepspeed"
