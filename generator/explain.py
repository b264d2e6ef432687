"""Human-readable derivation of a plan, in the seed article's style."""

from __future__ import annotations

from dataclasses import replace

from generator import presets
from generator.estimate.advice import deepseek_llm, kaplan_critical_batch
from generator.estimate.memory import ALLOWANCE_FIXED_GIB, ALLOWANCE_FRACTION, GIB, estimate_memory
from generator.estimate.params import Shape, count_params
from generator.estimate.performance import COMPILE_SPEEDUP
from generator.estimate.plan import UNCALIBRATED, layout_of, shape_of, usable_memory_gib
from generator.executors import POD_SCRIPT, executor_of
from generator.plan.launch import launch_summary
from generator.plan.plan import Plan
from generator.spec.architecture import architecture_line
from generator.units import human


def _fsdp_text(plan: Plan) -> str:
    kind = "full shard (re-shard after forward)" if plan.fsdp_reshard_after_forward else \
        "shard-grad-op (parameters kept for the backward)"
    hybrid = (f", hybrid: sharded over dp_shard {plan.dp_shard} ranks, replicated dp_replicate "
              f"{plan.dp_replicate} times") if plan.dp_replicate > 1 else ""
    return f"; FSDP2 {kind}{hybrid}"


def _data_lines(plan: Plan) -> list[str]:
    d = plan.data_json()
    if not d["packing"] and not d["average_sequence_length"]:
        return []
    lines = ["  packing: documents packed into each sequence, attention and positions reset at each "
             "end of document" if d["packing"] else "  packing: off (one document per sequence, padded)"]
    if d["average_sequence_length"]:
        packed, padded = d["data_tokens_per_step_packed"], d["data_tokens_per_step_padded"]
        lines.append(f"  data tokens per step: {packed:,} packed vs {padded:,} padded at an average "
                     f"document of {d['average_sequence_length']:,} tokens ({padded / packed:.0%} of the "
                     f"step's compute on data when padded)")
    return lines


def _auto_lines(auto) -> list[str]:
    if auto is None:
        return []
    return [f"  {auto.summary}", f"  {auto.why}"]


def explain_text(plan: Plan) -> str:
    s, t = plan.spec, plan.spec.training
    lines = [
        f"{s.name}: {s.framework} on {s.cluster.nodes} × {s.cluster.gpus_per_node} "
        f"{s.cluster.gpu} (from {s.source})",
        "",
        *_model_lines(plan),
        "",
        "Derivation",
        *(f"  {line}" for line in plan.derivation),
        "",
        "Layout",
        f"  tp {plan.tp} × pp {plan.pp} × cp {plan.cp} × dp {plan.dp} = {plan.world_size} GPUs"
        + (f"; vpp {plan.vpp}" if plan.vpp > 1 else "")
        + (f"; ep {plan.ep}, etp {plan.etp}, expert dp {plan.expert_dp}" if s.model.num_experts else "")
        + (_fsdp_text(plan) if plan.framework_record.fsdp else
           f"; ZeRO stage {plan.zero_stage}" if plan.zero_stage is not None else "")
        + ("; distributed optimizer" if s.parallelism.distributed_optimizer else ""),
        f"  {plan.gradient_accumulation_steps} micro-batches of {plan.micro_batch_size} per "
        f"data-parallel rank per step ({plan.batch_how})",
        *_auto_lines(s.auto),
        *_data_lines(plan),
        "",
        "Schedule",
        (f"  {plan.schedule.train_iters:,} steps × {plan.tokens_per_step:,} tokens = "
         if plan.batch_ramp is None else
         f"  {plan.schedule.train_iters:,} steps, {plan.train_samples:,} samples × "
         f"{plan.model.seq_length} = ")
        + f"{plan.train_tokens:,} tokens ≈ {human(plan.train_tokens)}"
        + (f" ({plan.train_samples:,} samples)" if plan.batch_ramp is None and plan.uses_megatron else ""),
        f"  warmup {plan.schedule.warmup_iters:,} steps"
        + (f" ({plan.warmup_samples:,} samples)" if plan.uses_megatron else "") + ", then "
        f"{t.decay} decay from lr {plan.lr:.4g} to {t.min_lr:g} at step {plan.schedule.train_iters:,}",
        *_ramp_lines(plan),
        f"  {_counted_in(plan)}",
    ]
    lines += _launch_lines(plan)
    lines += _estimates(plan)
    lines += _advice(plan)
    if plan.notes:
        lines += ["", "Roundings", *(f"  - {note}" for note in plan.notes)]
    if plan.warnings:
        lines += ["", "Warnings", *(f"  - {warning}" for warning in plan.warnings)]
    return "\n".join(lines) + "\n"


