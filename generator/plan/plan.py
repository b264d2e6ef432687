"""The plan: every number of the run derived once, with the derivation it came from.

``resolve(spec)`` computes world and parallel sizes, solves the batch, plans the schedule, then
runs every rule over the plan's facts. Renderers only read the plan.
"""

from __future__ import annotations

import dataclasses
import math
import posixpath
from dataclasses import field, replace
from fractions import Fraction
from typing import Any

from generator import __version__, presets
from generator.errors import UserError
from generator.plan.batch import solve_batch
from generator.plan.derivation import derivation, scaled_lr
from generator.plan.ramp import MAX_ENTRIES, BatchRamp, from_rampup, from_schedule
from generator.plan.schedule import Schedule, plan_schedule
from generator.rules import RULES, Fact, Finding, run_rules
from generator.spec.architecture import architecture_line
from generator.spec.model import MODEL_FACTS, Spec
from generator.units import slurm_minutes
from generator.values import value

DERIVED = "derived"


class PlanError(UserError):
    """The spec describes no valid run; each finding names its values and a fix."""

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__("\n".join(str(f) for f in findings))
        self.findings = findings

    def __str__(self) -> str:
        return self.message


@value
class RunSchedule:
    """The schedule a stage shares with the whole run, in samples: one warmup and one decay over
    the whole run; each stage trains to its own end (cumulative samples), and a later stage takes
    the scheduler's values from the checkpoint it resumes (Megatron asserts them equal otherwise,
    and its weight-decay steps are --train-samples, which differ between stages)."""

    end_samples: int  # where this stage ends in the run (its --train-samples)
    decay_samples: int  # the whole run
    warmup_samples: int
    wsd_decay_samples: int | None
    resumes: bool  # a stage after the first: --use-checkpoint-opt_param-scheduler


