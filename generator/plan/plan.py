"""The plan: every number of the run derived once, with the derivation it came from.

``calculator.resolve.resolve(spec)`` computes world and parallel sizes, solves the batch
(batch.py), plans the schedule (schedule.py), runs every rule over the plan's facts and
estimates the plan; this module is the value it builds. Renderers only read the plan.
"""

from __future__ import annotations

import dataclasses
import posixpath
from dataclasses import field
from fractions import Fraction
from typing import Any

from generator import __version__
from generator.dialects import dialect_of, flash_attention
from generator.frameworks import Framework, framework_of
from generator.plan.ramp import BatchRamp
from generator.plan.schedule import Schedule
from generator.plan.torchtitan import registry_dialect
from generator.plan.values import run_io_values, scheduler_state
from generator.shell import ShellRef
from generator.spec.architecture import architecture_line
from generator.spec.model import Spec
from generator.units import slurm_minutes
from generator.values import value

CHAIN_MARGIN_MINUTES = 5  # a chained job's minutes after its training step: the check and sbatch


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
    dp_replicate: int  # the data-parallel group = dp_replicate replicas × dp_shard ranks (HSDP)
    dp_shard: int
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
    warnings: tuple[Any, ...]  # the rules' Findings (rules/registry.py) that are not errors
    derivation: tuple[str, ...]
    # --exit-duration-in-mins: a run longer than its allocation exits and saves before the limit
    exit_duration_minutes: int | None = None
    # allocations the run needs, with the estimate's margin (None: one job): launch.sbatch then runs
    # as a chain, each job submitting the next while the run is unfinished and it saved progress
    allocations: int | None = None
    # a stage of a run in stages: the one schedule of the whole run (plan/stages.py)
    run: RunSchedule | None = None
    # the estimate (estimate/plan.py's Estimate) resolve computed; not part of the plan's
    # identity, and kept by dataclasses.replace (a stage's run schedule does not change it)
    _estimate: Any = field(default=None, repr=False, compare=False)

    @property
    def framework(self) -> str:
        return self.spec.framework

    @property
    def framework_record(self) -> Framework:
        return framework_of(self.spec.framework)

    @property
    def model(self):
        return self.spec.model

    @property
    def uses_deepspeed(self) -> bool:
        return self.framework_record.deepspeed_engine

    @property
    def uses_megatron(self) -> bool:
        return self.framework_record.megatron_arguments

    @property
    def padded_vocab_size(self) -> int:
        """The vocabulary the framework builds: Megatron pads it for tp; the others take the
        model's as it is."""
        return self.model.padded_vocab_size(self.tp) if self.uses_megatron else self.model.vocab_size

    @property
    def overlap_grad_reduce(self) -> bool:
        """The gradient reduction overlaps the backward pass (the files turn it on, the
        step-time estimate counts it)."""
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
        return dialect_of(self.spec)

    @property
    def written_for(self):
        """The dialect the run's arguments are written in: Megatron's, or a config registry's
        (torchtitan's release); None for the Trainer's and plain DeepSpeed."""
        if self.framework_record.config_registry:
            return registry_dialect(self.spec)
        return self.dialect

    def dialect_can(self, capability: str) -> bool:
        return self.dialect is not None and self.dialect.can(capability)

    @property
    def min_lr_ratio(self) -> float:
        """min_lr / lr, the form DeepSpeed's WarmupCosineLR takes (cos_min_ratio): the exact ratio
        of the two values as written (their shortest decimal forms), rounded once to a float, so
        2e-6 / 2e-5 is 0.1, not the float division's 0.09999999999999999. DeepSpeed multiplies it
        back (lr × cos_min_ratio), which gives min_lr within one rounding either way."""
        return float(Fraction(repr(self.spec.training.min_lr)) / Fraction(repr(self.lr)))

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

    @property
    def entry_words(self) -> tuple[str, ...]:
        """What the launcher runs: launch.entrypoint, or ``-m MODULE`` for a framework that is a
        module (torchtitan.train, unless launch.entrypoint names another)."""
        module = self.framework_record.entry_module
        if module is None:
            return (self.spec.launch.entrypoint,)
        given = self.spec.where("launch.entrypoint") != "default"
        return ("-m", self.spec.launch.entrypoint if given else module)

    @property
    def step_folder(self) -> str | None:
        """The prefix of the run's per-step checkpoint folders (NAME-STEP): the Trainer's
        checkpoint-N, torchtitan's step-N; None: a tracker file names the last checkpoint."""
        return "checkpoint" if self.uses_trainer else self.framework_record.step_folders

    @property
    def checkpoint_tracker(self) -> str:
        """What in checkpoint.dir names the last checkpoint (the chain compares it before and after
        each job): Megatron's tracker file (the iteration; Megatron-DeepSpeed writes it too), the
        DeepSpeed engine's `latest` (the tag, global_stepN), the Trainer's checkpoint-N folders."""
        if self.uses_megatron:
            return "latest_checkpointed_iteration.txt"
        return f"{self.step_folder}-*" if self.step_folder else "latest"

    @property
    def chain_final_iteration(self) -> int | None:
        """The iteration the tracker names once the run is done, where it is known (one stage, no
        batch ramp; Megatron counts --train-samples as train_samples // global batch iterations);
        else the job after the last one trains nothing, saves nothing, and submits no successor."""
        if not self.allocations or self.batch_ramp is not None or self.run is not None:
            return None
        if self.uses_megatron and self.schedule.sample_based:
            return self.train_samples // self.global_batch_size
        return self.schedule.train_iters

    @property
    def step_time_limit_minutes(self) -> int | None:
        """A chained run whose entry point has no exit of its own (the Trainer, a plain DeepSpeed
        script): srun --time ends its training step CHAIN_MARGIN_MINUTES before the job's limit, so
        the job can still look for a new checkpoint and submit the next one."""
        limit = slurm_minutes(self.spec.slurm.time)
        if not self.allocations or self.exit_duration_minutes or limit is None:
            return None
        return max(1, limit - CHAIN_MARGIN_MINUTES)

    def estimate(self):
        """Memory and time estimates (generator/estimate), computed by resolve."""
        return self._estimate

    @property
    def checkpoint_format(self) -> str:
        """How the run's checkpoints are written: Megatron-LM's --ckpt-format (the spec's, else the
        release's default); DeepSpeed's engine (Megatron-DeepSpeed, DeepSpeed, the Trainer with
        DeepSpeed); torch.distributed.checkpoint for FSDP2's sharded state (the Trainer's)."""
        fixed = self.framework_record.checkpoint_format
        return fixed or run_io_values(self.spec)["ckpt_format"] or \
            self.dialect.catalogue.get("--ckpt-format").default

    def scheduler_state(self) -> dict[str, Any]:
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
        s, m = self.spec, self.model
        return {
            "generator": f"gen-launch {__version__}",
            "spec": s.source,
            "name": s.name,
            "framework": s.framework,
            "dialect": None if self.written_for is None else {"name": self.written_for.name,
                                                              "release": self.written_for.release,
                                                              "title": str(self.written_for)},
            "cluster": {"nodes": s.cluster.nodes, "gpus_per_node": s.cluster.gpus_per_node,
                        "gpu": s.cluster.gpu, "world_size": self.world_size},
            "parallelism": {"tp": self.tp, "pp": self.pp, "cp": self.cp, "ep": self.ep,
                            "etp": self.etp, "vpp": self.vpp, "dp": self.dp,
                            "dp_replicate": self.dp_replicate, "dp_shard": self.dp_shard,
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
                         "flash_attention": flash_attention(s)},
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



def _plain(value: Any) -> Any:
    """A spec value as plan.json holds it: a run-time word as {"shell": text}, as the spec wrote it."""
    return {"shell": value.text} if isinstance(value, ShellRef) else value


def _section(section: Any) -> dict[str, Any]:
    """A spec section (tokenizer, checkpoint, logging, eval) as plan.json records it."""
    return {f.name: _plain(getattr(section, f.name)) for f in dataclasses.fields(section)}


def overlaps_grad_reduce(framework: str, zero_stage: int | None, pp: int) -> bool:
    """Whether the run's data-parallel gradient reduction overlaps the backward pass, as its
    files ask for it (one definition: the renderers write what this says, the step-time model
    counts it): Megatron-LM with --overlap-grad-reduce; DeepSpeed with ZeRO's overlap_comm,
    except under its pipeline engine, which reduces after the last micro-batch; FSDP always."""
    if not framework_of(framework).deepspeed_engine:
        return True
    return bool(zero_stage) and pp == 1