def _counted_in(plan: Plan) -> str:
    """What counts the schedule: Megatron's samples or iterations, the Trainer's optimizer
    steps, DeepSpeed's (its scheduler's) steps."""
    if plan.uses_megatron:
        unit = "samples (--train-samples)" if plan.schedule.sample_based else "iterations (--train-iters)"
        return f"Megatron counts the schedule in {unit}" + \
            ("; DeepSpeed in optimizer steps" if plan.uses_deepspeed else "")
    if plan.uses_trainer:
        return "the Trainer counts the schedule in optimizer steps (--max_steps, --warmup_steps)" + \
            ("; ds_config.json's scheduler in the same steps" if plan.uses_deepspeed else "")
    return "DeepSpeed counts the schedule in optimizer steps"


def fine_tune(plan: Plan) -> bool:
    """A run that starts from trained weights: checkpoint.finetune_from, or a Hugging Face
    Trainer run (its from_pretrained loads the model's weights)."""
    return plan.spec.checkpoint.finetune_from is not None or plan.uses_trainer


def _model_lines(plan: Plan) -> list[str]:
    """The architecture in one line, and the parameters: as published, plus the vocabulary
    padding the framework builds."""
    m = plan.model
    params = count_params(shape_of(plan))
    released = count_params(Shape.of(m)).main  # as a checkpoint holds it
    count = f"  {released:,} parameters"
    more = params.main - params.vocab_padding - released
    if more:
        count += (f" + {more:,} of query norms {plan.dialect} fuses into multi-latent attention's query "
                  "projection (no query latent, qk_layernorm; the checkpoint has none)")
    if params.vocab_padding:
        count += (f" + {params.vocab_padding:,} of vocabulary padding ({m.vocab_size:,} → "
                  f"{plan.padded_vocab_size:,} rows, a multiple of {m.make_vocab_size_divisible_by} × tp "
                  f"{plan.tp})")
    if params.mtp_layers:
        count += (f" + {params.mtp * params.mtp_layers:,} in {params.mtp_layers} MTP layer"
                  f"{'s' if params.mtp_layers > 1 else ''} (sharing the embedding and the output head)")
    if params.total != released:
        count += f" = {params.total:,} built"
    if m.preset:
        published = presets.models()[m.preset].get("published", {})
        if published.get("params") == released and published.get("exact", True):
            count += f"; {m.preset} as released ({published['source']})"
    lines = [f"Model ({m.preset or 'custom'})", f"  {architecture_line(m, plan.ep)}", count]
    if m.num_experts and m.moe_router_expert_bias:
        lines.append(f"  the expert bias ({m.num_experts} per MoE layer) is a buffer Megatron updates, not a "
                     "parameter (a checkpoint stores it as one)")
    return lines


def _advice(plan: Plan) -> list[str]:
    """The advice under its header; no advice, no header."""
    lines = advice_lines(plan)
    return ["", "Advice (published laws and estimates; not applied to the plan)", *lines] if lines else []