@value
class Plan:
    """The one consistent plan a spec resolves to: every number the files repeat."""

    spec: Spec
    gpu: dict[str, Any]
    world_size: int
    tp: int
    pp: int
    cp: int
    ep: int
    etp: int
    vpp: int
    dp: int
    expert_dp: int
    micro_batch_size: int
    gradient_accumulation_steps: int
    global_batch_size: int
    tokens_per_step: int
    zero_stage: int | None
    schedule: Schedule
    cuda_device_max_connections_1: bool
    lr: float
    batch_ramp: BatchRamp | None
    batch_how: str
    notes: tuple[str, ...]
    warnings: tuple[Finding, ...]
    derivation: tuple[str, ...]
    # --exit-duration-in-mins: a run longer than its allocation exits and saves before the limit
    exit_duration_minutes: int | None = None
    # jobs launch.sbatch submits as one --dependency=singleton chain (None: one job)
    allocations: int | None = None
    # a stage of a run in stages: the one schedule of the whole run (plan/stages.py)
    run: RunSchedule | None = None
    # the estimate, once computed (see estimate()); not part of the plan's identity
    _estimate: Any = field(default=None, init=False, repr=False, compare=False)

    @property
    def framework(self) -> str:
        return self.spec.framework

    @property
    def model(self):
        return self.spec.model

    @property
    def uses_deepspeed(self) -> bool:
        return self.framework in ("deepspeed", "megatron-deepspeed")

    @property
    def uses_megatron(self) -> bool:
        return self.framework in ("megatron-lm", "megatron-deepspeed")

    @property
    def padded_vocab_size(self) -> int:
        """The vocabulary the framework builds: Megatron pads it for tp; the others take the
        model's as it is."""
        return self.model.padded_vocab_size(self.tp) if self.uses_megatron else self.model.vocab_size

    @property
    def overlap_grad_reduce(self) -> bool:
        """The gradient reduction overlaps the backward pass (the files turn it on, the
        step-time estimate counts it)."""
        from generator.estimate.plan import overlaps_grad_reduce

        return overlaps_grad_reduce(self.framework, self.zero_stage, self.pp)

    @property
    def uses_trainer(self) -> bool:
        """Hugging Face TrainingArguments (trainer_args.sh): FSDP2, and DeepSpeed through accelerate."""
        return self.spec.uses_trainer

    @property
    def fsdp_reshard_after_forward(self) -> bool:
        """FSDP2's form of the sharding strategy: ZeRO-3-like full shard re-shards the parameters
        after the forward pass, ZeRO-2-like shard-grad-op keeps them until the backward."""
        return self.zero_stage == 3

    @property
    def fsdp_trainer_config(self) -> dict[str, Any]:
        """The Trainer's --fsdp_config for FSDP2 (without accelerate's config file): as the
        accelerate config, each node's local rank 0 alone loads the pretrained weights
        (cpu_ram_efficient_loading; the others start empty and receive them)."""
        return {"fsdp_version": 2, "reshard_after_forward": self.fsdp_reshard_after_forward,
                "auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "cpu_ram_efficient_loading": True,
                "activation_checkpointing": self.spec.training.recompute != "none",
                "offload_params": self.spec.parallelism.zero_offload != "none"}

    @property
    def hf_scheduler(self) -> str:
        """The Trainer's lr_scheduler_type for the spec's decay."""
        decay = self.spec.training.decay
        return {"cosine": "cosine_with_min_lr" if self.spec.training.min_lr else "cosine",
                "linear": "linear", "constant": "constant_with_warmup",
                "wsd": "warmup_stable_decay"}[decay]

    @property
    def dialect(self):
        """The dialect the Megatron arguments are written in (None without Megatron arguments)."""
        from generator.dialects import dialect_of

        return dialect_of(self.spec)

    def dialect_can(self, capability: str) -> bool:
        return self.dialect is not None and self.dialect.can(capability)

    @property
    def min_lr_ratio(self) -> float:
        """min_lr / lr, the form DeepSpeed's WarmupCosineLR takes (cos_min_ratio)."""
        return self.spec.training.min_lr / self.lr

    @property
    def log_dirs(self) -> tuple[str, ...]:
        """Folders of the job's --output/--error files, which must exist before Slurm starts it."""
        paths = (self.spec.slurm.output, self.spec.slurm.error)
        return tuple(dict.fromkeys(d for p in paths if p and (d := posixpath.dirname(p))))

    @property
    def train_samples(self) -> int:
        if self.schedule.train_samples is not None:
            return self.schedule.train_samples
        return self.schedule.train_iters * self.global_batch_size

    @property
    def warmup_samples(self) -> int:
        if self.schedule.warmup_samples is not None:
            return self.schedule.warmup_samples
        return self.schedule.warmup_iters * self.global_batch_size

    @property
    def wsd_decay_iters(self) -> int:
        """The final decay phase of a WSD schedule, in whole steps."""
        return int(self.spec.training.wsd_decay * self.schedule.train_iters + Fraction(1, 2))

    @property
    def wsd_decay_samples(self) -> int:
        if self.batch_ramp is None:
            return self.wsd_decay_iters * self.global_batch_size
        return int(self.spec.training.wsd_decay * self.train_samples + Fraction(1, 2))

    @property
    def rampup_flag(self) -> tuple[int, int, int] | None:
        """--rampup-batch-size S I R, for Megatron versions that still honour it."""
        ramp = self.batch_ramp
        if ramp is None or ramp.kind != "rampup" or not self.dialect_can("rampup"):
            return None
        return ramp.rampup

    @property
    def step_schedule(self) -> str | None:
        """--step-batch-size-schedule (token thresholds), for Megatron core 0.18 and later."""
        ramp = self.batch_ramp
        if ramp is None or self.rampup_flag is not None:
            return None
        return ramp.step_schedule_text(self.model.seq_length)

    @property
    def train_tokens(self) -> int:
        return self.train_samples * self.model.seq_length

    @property
    def procs_per_node(self) -> int:
        return self.spec.cluster.gpus_per_node

    @property
    def local_devices(self) -> str:
        """The accelerators of one node, for ASCEND_RT_VISIBLE_DEVICES: 0,1,…,n−1."""
        return ",".join(str(k) for k in range(self.spec.cluster.gpus_per_node))

    @property
    def tasks_per_node(self) -> int:
        """Slurm tasks per node: one per GPU for srun, one launcher per node otherwise."""
        return self.procs_per_node if self.spec.launch.launcher == "srun" else 1

    def facts(self) -> dict[str, Fact]:
        """Every plan value under the fact names the readers use (source: the plan)."""
        s, m, p = self.spec, self.model, self.spec.parallelism
        values: dict[str, Any] = {
            "framework": s.framework, "gpu": s.cluster.gpu, "nodes": s.cluster.nodes,
            "launcher_nodes": s.cluster.nodes, "world_size": self.world_size,
            "procs_per_node": self.procs_per_node, "tasks_per_node": self.tasks_per_node,
            "tp": self.tp, "pp": self.pp, "cp": self.cp, "ep": self.ep, "etp": self.etp,
            "vpp": self.vpp, "dp": self.dp,
            "micro_batch_size": self.micro_batch_size,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
            "global_batch_size": self.global_batch_size,
            "sequence_parallel": p.sequence_parallel,
            "distributed_optimizer": p.distributed_optimizer,
            "zero_stage": self.zero_stage, "precision": s.training.precision,
            "train_samples": self.train_samples, "warmup_samples": self.warmup_samples,
        }
        if self.batch_ramp is None:  # with a changing batch, the samples are what is exact
            values.update(train_iters=self.schedule.train_iters,
                          warmup_iters=self.schedule.warmup_iters)
        if self.gpu["gres"]:
            values["gpus_per_node"] = s.cluster.gpus_per_node
        for key in ("first_stage_layers", "last_stage_layers"):
            if getattr(p, key) is not None:
                values[key] = getattr(p, key)
        if s.data.packing and self.uses_megatron:
            values.update(reset_position_ids=True, reset_attention_mask=True, eod_mask_loss=True)
        for key in MODEL_FACTS:
            values[key] = getattr(m, key)
        return {k: Fact(v, "plan") for k, v in values.items()}

    def estimate(self):
        """Memory and time estimates (generator/estimate), computed once per plan."""
        if self._estimate is None:
            from generator.estimate.plan import estimate_plan

            object.__setattr__(self, "_estimate", estimate_plan(self))
        return self._estimate

    @property
    def checkpoint_format(self) -> str:
        """How the run's checkpoints are written: Megatron-LM's --ckpt-format (the spec's, else the
        release's default); DeepSpeed's engine (Megatron-DeepSpeed, DeepSpeed, the Trainer with
        DeepSpeed); torch.distributed.checkpoint for FSDP2's sharded state (the Trainer's)."""
        if self.framework == "megatron-lm":
            return self.spec.checkpoint.format or self.dialect.catalogue.get("--ckpt-format").default
        return "torch_dcp" if self.framework == "fsdp" else "deepspeed"

    def scheduler_state(self) -> dict[str, Any]:
        from generator.dialects.arguments import scheduler_state

        return scheduler_state(self)

    def data_json(self) -> dict[str, Any]:
        """The data read, packing, and the tokens of data per step with and without packing."""
        d, seq = self.spec.data, self.model.seq_length
        out: dict[str, Any] = {"paths": [{"path": _plain(p[0]), "weight": p[1]} if isinstance(p, tuple)
                                         else _plain(p) for p in d.paths],
                               "split": d.split, "cache_path": _plain(d.cache_path), "mock": d.mock,
                               "packing": d.packing, "average_sequence_length": d.average_sequence_length}
        if d.average_sequence_length:
            per_sequence = min(d.average_sequence_length, seq)
            out["data_tokens_per_step_packed"] = self.global_batch_size * seq
            out["data_tokens_per_step_padded"] = self.global_batch_size * per_sequence
        return out

    def to_json(self) -> dict[str, Any]:
        from generator.dialects.arguments import run_io_values

        s, m = self.spec, self.model
        return {
            "generator": f"gen-launch {__version__}",
            "spec": s.source,
            "name": s.name,
            "framework": s.framework,
            "dialect": None if self.dialect is None else {"name": self.dialect.name,
                                                          "release": self.dialect.release,
                                                          "title": str(self.dialect)},
            "cluster": {"nodes": s.cluster.nodes, "gpus_per_node": s.cluster.gpus_per_node,
                        "gpu": s.cluster.gpu, "world_size": self.world_size},
            "parallelism": {"tp": self.tp, "pp": self.pp, "cp": self.cp, "ep": self.ep,
                            "etp": self.etp, "vpp": self.vpp, "dp": self.dp,
                            "first_stage_layers": s.parallelism.first_stage_layers,
                            "last_stage_layers": s.parallelism.last_stage_layers,
                            "expert_dp": self.expert_dp,
                            "sequence_parallel": s.parallelism.sequence_parallel,
                            "zero_stage": self.zero_stage,
                            "zero_offload": s.parallelism.zero_offload,
                            "distributed_optimizer": s.parallelism.distributed_optimizer},
            "batch": {"micro_batch_size": self.micro_batch_size,
                      "gradient_accumulation_steps": self.gradient_accumulation_steps,
                      "global_batch_size": self.global_batch_size,
                      "tokens_per_step": self.tokens_per_step,
                      "num_microbatches": self.gradient_accumulation_steps,
                      "solved_from": self.batch_how,
                      "changing": None if self.batch_ramp is None else {
                          "kind": self.batch_ramp.kind,
                          "from_sample_global_batch": [list(e) for e in self.batch_ramp.entries],
                          "megatron_flag": "--rampup-batch-size" if self.rampup_flag
                          else "--step-batch-size-schedule"}},
            "model": {**{k: v for k, v in dataclasses.asdict(m).items()
                         if m.num_experts or not k.startswith("moe_")},
                      **({"moe_token_dispatcher": m.token_dispatcher(self.ep)} if m.num_experts else {}),
                      "architecture": architecture_line(m, self.ep),
                      "padded_vocab_size": self.padded_vocab_size},
            "schedule": {"train_iters": self.schedule.train_iters,
                         "train_samples": self.train_samples,
                         "train_tokens": self.train_tokens,
                         "warmup_iters": self.schedule.warmup_iters,
                         "warmup_samples": self.warmup_samples,
                         "megatron_counts_in": "samples" if self.schedule.sample_based else "iterations",
                         "decay": s.training.decay, "lr": self.lr, "min_lr": s.training.min_lr},
            "training": {"precision": s.training.precision, "recompute": s.training.recompute,
                         "flash_attention": s.training.flash_attention},
            "data": self.data_json(),
            "tokenizer": _section(s.tokenizer),
            "checkpoint": {**_section(s.checkpoint), "format": self.checkpoint_format},
            "logging": {**_section(s.logging), "wandb_run_name": run_io_values(s)["wandb_exp_name"]},
            "eval": _section(s.eval),
            "scheduler": self.scheduler_state(),
            "slurm": {"time": s.slurm.time, "exit_duration_minutes": self.exit_duration_minutes,
                      "allocations": self.allocations},
            "launch": {"launcher": s.launch.launcher, "trainer": self.uses_trainer,
                       "tasks_per_node": self.tasks_per_node,
                       "procs_per_node": self.procs_per_node,
                       "cuda_device_max_connections_1": self.cuda_device_max_connections_1},
            **({"auto_plan": {"searched": list(s.auto.fields), "chosen": s.auto.chosen,
                              "candidates_evaluated": s.auto.evaluated, "fitting": s.auto.fitting,
                              "runner_up": s.auto.runner_up, "why": s.auto.why}}
               if s.auto is not None else {}),
            **self.estimate().to_json(),
            "derivation": list(self.derivation),
            "notes": list(self.notes),
            "warnings": [str(w) for w in self.warnings],
        }


