"""One record per framework and per Megatron argument dialect: what it is, which groups it belongs
to, how a spec selects it, how lint recognises it, and which table spells its flags.

The code asks these records (``framework_of(name).deepspeed_engine``); it does not compare
framework names. Adding a Megatron fork is one ``ArgumentDialect`` here and its table (of the
same name) in ``dialects/megatron.yaml``; ``python -m generator.docs`` writes the schema's
``framework`` and ``megatron.fork`` values from these records (a test holds them equal).
"""

from __future__ import annotations

from generator.values import value


@value
class Framework:
    """A value of the spec's ``framework``."""

    name: str
    title: str
    description: str  # the schema's description of the value (docs write it there)
    # Megatron's argument parser reads the run (megatron_args.sh; its dialect: ArgumentDialect)
    megatron_arguments: bool
    # NVIDIA Megatron-LM on megatron-core: its schedules (interleaving, the pipeline split of
    # layers), context parallelism, precision-aware and distributed optimizer, --ckpt-format
    megatron_core: bool
    # DeepSpeed's engine trains the model (ds_config.json)
    deepspeed_engine: bool
    # Hugging Face TrainingArguments (trainer_args.sh): "always", "accelerate" (when accelerate
    # launches it) or "never"
    trainer: str
    # how optimizer state is sharded: "distributed_optimizer" (Megatron's; no ZeRO stage),
    # "zero" (DeepSpeed's stages, default 0) or "fsdp" (FSDP2; ZeRO-3-like full shard by default)
    sharding: str
    # the launchers that can start it (GL114)
    launchers: tuple[str, ...]
    # how its checkpoints are written; None: the dialect's --ckpt-format (Plan.checkpoint_format)
    checkpoint_format: str | None = None
    # the spec field that picks its argument dialect (megatron.version or megatron.fork)
    dialect_setting: str | None = None
    # the attention kernel the run uses: the preset's (megatron-core: cuDNN on Hopper) or
    # FlashAttention-2 (flash-attn or SDPA's flash backend)
    attention_kernel: str = "flash-attention-2"
    # which scheduler steps the learning rate: "megatron", "deepspeed" (ds_config's), "trainer" or
    # "torchtitan" (its lr_scheduler section)
    lr_scheduler: str = "megatron"
    # HSDP: the data-parallel group can be replicas of a shard group (parallelism.dp_replicate > 1;
    # Megatron-LM: replicas of the distributed optimizer, where its table spells the instances)
    hsdp: bool = False
    # what training.recompute selective keeps: "modules" (Megatron-LM's: all but the modules it
    # reruns, the attention core by default) or "ops" (torchtitan's per-op checkpointing: the
    # outputs of every other linear and of attention, the rest rerun; estimate/memory.py)
    selective_recompute: str = "modules"
    # FSDP reduces the gradients in fp32 (torchtitan's mixed_precision_reduce default), not in the
    # 16-bit training dtype (estimate/memory.py gradient_bytes)
    reduces_in_fp32: bool = False
    # the model-parallel sizes an FSDP framework has beside its sharding (GL113 refuses the others),
    # and the launcher whose config carries them (None: any it has)
    model_parallel: tuple[str, ...] = ("tp", "pp", "cp", "ep")
    model_parallel_launcher: str | None = None
    # the run is a config function (--module M --config F) with --section.field overrides, in the
    # dialect table of the same name (torchtitan_args.sh, torchtitan_config.py; the spec field
    # dialect_setting picks its release)
    config_registry: bool = False
    # the Python module the launcher runs (`torchrun -m MODULE`) where launch.entrypoint is not given
    entry_module: str | None = None
    # its checkpoints in checkpoint.dir, a folder per step: NAME-STEP (the chain compares the newest
    # before and after each job; None: the Trainer's checkpoint-N, Megatron's or DeepSpeed's tracker)
    step_folders: str | None = None

    def __str__(self) -> str:
        return self.name

    @property
    def plain_deepspeed(self) -> bool:
        """DeepSpeed's engine under the user's own training script (no Megatron model code:
        tensor parallelism, packing and the data pipeline are the script's)."""
        return self.deepspeed_engine and not self.megatron_arguments

    @property
    def fsdp(self) -> bool:
        """FSDP2 shards parameters, gradients and optimizer state (zero_stage 2 or 3 its forms)."""
        return self.sharding == "fsdp"

    @property
    def deepspeed_scheduler(self) -> bool:
        """DeepSpeed's scheduler (ds_config.json) steps the learning rate."""
        return self.lr_scheduler == "deepspeed"

    @property
    def default_zero_stage(self) -> int | None:
        """The ZeRO stage when the spec gives none (None: the framework has no ZeRO stages)."""
        return {"zero": 0, "fsdp": 3}.get(self.sharding)

    def uses_trainer(self, launcher: str) -> bool:
        return self.trainer == "always" or (self.trainer == "accelerate" and launcher == "accelerate")

    def own_script(self, launcher: str) -> bool:
        """Whether the user's own training script reads the run's arguments (plain DeepSpeed not
        launched through accelerate): gen-launch writes no table's flags for it."""
        return self.plain_deepspeed and not self.uses_trainer(launcher)


FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (
    Framework("megatron-lm", "Megatron-LM",
              ("NVIDIA Megatron-LM / megatron-core (pretrain_gpt.py): Megatron arguments and the sbatch "
               "script."),
              megatron_arguments=True, megatron_core=True,
              deepspeed_engine=False, trainer="never", sharding="distributed_optimizer",
              launchers=("torchrun", "deepspeed", "srun"), dialect_setting="megatron.version",
              attention_kernel="preset", hsdp=True),
    Framework("megatron-deepspeed", "Megatron-DeepSpeed",
              "Megatron-DeepSpeed: Megatron arguments plus --deepspeed with a DeepSpeed JSON config.",
              megatron_arguments=True, megatron_core=False,
              deepspeed_engine=True, trainer="never", sharding="zero",
              launchers=("torchrun", "deepspeed", "srun"), checkpoint_format="deepspeed",
              dialect_setting="megatron.fork"),
    Framework("deepspeed", "DeepSpeed",
              "Plain DeepSpeed (your own training script): DeepSpeed JSON and the sbatch script.",
              megatron_arguments=False, megatron_core=False,
              deepspeed_engine=True, trainer="accelerate", sharding="zero",
              launchers=("torchrun", "deepspeed", "srun", "accelerate"), checkpoint_format="deepspeed",
              lr_scheduler="deepspeed"),
    Framework("fsdp", "FSDP2",
              ("PyTorch FSDP2 (fully_shard) in a Hugging Face Trainer-style script: its training arguments "
               "(trainer_args.sh), the sbatch script, and with the accelerate launcher an accelerate config."
               " Sharding from parallelism.zero_stage: 3 full shard (reshard after forward), 2 shard "
               "gradients and optimizer only; parallelism.hybrid_shard shards within a node and replicates "
               "across nodes. tp and cp with the accelerate launcher (its parallelism_config)."),
              megatron_arguments=False, megatron_core=False, deepspeed_engine=False,
              trainer="always", sharding="fsdp", launchers=("torchrun", "srun", "accelerate"),
              checkpoint_format="torch_dcp", lr_scheduler="trainer", hsdp=True, model_parallel=("tp", "cp"),
              model_parallel_launcher="accelerate"),
    Framework("torchtitan", "torchtitan",
              ("PyTorch's torchtitan (torchrun -m torchtitan.train): FSDP2 with tensor, pipeline, context "
               "and expert parallelism, its release from torchtitan.version; the config function "
               "(torchtitan_config.py: the model flavor of the preset) and its --section.field overrides "
               "(torchtitan_args.sh), and the sbatch script."),
              megatron_arguments=False, megatron_core=False, deepspeed_engine=False,
              trainer="never", sharding="fsdp", launchers=("torchrun",), checkpoint_format="torch_dcp",
              dialect_setting="torchtitan.version", lr_scheduler="torchtitan", hsdp=True,
              selective_recompute="ops", reduces_in_fp32=True,
              config_registry=True, entry_module="torchtitan.train", step_folders="step"),
)}


def framework_of(name: str) -> Framework:
    """The record of a framework named in a spec, a plan.json or a fact."""
    return FRAMEWORKS[name]


def frameworks_where(**wanted) -> tuple[str, ...]:
    """The names of the frameworks whose records have these attribute values."""
    return tuple(name for name, f in FRAMEWORKS.items()
                 if all(getattr(f, key) == value for key, value in wanted.items()))


