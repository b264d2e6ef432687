"""Estimates of a resolved plan: memory of the most loaded GPU, step time and time to train."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from generator.dialects import flash_attention
from generator.estimate.attention import LENGTHS
from generator.estimate.host import HostLoad, host_load
from generator.estimate.memory import (
    GIB,
    Layout,
    Memory,
    alternatives,
    deepspeed_estimator_bytes,
    estimate_memory,
)
from generator.estimate.params import Shape, count_params
from generator.estimate.performance import Hardware, Performance, estimate_performance
from generator.frameworks import framework_of
from generator.plan.plan import overlaps_grad_reduce
from generator.values import value


@value
class Estimate:
    """A plan's estimates: parameters, memory (and alternatives), step time, host load."""

    params: int
    memory: Memory
    performance: Performance | None  # None on the cpu preset (no peak to model)
    alternatives: tuple[tuple[str, Memory], ...]
    train_tokens: int
    deepspeed_estimator: float | None = None  # DeepSpeed's own ZeRO-2/3 model-state estimate
    vocab_padding_params: int = 0  # of params: the rows Megatron pads the vocabulary with
    uncertainty: float | None = None  # the throughput band: the GPU preset's, widened (None: uncalibrated)
    host: HostLoad | None = None  # CPU memory of the most loaded node while the run loads
    # what widened the band beyond the GPU generation's: (what, share of the step), largest first
    widened_by: tuple[tuple[str, float], ...] = ()

    @property
    def train_seconds(self) -> float | None:
        return None if self.performance is None else self.train_tokens / self.performance.tokens_per_s

    def to_json(self) -> dict:
        p = self.performance
        out = {"parameters": self.params, "parameters_vocab_padding": self.vocab_padding_params,
               "memory": {**self.memory.gib(), "host_at_load": self.host and self.host.to_json()},
               "performance": None,
               "if_it_does_not_fit": [{"change": label, "total_gib": round(m.total / GIB, 2),
                                       "fits": m.fits} for label, m in self.alternatives]}
        if self.deepspeed_estimator is not None:
            out["memory"]["deepspeed_estimator_model_states_gib"] = round(self.deepspeed_estimator / GIB, 2)
        if p is not None:
            seconds = self.train_seconds or 0.0
            out["performance"] = {
                "flops_convention": "matmuls, full (non-causal) attention, logits; fwd+bwd = 3×fwd",
                "flops_per_step": p.model_flops, "hardware_flops_per_step": p.hardware_flops,
                "step_time_s": round(p.step_time_s, 3),
                "step_breakdown_s": {"compute": round(p.compute_s, 3), "memory_bound": round(p.memory_s, 3),
                                     "pipeline_bubble": round(p.bubble_s, 3),
                                     "tensor_parallel_comm": round(p.tp_comm_s, 3),
                                     "context_parallel_comm": round(p.cp_comm_s, 3),
                                     "data_parallel_comm": round(p.dp_comm_s, 3),
                                     "pipeline_p2p": round(p.pp_comm_s, 3),
                                     "zero3_gathers": round(p.zero3_gather_s, 3),
                                     "moe_all_to_all": round(p.moe_comm_s, 3),
                                     "optimizer_step": round(p.optimizer_s, 3),
                                     "of_compute_flash_attention": round(p.attention_s, 3),
                                     "of_memory_bound_fp8_casts": round(p.fp8_casts_s, 3),
                                     "of_memory_bound_moe_permute": round(p.moe_permute_s, 3),
                                     "of_memory_bound_grad_accumulation": round(p.grad_accumulation_s, 3)},
                "fp8_gemm_speedup": None if p.fp8_gemm_speedup is None else round(p.fp8_gemm_speedup, 3),
                "tokens_per_s": round(p.tokens_per_s), "tflops_per_gpu": round(p.tflops_per_gpu, 1),
                # throughput within ±band of the estimate on the published runs of the GPU's
                # generation (leave-one-out; generator/estimate/calibration.py); None: uncalibrated
                "uncertainty": self.uncertainty,
                "uncertainty_widened_by": {what: round(share, 3) for what, share in self.widened_by},
                "mfu": round(p.mfu, 4), "hfu": round(p.hfu, 4),
                "train_days": round(seconds / 86400, 2),
                "gpu_hours": round(seconds / 3600 * p.gpus),
            }
        return out


