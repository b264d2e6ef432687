"""GL1xx: DeepSpeed rules (DeepSpeed's runtime/config.py batch assertions, its ZeRO and pipeline
engines' constraints, as each rule's docstring cites)."""

from __future__ import annotations

from generator.dialects import dialect
from generator.frameworks import framework_of
from generator.rules.registry import rule
from generator.rules.suggest import divisors


@rule("GL104", "zero-with-pipeline", "ZeRO stage 2 and 3 cannot run with DeepSpeed's pipeline engine.")
def zero_pipeline(zero_stage: int, pp: int, framework: str) -> str | None:
    """DeepSpeed's PipelineEngine: ``ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism``.
    Megatron-DeepSpeed uses that engine whenever pp > 1. Fix: zero_stage 1 (or 0) with pipeline
    parallelism, or pp 1 with ZeRO-2/3.

    Example: --zero-stage 3 (or zero_optimization.stage 2) with --pipeline-model-parallel-size
    2."""
    if framework_of(framework).sharding != "zero" or zero_stage < 2 or pp == 1:
        return None
    return (f"zero_stage {zero_stage} is incompatible with DeepSpeed pipeline parallelism "
            f"(pp {pp}); use zero_stage 1 (or 0), or pp 1")


@rule("GL106", "deepspeed-tensor-parallel",
      "Plain DeepSpeed gets tensor parallelism from the model code, not from a size.")
def deepspeed_tp(tp: int, framework: str) -> str | None:
    """With framework deepspeed the training script owns the model; a tp size here would only shrink
    dp. Megatron-DeepSpeed provides tensor parallelism. Fix: framework megatron-deepspeed for
    tensor parallelism, or tp 1.

    Example: framework deepspeed with parallelism.tp: 2."""
    if not framework_of(framework).plain_deepspeed or tp == 1:
        return None
    return f"tp {tp} needs Megatron's tensor-parallel layers; use framework megatron-deepspeed or tp 1"


@rule("GL107", "fp16-on-cpu", "DeepSpeed's CPU accelerator does not support fp16.")
def fp16_cpu(precision: str, gpu: str) -> str | None:
    """DeepSpeed on CPU: ``ValueError: Type fp16 is not supported on your device.`` Fix: bf16 or fp32
    on CPU.

    Example: precision fp16 on the cpu preset."""
    if precision != "fp16" or gpu != "cpu":
        return None
    return "precision fp16 is not supported on the cpu preset; use bf16 or fp32"


@rule("GL108", "deepspeed-warmup-too-short",
      "DeepSpeed's LR schedulers need a warmup of at least 2 steps.")
def deepspeed_warmup(warmup_iters: int, framework: str) -> str | None:
    """DeepSpeed 0.19 raises ``warmup_num_steps must be a positive integer`` for 0 and silently uses
    ``max(2, warmup_num_steps)``, so a 0- or 1-step warmup differs from the plan. Applies where
    DeepSpeed owns the scheduler (framework deepspeed). Fix: a warmup of at least 2 steps.

    Example: framework deepspeed with training.warmup: 0."""
    if not framework_of(framework).deepspeed_scheduler or warmup_iters >= 2:
        return None
    return (f"warmup of {warmup_iters} steps: DeepSpeed's schedulers warm up for at least 2 steps; "
            "set training.warmup to {iters: 2} or more")


@rule("GL109", "ulysses-not-divisible",
      "DeepSpeed-Ulysses splits the sequence and the heads over the sequence-parallel ranks.")
def ulysses(seq_length: int, num_attention_heads: int, cp: int, framework: str) -> str | None:
    """With plain DeepSpeed, cp is Ulysses' sequence_parallel_size, and with Megatron-DeepSpeed
    microsoft's --ds-sequence-parallel-size (its transformer asserts ``num_attention_heads %
    sequence_parallel_world_size == 0``): each rank holds seq_length / cp tokens, and the
    all-to-all regroups them into num_attention_heads / cp heads, so both must divide. Fix: a
    cp that divides both.

    Example: Ulysses cp 8 with 12 attention heads."""
    if not framework_of(framework).deepspeed_engine or cp == 1:
        return None
    if seq_length % cp == 0 and num_attention_heads % cp == 0:
        return None
    return (f"Ulysses sequence parallelism cp {cp} must divide seq_length {seq_length} and "
            f"num_attention_heads {num_attention_heads}; use cp in "
            f"{[d for d in divisors(num_attention_heads) if seq_length % d == 0]}")


@rule("GL110", "offload-needs-zero",
      "CPU offload needs DeepSpeed ZeRO: the optimizer from stage 1, the parameters at stage 3.")