def advice_lines(plan: Plan) -> list[str]:
    """Scaling-law advice, labelled; it never changes the plan. A fine-tune gets none of the
    pre-training laws (their batch and learning rate are for training from scratch)."""
    m = plan.model
    laws = [] if fine_tune(plan) else [deepseek_llm(m.num_layers, m.hidden_size, m.seq_length,
                                                    plan.train_tokens)]
    if plan.spec.training.target_loss:
        laws.append(kaplan_critical_batch(plan.spec.training.target_loss))
    lines = []
    for law in laws:
        parts = []
        if law.batch_tokens:
            parts.append(f"batch ≈ {human(round(law.batch_tokens))} tokens "
                         f"(this plan: {human(plan.tokens_per_step)})")
        if law.lr:
            parts.append(f"lr ≈ {law.lr:.2g} (this plan: {plan.lr:.2g})")
        lines.append(f"  {law.law}: {', '.join(parts)}; {law.note}")
    if plan.gpu["vendor"] == "huawei":
        lines.append(f"  Ascend 910B (source article): a micro batch of 4-8 per card (this plan: "
                     f"{plan.micro_batch_size}) and sharded data parallelism (ZeRO-3/FSDP or the "
                     "distributed optimizer) or hybrid parallelism, as HCCL's collectives cost "
                     "more than NCCL's; mind the CANN version")
    micro = _largest_fitting_micro(plan)
    if micro is not None and micro != plan.micro_batch_size:
        per_rank = plan.global_batch_size // plan.dp
        bubble = ", and fewer micro-batches widen the pipeline bubble" if plan.pp > 1 else ""
        lines.append(f"  micro batch: {micro} (accumulation {per_rank // micro}) is the largest that "
                     f"divides the batch and fits the estimate (now {plan.micro_batch_size}, "
                     f"accumulation {plan.gradient_accumulation_steps}); a larger micro batch runs "
                     f"bigger GEMMs but holds more activations{bubble}")
    return lines