def sharding_of(framework: str, distributed_optimizer: bool, zero_stage: int | None,
                megatron_fsdp: bool = False) -> str:
    """How optimizer state (and more) is sharded: Megatron's distributed optimizer or a ZeRO stage
    (Megatron-FSDP's sharding strategy is one: optim_grads_params the stage 3, its default)."""
    if megatron_fsdp:  # (auto-plan's candidates of megatron-lm have no stage: the default 3)
        return f"zero{3 if zero_stage is None else zero_stage}"
    if framework_of(framework).sharding == "distributed_optimizer":
        return "distributed_optimizer" if distributed_optimizer else "none"
    return f"zero{zero_stage or 0}"


def overlaps_p2p_comm(framework: str) -> bool:
    """Whether the framework overlaps an interleaved pipeline's sends with the compute of the
    neighbouring chunks: megatron-core does by default in every release gen-launch writes for
    (validate_args keeps overlap_p2p_comm with a virtual pipeline; --no-overlap-p2p-communication,
    never written, turns it off); microsoft's Megatron-DeepSpeed only with its opt-in
    --overlap-p2p-communication (not written), BigScience's not at all."""
    return framework_of(framework).megatron_core


def spec_layout(spec, *, zero_stage: int | None, distributed_optimizer: bool, recompute: str,
                **sizes: Any) -> Layout:
    """The estimate's layout for a spec and chosen sizes (tp … last_stage_layers): one
    definition for the plan and for auto-plan's candidates, so the two count the same memory
    (HSDP's shard group, offload, precision from the spec)."""
    p = spec.parallelism
    return Layout(**sizes, recompute=recompute, flash_attention=flash_attention(spec),
                  precision=spec.training.precision, fp8_recipe=spec.training.fp8_recipe,
                  optimizer_states=spec.training.optimizer_states,
                  main_grads=spec.training.main_grads,
                  sharding=sharding_of(spec.framework, distributed_optimizer, zero_stage, p.megatron_fsdp),
                  framework=spec.framework, offload=p.zero_offload,
                  shard_dp=_shard_group(p, sizes["dp"], spec.cluster.gpus_per_node),
                  overlap_grad_reduce=overlaps_grad_reduce(spec.framework, zero_stage, sizes.get("pp", 1)),
                  moe_dispatcher=spec.model.token_dispatcher(sizes.get("ep", 1)),
                  tp_comm_overlap=p.tp_comm_overlap, overlap_p2p_comm=overlaps_p2p_comm(spec.framework),
                  ep_comm_overlap=p.ep_comm_overlap, recompute_modules=spec.training.recompute_modules,
                  compiled=compiles(spec))


def compiles(spec) -> bool:
    """Whether the run torch.compiles its model: torchtitan.compile, where the framework is
    torchtitan (the run of a config function; the other frameworks' files do not compile, and
    Megatron-LM fuses through Transformer Engine instead)."""
    return framework_of(spec.framework).config_registry and spec.torchtitan.compile


def _shard_group(p, dp: Any, gpus_per_node: int) -> Any:
    """The ranks a replicated (HSDP) data-parallel group shards state over (None: all of dp):
    dp / dp_replicate, the dp_shard given, or with hybrid_shard a node's GPUs (``dp`` may be an
    array: one per auto-plan candidate)."""
    if p.dp_replicate is not None:
        return dp // p.dp_replicate if p.dp_replicate > 1 else None
    if p.dp_shard is not None:  # all of a (plan's) dp: one group, as with neither given
        return None if isinstance(dp, int) and dp == p.dp_shard else p.dp_shard
    return gpus_per_node if p.hybrid_shard else None


def layout_of(plan) -> Layout:
    s = plan.spec
    split = replace(s.parallelism, pp=plan.pp).split_layers(plan.model.num_layers)
    return spec_layout(s, zero_stage=plan.zero_stage,
                       distributed_optimizer=s.parallelism.distributed_optimizer,
                       recompute=s.training.recompute, tp=plan.tp, pp=plan.pp, cp=plan.cp, ep=plan.ep,
                       etp=plan.etp, vpp=plan.vpp, dp=plan.dp, micro_batch_size=plan.micro_batch_size,
                       num_microbatches=plan.gradient_accumulation_steps,
                       sequence_parallel=s.parallelism.sequence_parallel,
                       first_stage_layers=split[0], last_stage_layers=split[1])


