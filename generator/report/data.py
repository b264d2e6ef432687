"""The report's chart data: a run's plans (one, or one per stage) and, for a spec with auto
fields, auto-plan's search, turned into plain numbers for the charts and the tables beside them.

Every number the plan or the estimate already has is read from the plan's record (plan.json's
``to_json``), never computed again: the page shows plan.json's numbers. What the report adds is
laid out from the plan's own definitions: the memory of every pipeline stage (the estimate's
``stage_memory``, of which plan.json holds the most loaded), the learning rate, batch and tokens
over the steps (the scheduler's values in plan.json, the batch ramp) and the pipeline's timeline
(pipeline.py)."""

from __future__ import annotations

import hashlib
import math
from typing import Any

from generator.estimate.memory import ALLOWANCE_FIXED_GIB, GIB, Layout, Memory, stage_memory
from generator.estimate.plan import layout_of, shape_of, usable_memory_gib
from generator.explain import advice_lines
from generator.plan.plan import Plan
from generator.report import pipeline
from generator.rules import RULES

CHECKPOINT_TICKS = 400  # checkpoints drawn one by one up to this many
POINTS = 240  # samples of the run's curves (besides the steps where something changes)
MEMORY_PARTS = (("weights", "weights_gib"), ("gradients", "gradients_gib"),
                ("optimizer states", "optimizer_gib"), ("activations", "activations_gib"),
                ("logits", "logits_gib"))
EXPOSED = (("tensor-parallel comm", "tensor_parallel_comm"),
           ("context-parallel comm", "context_parallel_comm"),
           ("data-parallel comm", "data_parallel_comm"), ("pipeline p2p", "pipeline_p2p"),
           ("ZeRO-3 gathers", "zero3_gathers"), ("MoE all-to-all", "moe_all_to_all"))
# plan.json's step_breakdown_s, in the order a step adds them up
STEP_PARTS = (("compute", "compute"), ("memory-bound work", "memory_bound"),
              ("pipeline bubble", "pipeline_bubble"), *EXPOSED, ("optimizer step", "optimizer_step"))


