"""The calculator: a spec's one consistent plan, checked.

``resolve(spec)`` computes world and parallel sizes, solves the batch, plans the schedule
(plan/), runs every rule over the plan's facts (rules/), checks the plan against its dialect
(dialect.py), estimates it (estimate/) and checks the estimate against the GPU's memory and the
Slurm time limit. It raises PlanError with every rule the spec breaks.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import cache
from typing import Any

from generator import presets
from generator.calculator.dialect import dialect_findings
from generator.dialects import dialect_of, value_fields
from generator.dialects.slurm import enroot_image
from generator.errors import UserError
from generator.estimate.memory import GIB
from generator.estimate.plan import estimate_plan
from generator.executors import executor_of
from generator.frameworks import framework_of
from generator.plan.batch import solve_batch
from generator.plan.derivation import derivation, scaled_lr
from generator.plan.plan import Plan
from generator.plan.ramp import MAX_ENTRIES, BatchRamp, from_rampup, from_schedule
from generator.plan.schedule import plan_schedule
from generator.plan.torchtitan import registry_model
from generator.plan.values import architecture_values
from generator.rules import RULES, Fact, Finding, run_rules
from generator.spec.model import MODEL_FACTS, RUN_LENGTH, Spec

DERIVED = "derived"


class PlanError(UserError):
    """The spec describes no valid run; each finding names its values and a fix."""

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__("\n".join(str(f) for f in findings))
        self.findings = findings

    def __str__(self) -> str:
        return self.message


def _dialect_name(spec: Spec) -> str | None:
    d = dialect_of(spec)
    return None if d is None else d.name


# spec values the rules read under the name of the plan value a table writes them as: each
# one's field comes from the tables (dialects.value_fields), not written here again
TABLE_FACTS = ("tp", "pp", "cp", "ep", "vpp", "first_stage_layers", "last_stage_layers",
               "pipeline_split_embedding", "pipeline_split_loss", "sequence_parallel", "tp_comm_overlap",
               "ep_comm_overlap", "recompute", "recompute_modules",
               "zero_stage", "distributed_optimizer", "megatron_fsdp", "optimizer_states", "main_grads",
               "micro_batch_size",
               "gradient_accumulation_steps", "global_batch_size", "precision", "fp8_recipe", "decay",
               "packing", "lr", "min_lr", "compile")


@cache
def _table_fields() -> tuple[tuple[str, str, str, str], ...]:
    """(fact, its spec field, the field's section and name) for TABLE_FACTS (fields of the
    typed spec: the rules read them)."""
    fields = value_fields()  # the tables' spec:/origin: (one field per value name)
    return tuple((key, fields[key], *fields[key].split(".")) for key in TABLE_FACTS)


def spec_facts(spec: Spec) -> dict[str, Fact]:
    """The values the spec gives (with their locations) and the world size."""
    c, m, p, b = spec.cluster, spec.model, spec.parallelism, spec.batch
    gpu = presets.gpus()[c.gpu]
    record = framework_of(spec.framework)
    values: dict[str, tuple[Any, str]] = {
        "spec": (spec.source, "name"),
        "framework": (spec.framework, "framework"),
        "megatron_dialect": (_dialect_name(spec), record.dialect_setting or "megatron.version"),
        "deepspeed_flag": (record.megatron_arguments and record.deepspeed_engine, "framework"),
        "gpu_vendor": (gpu["vendor"], "cluster.gpu"),
        "nvidia_cc": (gpu["nvidia_cc"], "cluster.gpu"),
        "gpu_has_fp8": (gpu["fp8_tflops"] is not None, "cluster.gpu"),
        "ascend": (gpu["vendor"] == "huawei", "cluster.gpu"),
        "gpu": (c.gpu, "cluster.gpu"),
        "world_size": (c.nodes * c.gpus_per_node, "cluster.nodes"),
        "procs_per_node": (c.gpus_per_node, "cluster.gpus_per_node"),  # GL003's worlds in whole nodes
        "etp": (p.etp or p.tp, "parallelism.etp" if p.etp else "parallelism.tp"),
        "dp_given": (p.dp, "parallelism.dp"),
        "zero_offload": (p.zero_offload, "parallelism.zero_offload"),
        "hybrid_shard": (p.hybrid_shard, "parallelism.hybrid_shard"),
        "launcher": (spec.launch.launcher, "launch.launcher"),
        "tokens_per_step": (b.tokens_per_step, "batch.tokens_per_step"),
        "megatron_version": (spec.megatron.version, "megatron.version"),
        "exports": (spec.launch.env, "launch.env"),
        "slurm_time": (spec.slurm.time, "slurm.time"),
        "partition_max_time": (spec.slurm.max_time, "slurm.max_time"),
    }
    for key in MODEL_FACTS:
        values[key] = (getattr(m, key), f"model.{key}")
    positions = architecture_values(m, p.ep)["position_embedding"]  # YaRN outside MLA: its own type
    if positions != m.position_embedding:
        values["position_embedding"] = (positions, "model.rope_scaling")
    for key, dotted, section, name in _table_fields():
        values[key] = (getattr(getattr(spec, section), name), dotted)
    values["pipeline_layout"] = (p.pipeline_layout, "parallelism.pipeline_layout")
    if p.pipeline_layout is not None:  # the layout's stages are pp × vpp (GL235 holds vpp to them)
        values["vpp_given"] = values["vpp"]
        values["vpp"] = (_layout_vpp(p) or p.vpp, "parallelism.pipeline_layout")
    for key in ("container_image", "container_mounts", "container_workdir", "output", "error"):
        values[key] = (getattr(spec.slurm, key) or None, f"slurm.{key}")
    values["checkpoint_dir"] = (spec.checkpoint.dir, "checkpoint.dir")  # GL311, GL315
    values["ckpt_format"] = (spec.checkpoint.format, "checkpoint.format")  # GL238
    return {k: Fact(v, spec.where(where)) for k, (v, where) in values.items()}


def batch_facts(facts: dict[str, Fact], solved) -> None:
    """The solved batch into the facts the rules check (a token target becomes its own fact)."""
    for key in ("micro_batch_size", "gradient_accumulation_steps", "global_batch_size"):
        if facts[key].value is None and getattr(solved, key) is not None:
            facts[key] = Fact(getattr(solved, key), DERIVED)
    if solved.used_token_target:
        facts["tokens_per_step_target"] = facts.pop("tokens_per_step")


def _layout_vpp(p) -> int | None:
    """The virtual stages a pipeline layout gives each rank (None: no layout, or one GL235
    refuses for this pp)."""
    layout = p.layout()
    if layout is None or len(layout.stages) % p.pp:
        return None
    return layout.vpp(p.pp)


def resolve(spec: Spec) -> Plan:
    """The one consistent plan for ``spec``; PlanError lists every rule it breaks."""
    plan, facts = checked_plan(spec)
    estimate = estimate_plan(plan)
    exit_minutes, timed = _time_limit(plan, estimate)
    allocations = None
    if exit_minutes is not None:
        allocations = chained_jobs(estimate.train_seconds, exit_minutes, estimate.uncertainty)
    elif _resumes_at_the_limit(plan, estimate):  # no exit of its own: each job ends at the limit
        allocations = chained_jobs(estimate.train_seconds, plan.spec.time_limit()[0],
                                   estimate.uncertainty)
    # the added warnings, the exit and the chain do not change the estimate
    return replace(plan, warnings=plan.warnings + _memory_warnings(plan, estimate, facts) + timed,
                   exit_duration_minutes=exit_minutes, allocations=allocations, _estimate=estimate)


def checked_plan(spec: Spec) -> tuple[Plan, dict[str, Fact]]:
    """(the plan for ``spec`` before its estimate, the facts its rules read): every rule and the
    dialect's checks run; PlanError lists what it breaks. What the estimate adds (the memory
    against the GPU's, the time limit) only ``resolve`` checks."""
    c, p, m = spec.cluster, spec.parallelism, spec.model
    if framework_of(spec.framework).config_registry:
        registry_model(spec)  # a model it has no flavor for: refused where the spec names it
    facts = spec_facts(spec)
    world = c.nodes * c.gpus_per_node
    model_parallel = p.tp * p.pp * p.cp
    etp = p.etp or p.tp
    dp = world // model_parallel if world % model_parallel == 0 else None
    solved = schedule = ramp = None
    replicate = shard = None
    if dp is not None:
        facts["dp"] = Fact(dp, DERIVED)
        replicate, shard = p.data_parallel(dp, c.nodes)  # None where the given one does not divide dp
        for key, found in (("dp_replicate", replicate), ("dp_shard", shard)):
            given = getattr(p, key) is not None or (key == "dp_replicate" and p.hybrid_shard)
            where = f"parallelism.{key}" if getattr(p, key) is not None else "parallelism.hybrid_shard"
            if found is not None:
                facts[key] = Fact(found, spec.where(where) if given else DERIVED)
        b = spec.batch
        solved = solve_batch(b.micro_batch_size, b.gradient_accumulation_steps,
                             b.global_batch_size, b.tokens_per_step, dp, m.seq_length)
        batch_facts(facts, solved)
        if None not in (solved.micro_batch_size, solved.gradient_accumulation_steps,
                        solved.global_batch_size):
            ramp = _batch_ramp(spec, solved.global_batch_size, facts)
            schedule = plan_schedule(spec.training, solved.global_batch_size, m.seq_length, ramp)
            given = next(k for k in RUN_LENGTH
                         if getattr(spec.training, k) is not None)
            facts["train_iters"] = Fact(schedule.train_iters, spec.where(f"training.{given}"))
            facts["warmup_iters"] = Fact(schedule.warmup_iters, spec.where("training.warmup"))
            if spec.training.lr_scaling is not None:
                facts["lr"] = Fact(scaled_lr(spec.training.lr_scaling, solved.global_batch_size),
                                   spec.where("training.lr_scaling"))
                facts["lr_scaling_rule"] = Fact(spec.training.lr_scaling.rule,
                                                spec.where("training.lr_scaling.rule"))
    # Export CUDA_DEVICE_MAX_CONNECTIONS=1 exactly where the rule (GL203) would ask for it.
    needs_connections = RULES["GL203"].run(facts) is not None
    if needs_connections:
        facts["cuda_device_max_connections"] = Fact("1", DERIVED)
    findings = list(run_rules(facts))
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        raise PlanError(errors)
    if solved is None or schedule is None or dp is None:  # a rule should have said why
        raise RuntimeError(f"internal error: plan incomplete without a finding ({spec.source})")
    gpu = presets.gpus()[c.gpu]
    tokens = solved.global_batch_size * m.seq_length
    # None: no ZeRO stages (Megatron-FSDP's sharding strategy is one, 3 unless given)
    default_stage = framework_of(spec.framework).default_zero_stage
    plan = Plan(
        spec=spec, gpu=gpu, world_size=world, tp=p.tp, pp=p.pp, cp=p.cp, ep=p.ep, etp=etp,
        vpp=_layout_vpp(p) or p.vpp, dp=dp, dp_replicate=replicate, dp_shard=shard,
        expert_dp=world // (etp * p.ep * p.pp),
        micro_batch_size=solved.micro_batch_size,
        gradient_accumulation_steps=solved.gradient_accumulation_steps,
        global_batch_size=solved.global_batch_size, tokens_per_step=tokens,
        zero_stage=p.zero_stage if p.zero_stage is not None and (default_stage is not None or p.megatron_fsdp)
        else 3 if p.megatron_fsdp else default_stage,
        schedule=schedule,
        cuda_device_max_connections_1=needs_connections,
        lr=facts["lr"].value,
        batch_ramp=ramp,
        batch_how=solved.how,
        notes=tuple(n for n in (solved.rounding, *schedule.notes, _enroot_note(spec), _fp8_recipe_note(spec))
                    if n),
        warnings=tuple(f for f in findings if f.severity != "error"),
        derivation=derivation(spec, world, dp, solved, schedule),
    )
    checked_dialect = dialect_findings(plan)
    refused = [f for f in checked_dialect if f.severity == "error"]
    if refused:
        raise PlanError(refused)
    return replace(plan, warnings=plan.warnings + tuple(checked_dialect)), facts