def _dialect_name(spec: Spec) -> str | None:
    from generator.dialects import dialect_of

    d = dialect_of(spec)
    return None if d is None else d.name


def spec_facts(spec: Spec) -> dict[str, Fact]:
    """The values the spec gives (with their locations) and the world size."""
    c, m, p, b, t = spec.cluster, spec.model, spec.parallelism, spec.batch, spec.training
    gpu = presets.gpus()[c.gpu]
    values: dict[str, tuple[Any, str]] = {
        "spec": (spec.source, "name"),
        "framework": (spec.framework, "framework"),
        "megatron_dialect": (_dialect_name(spec), "megatron.fork" if spec.framework == "megatron-deepspeed"
                             else "megatron.version"),
        "deepspeed_flag": (spec.framework == "megatron-deepspeed", "framework"),
        "gpu_vendor": (gpu["vendor"], "cluster.gpu"),
        "nvidia_cc": (gpu["nvidia_cc"], "cluster.gpu"),
        "gpu_has_fp8": (gpu["fp8_tflops"] is not None, "cluster.gpu"),
        "ascend": (gpu["vendor"] == "huawei", "cluster.gpu"),
        "gpu": (c.gpu, "cluster.gpu"),
        "world_size": (c.nodes * c.gpus_per_node, "cluster.nodes"),
        "tp": (p.tp, "parallelism.tp"), "pp": (p.pp, "parallelism.pp"),
        "cp": (p.cp, "parallelism.cp"), "ep": (p.ep, "parallelism.ep"),
        "etp": (p.etp or p.tp, "parallelism.etp" if p.etp else "parallelism.tp"),
        "vpp": (p.vpp, "parallelism.vpp"),
        "first_stage_layers": (p.first_stage_layers, "parallelism.first_stage_layers"),
        "pipeline_split_embedding": (p.account_for_embedding_in_pipeline_split,
                                     "parallelism.account_for_embedding_in_pipeline_split"),
        "pipeline_split_loss": (p.account_for_loss_in_pipeline_split,
                                "parallelism.account_for_loss_in_pipeline_split"),
        "last_stage_layers": (p.last_stage_layers, "parallelism.last_stage_layers"),
        "dp_given": (p.dp, "parallelism.dp"),
        "sequence_parallel": (p.sequence_parallel, "parallelism.sequence_parallel"),
        "tp_comm_overlap": (p.tp_comm_overlap, "parallelism.tp_comm_overlap"),
        "zero_stage": (p.zero_stage, "parallelism.zero_stage"),
        "distributed_optimizer": (p.distributed_optimizer, "parallelism.distributed_optimizer"),
        "optimizer_states": (t.optimizer_states, "training.optimizer_states"),
        "main_grads": (t.main_grads, "training.main_grads"),
        "zero_offload": (p.zero_offload, "parallelism.zero_offload"),
        "hybrid_shard": (p.hybrid_shard, "parallelism.hybrid_shard"),
        "launcher": (spec.launch.launcher, "launch.launcher"),
        "micro_batch_size": (b.micro_batch_size, "batch.micro_batch_size"),
        "gradient_accumulation_steps": (b.gradient_accumulation_steps,
                                        "batch.gradient_accumulation_steps"),
        "global_batch_size": (b.global_batch_size, "batch.global_batch_size"),
        "tokens_per_step": (b.tokens_per_step, "batch.tokens_per_step"),
        "precision": (t.precision, "training.precision"),
        "fp8_recipe": (t.fp8_recipe, "training.fp8_recipe"),
        "megatron_version": (spec.megatron.version, "megatron.version"),
        "decay": (t.decay, "training.decay"),
        "packing": (spec.data.packing, "data.packing"),
        "exports": (spec.launch.env, "launch.env"),
        "lr": (t.lr, "training.lr"), "min_lr": (t.min_lr, "training.min_lr"),
        "slurm_time": (spec.slurm.time, "slurm.time"),
        "partition_max_time": (spec.slurm.max_time, "slurm.max_time"),
    }
    for key in MODEL_FACTS:
        values[key] = (getattr(m, key), f"model.{key}")
    for key in ("container_image", "container_mounts", "container_workdir", "output", "error"):
        values[key] = (getattr(spec.slurm, key) or None, f"slurm.{key}")
    values["checkpoint_dir"] = (spec.checkpoint.dir, "checkpoint.dir")  # GL311, GL315
    return {k: Fact(v, spec.where(where)) for k, (v, where) in values.items()}