def report_data(plans: list[Plan], search: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything the page draws and lists; ``search``: layouts_data's record of an auto spec."""
    records = [p.to_json() for p in plans]
    return {"summary": [summary(record) for record in records],
            "memory": [memory_data(p, r) for p, r in zip(plans, records, strict=True)],
            "run": run_data(plans, records),
            "step": [step_data(p, r) for p, r in zip(plans, records, strict=True)],
            "layouts": search}


def summary(record: dict[str, Any]) -> dict[str, Any]:
    """The plan at a glance: plan.json's values, each under its path in plan.json."""
    paths = ["name", "framework", "cluster.nodes", "cluster.gpus_per_node", "cluster.gpu",
             "cluster.world_size", "parallelism.tp", "parallelism.pp", "parallelism.cp", "parallelism.dp",
             "parallelism.vpp", "parallelism.ep", "parallelism.zero_stage",
             "parallelism.distributed_optimizer", "batch.micro_batch_size",
             "batch.gradient_accumulation_steps", "batch.global_batch_size", "batch.tokens_per_step",
             "model.architecture", "parameters", "schedule.train_iters", "schedule.train_tokens",
             "schedule.warmup_iters", "schedule.decay", "schedule.lr", "schedule.min_lr",
             "training.precision", "training.recompute", "memory.total_gib", "memory.capacity_gib",
             "memory.fits", "performance.step_time_s", "performance.mfu", "performance.tokens_per_s",
             "performance.train_days", "performance.gpu_hours", "slurm.time", "slurm.allocations"]
    values = {path: lookup(record, path) for path in paths}
    return {"values": values, "warnings": record["warnings"],
            "auto_plan": (record.get("auto_plan") or {}).get("why")}


def lookup(record: dict[str, Any], path: str) -> Any:
    """A value of plan.json by its dotted path (None where a section is absent)."""
    value: Any = record
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def memory_data(plan: Plan, record: dict[str, Any]) -> dict[str, Any]:
    """Memory per GPU of every pipeline stage by component, the capacity, and the advice."""
    layout, shape = layout_of(plan), shape_of(plan)
    capacity = usable_memory_gib(plan.spec, plan.gpu)
    stages = [_stage_row(index, stage_memory(shape, layout, capacity, layers, layout.pp - index,
                                             first=index == 0, last=index == layout.pp - 1))
              for index, layers in enumerate(_stage_layers(layout, shape.num_layers))]
    memory = record["memory"]
    return {"stage": plan.spec.stage, "capacity_gib": memory["capacity_gib"],
            "gpu_memory_gib": plan.gpu["memory_gib"], "headroom_gib": plan.spec.cluster.memory_headroom_gib,
            "plan": {key: memory[key] for key in ("total_gib", "fits", "stage")},
            "stages": stages, "if_it_does_not_fit": record["if_it_does_not_fit"],
            "advice": advice_lines(plan)}


def _stage_layers(layout: Layout, num_layers: int) -> list[float]:
    first, middle, last = layout.stage_layers(num_layers)
    if layout.pp == 1:
        return [num_layers]
    return [first, *[middle] * (layout.pp - 2), last]


def _stage_row(index: int, memory: Memory) -> dict[str, Any]:
    """One stage's memory as plan.json words it (GiB, 2 decimals); the allowance split into the
    fixed buffers (CUDA context, NCCL) and the fragmentation margin it is made of."""
    gib = memory.gib()
    row = {"stage": index, **{key: gib[key] for _, key in MEMORY_PARTS}}
    row["buffers_gib"] = round(min(ALLOWANCE_FIXED_GIB * GIB, memory.other) / GIB, 2)
    row["fragmentation_gib"] = round(max(memory.other - ALLOWANCE_FIXED_GIB * GIB, 0.0) / GIB, 2)
    row["total_gib"] = gib["total_gib"]
    return row


def step_data(plan: Plan, record: dict[str, Any]) -> dict[str, Any] | None:
    """One step: plan.json's breakdown, and the pipeline's timeline (None without a time model)."""
    performance = record["performance"]
    estimate = plan.estimate().performance
    if performance is None or estimate is None:
        return None
    busy = estimate.compute_s + estimate.memory_s
    m = plan.gradient_accumulation_steps
    ops = pipeline.schedule(plan.pp, plan.vpp, m, busy)
    end = max(op.end for op in ops)
    breakdown = performance["step_breakdown_s"]
    return {"stage": plan.spec.stage, "step_time_s": performance["step_time_s"], "breakdown_s": breakdown,
            "timeline": {"pp": plan.pp, "vpp": plan.vpp, "micro_batches": m,
                         "schedule": "interleaved 1F1B" if plan.vpp > 1 else "1F1B" if plan.pp > 1
                         else "gradient accumulation",
                         "busy_s": round(busy, 6), "pipeline_s": round(end, 6),
                         "bubble_s": round(end - busy, 6),
                         "exposed_s": {key: breakdown[key] for _, key in EXPOSED},
                         "optimizer_s": breakdown["optimizer_step"],
                         "operations": len(ops), "order": _digest(ops)}}


def _digest(ops: list[pipeline.Op]) -> str:
    """The schedule's operations in order, as a short hash (a golden of 65,536 operations)."""
    text = ";".join(f"{o.stage},{o.chunk},{o.micro},{'FB'[not o.forward]},{o.start:.9g}" for o in ops)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_data(plans: list[Plan], records: list[dict[str, Any]]) -> dict[str, Any]:
    """The run over its steps: learning rate, global batch and tokens seen; warmup, decay, the
    stages, the allocations a long run is chained across and the checkpoints."""
    walk = _RunWalk(plans)
    schedulers, interval = [r["scheduler"] for r in records], records[0]["checkpoint"]["interval"]
    checkpoints = walk.total // interval if interval else 0
    marks = walk.marks(schedulers[0], schedulers[-1])
    steps = sorted({round(walk.total * k / POINTS) for k in range(POINTS + 1)}
                   | {s for s in (marks["warmup_end_step"], marks["stable_end_step"]) if s is not None}
                   | {b["step"] for b in marks["stages"]} | {s for s, _ in walk.batch_changes()})
    points = [{"step": s, "lr": float(f"{walk.lr(s, schedulers):.6g}"), "global_batch": walk.batch(s),
               "tokens": walk.tokens(s)} for s in steps]
    return {"counts_in": schedulers[0]["counts_in"], "total_steps": walk.total,
            "total_tokens": sum(r["schedule"]["train_tokens"] for r in records),
            "points": points, "batch_changes": walk.batch_changes(), **marks,
            "allocations": [_allocations(p, r, start) for p, r, start in
                            zip(plans, records, walk.starts, strict=True)],
            "checkpoint_interval": interval, "checkpoints": checkpoints,
            "checkpoint_ticks": 0 < checkpoints <= CHECKPOINT_TICKS}


def lr_at(scheduler: dict[str, Any], position: int) -> float:
    """The learning rate after ``position`` scheduler steps (samples for Megatron, optimizer
    steps otherwise): linear warmup from 0, then the decay style to min_lr at decay_steps
    (megatron-core's OptimizerParamScheduler.get_lr; DeepSpeed's WarmupCosineLR and the
    Trainer's cosine_with_min_lr are the same curve; WSD decays linearly, as gen-launch writes
    --lr-wsd-decay-style linear)."""
    lr, low = scheduler["lr"], scheduler["min_lr"]
    warmup, decay = scheduler["warmup_steps"] or 0, scheduler["decay_steps"]
    if warmup > 0 and position <= warmup:
        return lr * position / warmup
    style = scheduler["decay_style"]
    if style == "constant":
        return lr
    if position > decay:
        return low
    if style == "wsd":
        start = decay - (scheduler.get("wsd_decay_steps") or 0)
        coeff = 1.0 if position <= start else 1 - (position - start) / max(decay - start, 1)
    else:
        ratio = (position - warmup) / max(decay - warmup, 1)
        coeff = 1 - ratio if style == "linear" else 0.5 * (math.cos(math.pi * ratio) + 1)
    return low + coeff * (lr - low)


class _RunWalk:
    """Steps of the whole run (its stages one after the other) → consumed samples, tokens and
    the batch, from each plan's batch (constant, or its ramp)."""

    def __init__(self, plans: list[Plan]) -> None:
        self.plans = plans
        self.starts = [sum(p.schedule.train_iters for p in plans[:k]) for k in range(len(plans))]
        self.total = self.starts[-1] + plans[-1].schedule.train_iters
        self.sample_starts = [sum(p.train_samples for p in plans[:k]) for k in range(len(plans))]
        self.token_starts = [sum(p.train_tokens for p in plans[:k]) for k in range(len(plans))]

    def _at(self, step: int) -> tuple[int, Plan, int]:
        """(stage index, its plan, the steps taken in it) at run step ``step``."""
        index = max(k for k, start in enumerate(self.starts) if start <= step)
        plan = self.plans[index]
        return index, plan, min(step - self.starts[index], plan.schedule.train_iters)

    def _samples(self, plan: Plan, steps: int) -> int:
        consumed = plan.batch_ramp.samples_after(steps) if plan.batch_ramp else steps * plan.global_batch_size
        return min(consumed, plan.train_samples)

    def position(self, step: int, scheduler: dict[str, Any]) -> int:
        index, plan, taken = self._at(step)
        if scheduler["counts_in"] == "samples":
            return self.sample_starts[index] + self._samples(plan, taken)
        return step

    def lr(self, step: int, schedulers: list[dict[str, Any]]) -> float:
        """The learning rate at ``step``, by the scheduler of the stage it is in: the run's one
        schedule, or with checkpoint.schedule: spec the stage's own (counted from the run's start,
        as Megatron counts it)."""
        scheduler = schedulers[self._at(step)[0]]
        return lr_at(scheduler, self.position(step, scheduler))

    def tokens(self, step: int) -> int:
        index, plan, taken = self._at(step)
        return self.token_starts[index] + self._samples(plan, taken) * plan.model.seq_length

    def batch(self, step: int) -> int:
        """The global batch of the step after ``step`` (the last step's at the end)."""
        index, plan, taken = self._at(min(step, self.total - 1))
        return plan.batch_ramp.batch_at(self._samples(plan, taken)) if plan.batch_ramp else \
            plan.global_batch_size

    def batch_changes(self) -> list[tuple[int, int]]:
        """(first step, global batch) wherever the batch changes: a ramp's entries, a stage's."""
        out: list[tuple[int, int]] = []
        for start, plan in zip(self.starts, self.plans, strict=True):
            entries = plan.batch_ramp.entries if plan.batch_ramp else ((0, plan.global_batch_size),)
            for threshold, size in entries:
                step = start + (plan.batch_ramp.steps_for(threshold) if threshold else 0)
                if not out or out[-1][1] != size:
                    out.append((step, size))
        return out

    def step_of(self, position: int, scheduler: dict[str, Any]) -> int:
        """The first run step whose scheduler position reaches ``position``."""
        low, high = 0, self.total
        while low < high:
            mid = (low + high) // 2
            if self.position(mid, scheduler) >= position:
                high = mid
            else:
                low = mid + 1
        return low

    def marks(self, first: dict[str, Any], last: dict[str, Any]) -> dict[str, Any]:
        """Where the warmup ends (the first stage's scheduler), where a WSD schedule's stable
        phase ends (the last stage's), and the stages."""
        warmup = first["warmup_steps"] or 0
        wsd = last.get("wsd_decay_steps")
        stable = None if wsd is None else self.step_of(last["decay_steps"] - wsd, last)
        names = [p.spec.stage for p in self.plans]
        return {"warmup_end_step": self.step_of(warmup, first) if warmup else None,
                "stable_end_step": stable, "decay": last["decay_style"],
                "stages": [{"name": name, "step": start}
                           for name, start in zip(names, self.starts, strict=True) if name is not None]}


def _allocations(plan: Plan, record: dict[str, Any], start: int) -> dict[str, Any] | None:
    """The allocations a run longer than its Slurm time limit is chained across: the steps one
    allocation trains (its minutes at the estimated step time) and where each would end."""
    minutes = plan.exit_duration_minutes or plan.step_time_limit_minutes
    performance = record["performance"]
    if not plan.allocations or not minutes or performance is None:
        return None
    per = max(1, int(minutes * 60 // performance["step_time_s"]))
    ends = [start + k * per for k in range(1, -(-plan.schedule.train_iters // per))]
    return {"stage": plan.spec.stage, "minutes": minutes, "steps_each": per, "boundaries": ends,
            "chained_jobs": record["slurm"]["allocations"]}


def layouts_data(result, chosen: dict[str, Any], candidate_json) -> dict[str, Any]:
    """Auto-plan's ranking (step time against memory), the chosen layout marked, and how
    many layouts each rule rejected (the search counts them; it keeps no estimate of those)."""
    ranked = [{**candidate_json(c), "rank": k} for k, c in enumerate(result.ranked, start=1)]
    for row in ranked:
        row["chosen"] = all(row.get(path.split(".")[1]) == value for path, value in chosen.items()
                            if path.split(".")[1] in row)
    return {"limit_gib": None if result.limit_gib is None else round(result.limit_gib, 2),
            "margin_gib": round(result.margin_gib, 2), "layouts": result.layouts,
            "evaluated": result.evaluated, "fitting": result.fitting, "ranked": ranked,
            "rejected": [{"code": code, "name": RULES[code].name, "summary": RULES[code].summary,
                          "count": count} for code, count in result.rejected.most_common()],
            "refused": [{"code": code, "name": RULES[code].name, "count": count}
                        for code, count in result.refused.most_common()]}