MAX_CHAINED_JOBS = 500  # below the usual MaxSubmitJobs; a longer run needs a longer time limit
UNCALIBRATED_MARGIN = 0.20  # the estimate's error assumed where no published runs calibrate the GPU


def chained_jobs(train_seconds: float, exit_minutes: int, uncertainty: float | None = None) -> int:
    """Jobs to submit for a run longer than one allocation: enough for the run taking as much
    longer than its estimate as the GPU's calibrated band allows (UNCALIBRATED_MARGIN where none
    does), and at least one more than the estimate needs; at most MAX_CHAINED_JOBS."""
    allocation = exit_minutes * 60
    needed = math.ceil(train_seconds / allocation)
    margin = UNCALIBRATED_MARGIN if uncertainty is None else uncertainty
    return min(MAX_CHAINED_JOBS, max(needed + 1, math.ceil(train_seconds * (1 + margin) / allocation)))


def exit_margin_minutes(limit: int, step_time_s: float) -> int:
    """What the exit before the time limit leaves for the last step, the save and the teardown:
    15 minutes or 5% of the limit, whichever is more, plus two steps."""
    return max(15, -(-limit * 5 // 100)) + -(-int(2 * step_time_s) // 60)


def _resumes_at_the_limit(plan: Plan, estimate) -> bool:
    """A run longer than its allocation whose entry point has no exit of its own (the Trainer, a
    plain DeepSpeed script) but saves to checkpoint.dir: each job of the chain runs until Slurm
    ends it at the limit, and the next resumes from the last checkpoint (GL310 keeps the
    interval within an allocation)."""
    limit, _ = plan.spec.time_limit()
    return (executor_of(plan.spec.launch.executor).chains and plan.dialect is None
            and plan.spec.checkpoint.dir is not None and limit is not None
            and estimate.performance is not None and estimate.train_seconds > limit * 60)


def _time_limit(plan: Plan, estimate) -> tuple[int | None, tuple[Finding, ...]]:
    """The run against its time limit (GL309, GL310: slurm.time, or a Kubernetes job's
    kubernetes.time), and for a Slurm job the minutes after which a run longer than one
    allocation exits and saves (Megatron's --exit-duration-in-mins; with checkpoint.dir the next
    allocation resumes there). Another executor restarts pods but chains no jobs: no exit."""
    limit, setting = plan.spec.time_limit()
    ckpt = plan.spec.checkpoint
    facts = {"checkpoint_dir": Fact(ckpt.dir, plan.spec.where("checkpoint.dir"))}
    exit_minutes = None
    perf = estimate.performance
    if limit is not None and perf is not None:
        time = {"time_limit_minutes": Fact(limit, plan.spec.where(setting)),
                "train_seconds": Fact(estimate.train_seconds, DERIVED),
                "step_time_s": Fact(perf.step_time_s, DERIVED),
                "save_interval": Fact(ckpt.interval, plan.spec.where("checkpoint.interval"))}
        facts.update(time)
        if ckpt.dir is not None and estimate.train_seconds > limit * 60 and plan.dialect is not None \
                and executor_of(plan.spec.launch.executor).chains:
            exit_minutes = max(1, limit - exit_margin_minutes(limit, perf.step_time_s))
    findings = (RULES[code].run(facts) for code in ("GL309", "GL310"))
    return exit_minutes, tuple(f for f in findings if f is not None)


def _memory_warnings(plan: Plan, estimate, facts: dict[str, Fact]) -> tuple[Finding, ...]:
    """GL020: the estimate of the most loaded GPU against its capacity; GL025: the host memory
    of the most loaded node while the run loads against the node's."""
    if estimate.memory.capacity is None:
        return ()
    m = estimate.memory
    parts = {"weights": m.weights, "gradients": m.gradients, "optimizer states": m.optimizer,
             "activations": m.activations, "logits": m.logits}
    largest = sorted(parts.items(), key=lambda kv: -kv[1])[:2]
    advice = f"largest: {', '.join(f'{name} {value / GIB:.1f} GiB' for name, value in largest)}"
    changes = ", ".join(f"{label} → {alt.total / GIB:.1f} GiB" for label, alt in estimate.alternatives)
    if changes:
        advice += f"; try {changes}"
    headroom = plan.spec.cluster.memory_headroom_gib
    values = {"memory_total_gib": Fact(m.total / GIB, facts["micro_batch_size"].source),
              "memory_capacity_gib": Fact(m.capacity / GIB, plan.spec.where(
                  "cluster.memory_headroom_gib" if headroom else "cluster.gpu")),
              "memory_headroom_gib": Fact(headroom or None, plan.spec.where("cluster.memory_headroom_gib")),
              "memory_advice": Fact(advice, DERIVED)}
    if not plan.spec.cluster.allow_oversize:
        far = RULES["GL024"].run(values)
        if far:
            raise PlanError([far])
    findings = [RULES["GL020"].run(values)]
    host = estimate.host
    if host is not None and host.capacity is not None:
        findings.append(RULES["GL025"].run({
            "host_load_gib": Fact(host.bytes_per_node / GIB, DERIVED),
            "host_memory_gib": Fact(host.capacity / GIB, plan.spec.where(host.source)),
            "host_load_how": Fact(host.how, DERIVED)}))
    return tuple(f for f in findings if f is not None)


def _batch_ramp(spec: Spec, global_batch_size: int, facts: dict[str, Fact]) -> BatchRamp | None:
    """The changing batch, and the facts its rules (GL006, GL007, GL022, GL023) check."""
    b = spec.batch
    if b.rampup is None and b.schedule is None:
        return None
    facts["batch_ramp_kind"] = Fact("rampup" if b.rampup else "schedule",
                                    spec.where("batch.rampup" if b.rampup else "batch.schedule"))
    facts["iteration_based"] = Fact(spec.training.train_iters is not None,
                                    spec.where("training.train_iters"))
    if b.rampup is not None:
        facts["rampup"] = Fact(b.rampup, spec.where("batch.rampup"))
        start, increment, samples = b.rampup
        if increment and (global_batch_size - start) % increment == 0 and start <= global_batch_size:
            if (global_batch_size - start) // increment > MAX_ENTRIES:
                raise UserError(f"$.batch.rampup: {(global_batch_size - start) // increment:,} increments of "
                                f"{increment} from {start} to the global batch {global_batch_size}; at most "
                                f"{MAX_ENTRIES:,} (use a larger increment)", spec.location("batch.rampup"))
            return from_rampup(start, increment, samples, global_batch_size)
        return None  # GL006 says why
    facts["batch_schedule"] = Fact(b.schedule, spec.where("batch.schedule"))
    return from_schedule(b.schedule, spec.model.seq_length)


def _fp8_recipe_note(spec: Spec) -> str | None:
    """A recipe the spec gives for a run that is not in FP8: nothing reads it (Megatron reads
    --fp8-recipe only with --fp8-format), so nothing is written for it."""
    given = (spec.doc.data.get("training") or {}).get("fp8_recipe")
    if given is None or spec.training.precision == "fp8":
        return None
    return (f"training.fp8_recipe {given} has no effect: training.precision is "
            f"{spec.training.precision}, not fp8 (nothing is written for it)")


def _enroot_note(spec: Spec) -> str | None:
    image = spec.slurm.container_image
    if not image or enroot_image(image) == image:
        return None
    return (f"slurm.container_image {image} is written {enroot_image(image)}: pyxis reads the registry "
            "before '#' (enroot's form); with '/' it looks for the image on Docker Hub")