def nvlink_gpus(gpu: dict, gpus_per_node: int) -> int:
    """The GPUs one NVLink domain joins: the node, or more where the preset's domain spans
    several nodes (gpus.yaml's nvlink_gpus: GB200 NVL72's 18 trays of 4 GPUs)."""
    return max(gpus_per_node, gpu.get("nvlink_gpus") or 0)


def hardware_of(gpu: dict, precision: str, gpus_per_node: int) -> Hardware | None:
    if not gpu.get("bf16_tflops") or not gpu.get("efficiency"):
        return None
    # TF32 dense is half of BF16; FP8 runs are measured against the BF16 peak (as Llama 3 and
    # DeepSeek-V3 report MFU), their GEMM gain is in the step time
    peak = gpu["bf16_tflops"] / (2 if precision == "fp32" else 1)
    return Hardware(peak, gpu["efficiency"], gpu["hbm_tbps"], gpu["intranode_gbps"],
                    gpu["internode_gbps"], nvlink_gpus(gpu, gpus_per_node), gpu.get("fp8_tflops"),
                    attention_kernel=gpu["attention"],
                    multi_node_domain=nvlink_gpus(gpu, gpus_per_node) > gpus_per_node)


def shape_of(plan) -> Shape:
    """The model a plan's framework builds (Megatron pads the vocabulary for its tp)."""
    return Shape.of(plan.model, plan.padded_vocab_size, plan.dialect)


def usable_memory_gib(spec, gpu: dict) -> float | None:
    """The memory a layout's estimate must fit in: the GPU's, less cluster.memory_headroom_gib
    (one definition for generate's warning, explain and the layout search)."""
    capacity = gpu["memory_gib"]
    return None if capacity is None else capacity - spec.cluster.memory_headroom_gib


def estimate_plan(plan) -> Estimate:
    shape = shape_of(plan)
    layout = layout_of(plan)
    capacity = usable_memory_gib(plan.spec, plan.gpu)
    memory = estimate_memory(shape, layout, capacity)
    others: tuple = ()
    if memory.fits is False:
        reach = nvlink_gpus(plan.gpu, plan.spec.cluster.gpus_per_node)
        others = tuple(alternatives(shape, layout, capacity, reach)[:4])
    hw = hardware_of(plan.gpu, plan.spec.training.precision, plan.spec.cluster.gpus_per_node)
    performance = None if hw is None else estimate_performance(
        shape, layout, hw, plan.global_batch_size)
    params = count_params(shape)
    cross_check = None
    if plan.uses_deepspeed and layout.sharding in ("zero2", "zero3") and plan.pp == 1 and plan.tp == 1:
        cross_check = deepspeed_estimator_bytes(params.total, plan.world_size, int(layout.sharding[-1]),
                                                max(params.per_layer, params.embedding))
    base = plan.gpu.get("uncertainty")
    call_length = plan.model.seq_length // plan.cp
    widened_by = () if performance is None else uncalibrated_shares(performance, call_length)
    band = None if base is None else math.ceil(100 * (base + sum(s for _, s in widened_by))) / 100
    return Estimate(params.total, memory, performance, others, plan.train_tokens, cross_check,
                    params.vocab_padding, band, host_load(plan, shape, layout), widened_by)


# the parts of a step whose model no published run calibrates (estimate/calibration.py fits dense
# runs whose attention calls are at most a kernel curve's longest length): the band widens by
# their share of the step, as if each could be off by its whole
UNCALIBRATED = {
    "moe_dispatch": "MoE dispatch, combine and token reordering (modelled; one published MoE run "
                    "checks them, none fits them)",
    "attention_beyond_calibrated_lengths": f"the attention core at calls longer than the "
                                           f"{LENGTHS[-1]:,} tokens its kernel curves reach",
}


def uncalibrated_shares(p: Performance, call_length: int) -> tuple[tuple[str, float], ...]:
    """(UNCALIBRATED key, share of the step time) for each uncalibrated part the step has."""
    shares = {"moe_dispatch": (p.moe_comm_s + p.moe_permute_s) / p.step_time_s,
              "attention_beyond_calibrated_lengths":
                  p.attention_s / p.step_time_s if call_length > LENGTHS[-1] else 0.0}
    return tuple(sorted(((k, v) for k, v in shares.items() if v >= 0.005), key=lambda kv: -kv[1]))