def batch_facts(facts: dict[str, Fact], solved) -> None:
    """The solved batch into the facts the rules check (a token target becomes its own fact)."""
    for key in ("micro_batch_size", "gradient_accumulation_steps", "global_batch_size"):
        if facts[key].value is None and getattr(solved, key) is not None:
            facts[key] = Fact(getattr(solved, key), DERIVED)
    if solved.used_token_target:
        facts["tokens_per_step_target"] = facts.pop("tokens_per_step")


def resolve(spec: Spec) -> Plan:
    """The one consistent plan for ``spec``; PlanError lists every rule it breaks."""
    c, p, m = spec.cluster, spec.parallelism, spec.model
    facts = spec_facts(spec)
    world = c.nodes * c.gpus_per_node
    model_parallel = p.tp * p.pp * p.cp
    etp = p.etp or p.tp
    dp = world // model_parallel if world % model_parallel == 0 else None
    solved = schedule = ramp = None
    if dp is not None:
        facts["dp"] = Fact(dp, DERIVED)
        b = spec.batch
        solved = solve_batch(b.micro_batch_size, b.gradient_accumulation_steps,
                             b.global_batch_size, b.tokens_per_step, dp, m.seq_length)
        batch_facts(facts, solved)
        if None not in (solved.micro_batch_size, solved.gradient_accumulation_steps,
                        solved.global_batch_size):
            ramp = _batch_ramp(spec, solved.global_batch_size, facts)
            schedule = plan_schedule(spec.training, solved.global_batch_size, m.seq_length, ramp)
            given = next(k for k in ("train_iters", "train_samples", "train_tokens")
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
    is_deepspeed = spec.framework in ("deepspeed", "megatron-deepspeed")
    default_stage = 3 if spec.framework == "fsdp" else 0  # FSDP: full shard
    plan = Plan(
        spec=spec, gpu=gpu, world_size=world, tp=p.tp, pp=p.pp, cp=p.cp, ep=p.ep, etp=etp,
        vpp=p.vpp, dp=dp, expert_dp=world // (etp * p.ep * p.pp),
        micro_batch_size=solved.micro_batch_size,
        gradient_accumulation_steps=solved.gradient_accumulation_steps,
        global_batch_size=solved.global_batch_size, tokens_per_step=tokens,
        zero_stage=(p.zero_stage if p.zero_stage is not None else default_stage)
        if is_deepspeed or spec.framework == "fsdp" else None,
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
    from generator.dialects.check import dialect_findings

    checked_dialect = dialect_findings(plan)
    refused = [f for f in checked_dialect if f.severity == "error"]
    if refused:
        raise PlanError(refused)
    plan = replace(plan, warnings=plan.warnings + tuple(checked_dialect))
    estimate = plan.estimate()
    exit_minutes, timed = _time_limit(plan, estimate)
    allocations = None
    if exit_minutes is not None:
        allocations = chained_jobs(estimate.train_seconds, exit_minutes, estimate.uncertainty)
    elif _resumes_at_the_limit(plan, estimate):  # no exit of its own: each job ends at the limit
        allocations = chained_jobs(estimate.train_seconds, slurm_minutes(plan.spec.slurm.time),
                                   estimate.uncertainty)
    checked = replace(plan, warnings=plan.warnings + _memory_warnings(plan, estimate, facts) + timed,
                      exit_duration_minutes=exit_minutes, allocations=allocations)
    object.__setattr__(checked, "_estimate", estimate)  # the added warnings do not change it
    return checked



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
    limit = slurm_minutes(plan.spec.slurm.time)
    return (plan.dialect is None and plan.spec.checkpoint.dir is not None and limit is not None
            and estimate.performance is not None and estimate.train_seconds > limit * 60)


def _time_limit(plan: Plan, estimate) -> tuple[int | None, tuple[Finding, ...]]:
    """The run against its Slurm time limit (GL309, GL310), and the minutes after which a run
    longer than one allocation exits and saves (Megatron's --exit-duration-in-mins; with
    checkpoint.dir the next allocation resumes there)."""
    limit = slurm_minutes(plan.spec.slurm.time)
    ckpt = plan.spec.checkpoint
    facts = {"checkpoint_dir": Fact(ckpt.dir, plan.spec.where("checkpoint.dir"))}
    exit_minutes = None
    perf = estimate.performance
    if limit is not None and perf is not None:
        time = {"time_limit_minutes": Fact(limit, plan.spec.where("slurm.time")),
                "train_seconds": Fact(estimate.train_seconds, DERIVED),
                "step_time_s": Fact(perf.step_time_s, DERIVED),
                "save_interval": Fact(ckpt.interval, plan.spec.where("checkpoint.interval"))}
        facts.update(time)
        if ckpt.dir is not None and estimate.train_seconds > limit * 60 and plan.dialect is not None:
            exit_minutes = max(1, limit - exit_margin_minutes(limit, perf.step_time_s))
    findings = (RULES[code].run(facts) for code in ("GL309", "GL310"))
    return exit_minutes, tuple(f for f in findings if f is not None)


def _memory_warnings(plan: Plan, estimate, facts: dict[str, Fact]) -> tuple[Finding, ...]:
    """GL020: the estimate of the most loaded GPU against its capacity; GL025: the host memory
    of the most loaded node while the run loads against the node's."""
    from generator.estimate.memory import GIB

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


def _plain(value: Any) -> Any:
    """A spec value as plan.json holds it: a run-time word as {"shell": text}, as the spec wrote it."""
    from generator.spec.model import ShellRef

    return {"shell": value.text} if isinstance(value, ShellRef) else value


def _section(section: Any) -> dict[str, Any]:
    """A spec section (tokenizer, checkpoint, logging, eval) as plan.json records it."""
    return {f.name: _plain(getattr(section, f.name)) for f in dataclasses.fields(section)}


def _fp8_recipe_note(spec: Spec) -> str | None:
    """A recipe the spec gives for a run that is not in FP8: nothing reads it (Megatron reads
    --fp8-recipe only with --fp8-format), so nothing is written for it."""
    given = (spec.doc.data.get("training") or {}).get("fp8_recipe")
    if given is None or spec.training.precision == "fp8":
        return None
    return (f"training.fp8_recipe {given} has no effect: training.precision is "
            f"{spec.training.precision}, not fp8 (nothing is written for it)")


def _enroot_note(spec: Spec) -> str | None:
    from generator.dialects.slurm import enroot_image

    image = spec.slurm.container_image
    if not image or enroot_image(image) == image:
        return None
    return (f"slurm.container_image {image} is written {enroot_image(image)}: pyxis reads the registry "
            "before '#' (enroot's form); with '/' it looks for the image on Docker Hub")