def offload(zero_offload: str, framework: str | None = None, zero_stage: int | None = None) -> str | None:
    """DeepSpeed's offload_optimizer is valid for ZeRO stages 1-3 and offload_param only for
    stage 3; Megatron-LM has no ZeRO-Offload. DeepSpeed accepts ``offload_param`` at stage 2
    without a word and never offloads the parameters: the run silently does without what the
    config asks for. A DeepSpeed JSON read alone is DeepSpeed's. Fix: raise the ZeRO stage, or
    drop the offload.

    Example: zero_offload: optimizer_and_params with zero_stage 2."""
    record = framework_of(framework or "deepspeed")
    if zero_offload == "none" or record.fsdp:  # FSDP's offload: GL113
        return None
    if record.sharding != "zero":
        return "zero_offload is a DeepSpeed feature; use framework deepspeed or megatron-deepspeed"
    stage = zero_stage or 0
    if stage == 0:
        return "zero_offload needs zero_stage 1 or higher (offload_optimizer)"
    if zero_offload == "optimizer_and_params" and stage != 3:
        return f"offloading the parameters needs zero_stage 3 (got {stage}); offload only the optimizer"
    return None


@rule("GL111", "wsd-without-megatron", "DeepSpeed's schedulers have no warmup-stable-decay.")
def wsd(decay: str, framework: str) -> str | None:
    """WSD (constant after warmup, then a short final decay) is Megatron's --lr-decay-style WSD;
    DeepSpeed offers WarmupLR, WarmupDecayLR and WarmupCosineLR. Fix: a Megatron framework, or
    cosine/linear decay.

    Example: framework deepspeed with training.decay: wsd."""
    if decay != "wsd" or not framework_of(framework).deepspeed_scheduler:
        return None
    return "decay wsd needs Megatron (--lr-decay-style WSD); DeepSpeed's schedulers have no WSD"


def _deepspeed_moe(framework: str) -> bool:
    """Whether the framework's experts are DeepSpeed's MoE layer under DeepSpeed's engine
    (Megatron-DeepSpeed: microsoft's fork builds deepspeed.moe.layer.MoE for --num-experts).
    Megatron-LM's own MoE never meets DeepSpeed; plain DeepSpeed's model is the user's script,
    whose experts are not known."""
    record = framework_of(framework)
    return record.deepspeed_engine and record.megatron_arguments


@rule("GL115", "zero3-with-deepspeed-moe", "DeepSpeed's engine refuses its own MoE layer under ZeRO stage 3.")
def zero3_moe(zero_stage: int, num_experts: int, framework: str) -> str | None:
    """Megatron-DeepSpeed's experts are DeepSpeed's MoE layer, and DeepSpeed 0.19's engine
    raises ``Native DeepSpeed MoE is not supported with ZeRO Stage 3. Use AutoEP or choose ZeRO
    stage 1/2.`` when it starts. (Megatron-LM's own MoE does not use DeepSpeed.) Fix: zero_stage
    1 or 2 with experts, or a dense model at ZeRO-3.

    Example: --num-experts 8 with zero_optimization.stage 3 (or --zero-stage 3)."""
    if zero_stage != 3 or not num_experts or not _deepspeed_moe(framework):
        return None
    return (f"num_experts {num_experts} with zero_stage 3: DeepSpeed's engine refuses its MoE layer "
            "under ZeRO-3 (\"Native DeepSpeed MoE is not supported with ZeRO Stage 3\"); use "
            "zero_stage 1 or 2", ("num_experts", "zero_stage", "framework"))


@rule("GL116", "moe-param-group-missing",
      "DeepSpeed's ZeRO wants the experts' parameters in param groups of their own.")
def moe_param_group_missing(megatron_flags: dict, megatron_dialect: str, deepspeed_flag: bool,
                            num_experts: int, zero_stage: int,
                            moe_param_group: bool | None = None) -> str | None:
    """DeepSpeed's ZeRO optimizer (stages 1 and 2) asserts ``The model has moe layers, but None
    of the param groups are marked as MoE`` when it starts. microsoft's Megatron-DeepSpeed puts
    the experts' parameters in groups of their own (DeepSpeed's
    split_params_into_different_moe_groups_for_optimizer) only with --create-moe-param-group;
    its default leaves them out, so a run with --num-experts and ZeRO-1 or ZeRO-2 stops before
    its first step (ZeRO-3 refuses the MoE layer itself: GL115). Fix: add
    --create-moe-param-group (the flag the dialect's table writes for it).

    Example: --deepspeed --num-experts 8 with zero_optimization.stage 1 and no
    --create-moe-param-group."""
    if moe_param_group or not num_experts or zero_stage not in (1, 2) or not deepspeed_flag:
        return None
    d = dialect(megatron_dialect)
    if not d.flags_of("moe_param_group"):  # the dialect has no DeepSpeed MoE (and no such flag)
        return None
    flag = d.flags_of("moe_param_group")[0]
    place = [(f, megatron_flags[f]) for f in d.flags_of("num_experts") if f in megatron_flags][:1]
    return (f"num_experts {num_experts} with ZeRO stage {zero_stage} and no {flag}: DeepSpeed's ZeRO "
            "optimizer stops at start-up (\"The model has moe layers, but None of the param groups are "
            f"marked as MoE\"); add {flag}", ("num_experts", "zero_stage", "megatron_dialect"), *place)