@value
class ArgumentDialect:
    """A Megatron argument dialect: a release family or fork whose parser reads the arguments,
    with its table (the key of dialects/megatron.yaml, the same name)."""

    name: str
    framework: str  # the spec's framework it belongs to
    selected_by: str  # how a spec selects it, as a refusal names it
    fork: str | None = None  # megatron.fork's value (a Megatron-DeepSpeed fork)
    description: str = ""  # a fork's, for the schema's megatron.fork (docs write it there)
    vendor: str | None = None  # the GPU vendor it is for (None: NVIDIA and the others)
    # lint: word sets that pick this dialect over an equally good one ("--flag" given, "!--flag"
    # absent, "value=meaning" a plan value the words carry); `decisive` ones pick it outright
    decisive: tuple[tuple[str, ...], ...] = ()
    tie_break: tuple[tuple[str, ...], ...] = ()

    @property
    def releases(self) -> bool:
        """Whether megatron.version picks the release its flags are written for."""
        return framework_of(self.framework).dialect_setting == "megatron.version"

    def hinted(self, hints: tuple[tuple[str, ...], ...], flags: set[str], meanings: set[str]) -> bool:
        def holds(word: str) -> bool:
            if word.startswith("!"):
                return word[1:] not in flags
            return word in meanings if "=" in word else word in flags

        return any(all(holds(w) for w in hint) for hint in hints)


ARGUMENT_DIALECTS: dict[str, ArgumentDialect] = {d.name: d for d in (
    ArgumentDialect("megatron-lm", "megatron-lm", "framework: megatron-lm"),
    ArgumentDialect("mindspeed-llm", "megatron-lm", "framework: megatron-lm", vendor="huawei"),
    ArgumentDialect("megatron-deepspeed/microsoft", "megatron-deepspeed", "megatron.fork: microsoft",
                    fork="microsoft",
                    description=("microsoft/Megatron-DeepSpeed: rotary via --use-rotary-position-embeddings, "
                                 "GQA via --num-key-value-heads, MoE, RMSNorm, Ulysses sequence "
                                 "parallelism; no ALiBi.")),
    # BigScience's fork: ALiBi is its mark; full recompute spelt --checkpoint-activations without
    # --recompute-granularity tells it from microsoft's where the flags fit both alike
    ArgumentDialect("megatron-deepspeed/bigscience", "megatron-deepspeed", "megatron.fork: bigscience",
                    fork="bigscience",
                    description=("bigscience-workshop/Megatron-DeepSpeed (BLOOM's): "
                                 "--position-embedding-type absolute/rotary/alibi, --glu-activation, "
                                 "full recompute as --checkpoint-activations; no GQA, RMSNorm, MoE or "
                                 "sequence parallelism."),
                    decisive=(("position_embedding=alibi",),),
                    tie_break=(("--checkpoint-activations", "!--recompute-granularity"),)),
)}


def forks() -> tuple[ArgumentDialect, ...]:
    """The Megatron-DeepSpeed forks, the default (megatron.fork's first) first."""
    return tuple(d for d in ARGUMENT_DIALECTS.values() if d.fork is not None)


def on_vendor(name: str, vendor: str | None) -> str:
    """The dialect ``name`` on a GPU of ``vendor``: its family's dialect for that vendor where it
    has one (Megatron-LM on Ascend is MindSpeed-LLM), else itself."""
    d = ARGUMENT_DIALECTS[name]
    if d.fork is not None or vendor is None:
        return name
    return next((c.name for c in ARGUMENT_DIALECTS.values()
                 if c.framework == d.framework and c.fork is None and c.vendor == vendor), name)


def argument_dialect(framework: str, fork: str | None, vendor: str | None) -> ArgumentDialect | None:
    """The dialect a spec's Megatron arguments are written in (None: it has no Megatron arguments)."""
    record = framework_of(framework)
    if not record.megatron_arguments:
        return None
    candidates = [d for d in ARGUMENT_DIALECTS.values() if d.framework == record.name]
    if record.dialect_setting == "megatron.fork":
        return next(d for d in candidates if d.fork == fork)
    return next((d for d in candidates if d.vendor == vendor),
                next(d for d in candidates if d.vendor is None))