def _largest_fitting_micro(plan: Plan) -> int | None:
    capacity = usable_memory_gib(plan.spec, plan.gpu)
    if capacity is None:
        return None
    per_rank = plan.global_batch_size // plan.dp
    shape, layout = shape_of(plan), layout_of(plan)
    fitting = [m for m in range(1, min(per_rank, 64) + 1) if per_rank % m == 0 and estimate_memory(
        shape, replace(layout, micro_batch_size=m, num_microbatches=per_rank // m), capacity).fits]
    return max(fitting) if fitting else None


def _ramp_lines(plan: Plan) -> list[str]:
    ramp = plan.batch_ramp
    if ramp is None:
        return []
    first, last = ramp.entries[0], ramp.entries[-1]
    reach = ramp.steps_for(last[0])
    how = ("--rampup-batch-size " + " ".join(map(str, plan.rampup_flag)) if plan.rampup_flag
           else "--step-batch-size-schedule (token thresholds)")
    return [f"  the global batch changes: {first[1]} → {last[1]} over the first {last[0]:,} samples "
            f"({len(ramp.entries)} sizes, full batch from step {reach:,}); Megatron: {how}"]


def _bar(fraction: float, width: int = 24) -> str:
    filled = max(0, min(width, round(fraction * width)))
    return "█" * filled + "·" * (width - filled)


def _band(plan: Plan, e) -> str:
    base = plan.gpu["uncertainty"]
    text = (f"  throughput ±{e.uncertainty:.0%} (the calibration band of this GPU's generation, ±{base:.0%}: "
            "leave-one-out errors on published runs; docs/estimates.md")
    if not e.widened_by:
        return text + ")"
    return text + "; widened by the share of the step no published run calibrates: " + "; ".join(
        f"{share:.0%} {UNCALIBRATED[what]}" for what, share in e.widened_by) + ")"


def _no_flash_kernel(plan: Plan) -> str:
    why = ("the spec's training.flash_attention" if plan.spec.training.flash_attention is not None
           else f"{plan.dialect.title} has none")
    return (f"  no flash kernel ({why}): the s×s scores are GEMMs at their efficiency, the softmax over "
            "them memory-bound work, and they are stored for the backward unless recomputed")


def _estimates(plan: Plan) -> list[str]:
    e = plan.estimate()
    m = e.memory
    capacity = m.capacity or m.total
    rows = [("weights", m.weights), ("gradients", m.gradients), ("optimizer states", m.optimizer),
            ("activations", m.activations), ("logits", m.logits),
            (f"allowance ({ALLOWANCE_FIXED_GIB:g} GiB + {ALLOWANCE_FRACTION:.0%})", m.other)]
    stage = f", most loaded ({m.stage}) pipeline stage" if plan.pp > 1 else ""
    lines = ["", f"Memory per GPU{stage} ({e.params / 1e9:.2f}B parameters)"]
    lines += [f"  {name:28} {value / GIB:8.2f} GiB  {_bar(value / capacity)}" for name, value in rows]
    if m.capacity is None:
        lines.append(f"  {'total':28} {m.total / GIB:8.2f} GiB  (no capacity for this preset)")
    else:
        verdict = "fits" if m.fits else "DOES NOT FIT"
        lines.append(f"  {'total':28} {m.total / GIB:8.2f} GiB of {m.capacity / GIB:.0f} GiB: {verdict}, "
                     f"headroom {(m.capacity - m.total) / GIB:.1f} GiB")
    for label, alt in e.alternatives:
        lines.append(f"    with {label}: {alt.total / GIB:.1f} GiB" + (" (fits)" if alt.fits else ""))
    if e.host is not None:
        of = "" if e.host.capacity is None else \
            f" of {e.host.capacity / GIB:.0f} GiB: {'fits' if e.host.fits else 'DOES NOT FIT'}"
        lines.append(f"  host memory at load, most loaded node: {e.host.bytes_per_node / GIB:.1f} GiB{of} "
                     f"({e.host.how})")
    p = e.performance
    if p is None:
        return lines
    days = (e.train_seconds or 0) / 86400
    lines += [
        "",
        "Time (FLOPs: matmuls, full attention, logits; fwd+bwd = 3×fwd)",
        f"  {p.model_flops:.3e} model FLOPs per step ({p.hardware_flops:.3e} with recompute)",
        f"  step {p.step_time_s:.2f} s = compute {p.compute_s:.2f} + memory-bound {p.memory_s:.2f} + "
        f"bubble {p.bubble_s:.2f} + tp comm {p.tp_comm_s:.2f} + cp comm {p.cp_comm_s:.2f} + "
        f"dp comm {p.dp_comm_s:.2f} + pp p2p {p.pp_comm_s:.2f}"
        + (f" + ZeRO-3 gathers {p.zero3_gather_s:.2f}" if p.zero3_gather_s else "")
        + (f" + MoE all-to-all {p.moe_comm_s:.2f}" + (" (what its overlap leaves exposed)"
                                                        if plan.spec.parallelism.ep_comm_overlap else "")
           if p.moe_comm_s else "")
        + (f" + optimizer step {p.optimizer_s:.2f}" if p.optimizer_s else ""),
        *([f"  flash attention core {p.attention_s:.2f} s of the compute (at its kernel's speed for "
           f"{plan.model.seq_length // plan.cp:,}-token calls; a causal mask computes half the scores)"]
          if p.attention_s else []),
        *([_no_flash_kernel(plan)] if not layout_of(plan).flash_attention else []),
        *([f"  MoE token reordering for the experts (permute, sort and back): {p.moe_permute_s:.2f} s of "
           f"the memory-bound time"] if p.moe_permute_s else []),
        *([f"  DeepSpeed adding up each micro-batch's gradients (outside the GEMMs): "
           f"{p.grad_accumulation_s:.2f} s of the memory-bound time"] if p.grad_accumulation_s else []),
        *([f"  torch.compile: compute and memory-bound work {COMPILE_SPEEDUP:g}× their eager speed (fitted "
           "on a published eager/compiled pair, docs/estimates.md); the norms' and activation's outputs "
           "recomputed in the backward, not kept"] if layout_of(plan).compiled else []),
        *([f"  FP8 ({plan.spec.training.fp8_recipe} scaling): linear GEMMs {p.fp8_gemm_speedup:.2f}× "
           f"their bf16 speed; casting their operands {p.fp8_casts_s:.2f} s of the memory-bound time"]
          if p.fp8_gemm_speedup else []),
        f"  {p.tokens_per_s:,.0f} tokens/s, {p.tflops_per_gpu:.0f} TFLOP/s per GPU, "
        f"MFU {p.mfu:.1%}, HFU {p.hfu:.1%}",
        _band(plan, e) if e.uncertainty is not None else
        f"  throughput uncertainty unknown: no published {plan.spec.cluster.gpu} runs calibrate it "
        "(its efficiency is assumed)",
        f"  {plan.train_tokens:,} tokens in {days:.1f} days, {days * 24 * p.gpus:,.0f} GPU-hours",
    ]
    lines += _allocations(plan, e.train_seconds or 0, p.step_time_s)
    return lines


def _launch_lines(plan: Plan) -> list[str]:
    """How the run starts: the executor's file, its nodes, the launcher and its rendezvous, restarts."""
    s = plan.spec
    record = executor_of(s.launch.executor)
    nodes = f"{s.cluster.nodes} {'pods' if record.kubernetes else 'nodes'} × {s.cluster.gpus_per_node} " \
            f"{s.cluster.gpu}"
    if record.style == "sbatch":  # the Slurm job: the layout and the allocations say it
        return []
    said = launch_summary(plan)
    runtime = f" on runtime {said['runtime']}" if said["runtime"] else ""
    return ["", "Launch",
            f"  {record.file}: {record.title}{runtime}, {nodes}",
            f"  each runs {POD_SCRIPT} ({plan.procs_per_node} processes per node, {plan.world_size} in all), "
            f"started by {said['launcher']}: {said['rendezvous']}",
            f"  restarts: {record.restarts}" + ("" if s.checkpoint.dir is not None else _NOTHING_SAVED)]


_NOTHING_SAVED = "; but nothing is saved (no checkpoint.dir): each starts anew"


def _allocations(plan, train_seconds: float, step_time_s: float) -> list[str]:
    """How the run fits its time limit: allocations needed, checkpoints, the exit before it."""
    limit, setting = plan.spec.time_limit()
    if limit is None or train_seconds <= limit * 60:
        return []
    ckpt = plan.spec.checkpoint
    section, key = setting.split(".")
    allocations = -(-train_seconds // (limit * 60))
    line = f"  {setting} {getattr(getattr(plan.spec, section), key)}: ≈{allocations:.0f} allocations"
    if ckpt.dir is None:
        return [line + "; nothing is saved (no checkpoint.dir): each would start over"]
    if ckpt.interval:
        line += f"; a checkpoint every {ckpt.interval:,} steps ({ckpt.interval * step_time_s / 3600:.1f} h)"
    if not executor_of(plan.spec.launch.executor).chains:
        line += f"; {executor_of(plan.spec.launch.executor).restarts}"
    elif plan.exit_duration_minutes:
        line += (f"; exits and saves after {plan.exit_duration_minutes:,} minutes (--exit-duration-in-mins), "
                 f"the next allocation resumes from checkpoint.dir; {_chain(plan)}")
    elif plan.allocations:
        line += (f"; each job runs until the limit ends it and the next resumes from the last checkpoint in "
                 f"checkpoint.dir (the entry point must load it: the Trainer's example scripts do); "
                 f"{_chain(plan)}")
    return [line]


def _chain(plan) -> str:
    """What launch.sbatch does with a run longer than its allocation."""
    return ("launch.sbatch runs it as a chain of jobs, at most two jobs queued; each submits the next while "
            f"the run is unfinished and it made progress (scancel --name={plan.spec.name} stops it)")
