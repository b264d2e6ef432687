"""The typed, frozen spec: schema defaults and presets applied, counts parsed to integers.

Each section is a class of typed fields built by one constructor (``fields.section``) from the
schema: a field is defined by its schema property (what a spec may give, its default, its form)
and its line here (its Python type, and in its metadata what the schema cannot say). Adding a
field is those two; no constructor changes.

Every field remembers where it came from (``spec.yaml:12:5``, ``preset llama3-8b`` or
``default``), so that plan errors can point at the values involved.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import field
from fractions import Fraction
from pathlib import Path
from typing import Any

from generator import presets
from generator.errors import Location, UserError
from generator.executors import executor_of
from generator.frameworks import framework_of
from generator.shell import ShellRef
from generator.spec.fields import MISSING, At, as_schema_says, converted, fields_of, section
from generator.spec.load import Document
from generator.spec.overlay import load_layers
from generator.spec.pipeline_layout import LayoutError, PipelineLayout
from generator.spec.schema import spec_schema, validate
from generator.units import parse_fraction, slurm_minutes
from generator.values import value
from generator.vectors import where


@value
class Cluster:
    """The spec's cluster section: nodes, GPUs per node, the GPU preset and its limits."""

    nodes: int
    gpus_per_node: int
    gpu: str
    allow_oversize: bool  # write the files even beyond 1.5× the GPU's memory (GL024)
    memory_headroom_gib: float  # kept free of the estimate: fits are judged without it
    host_memory_gib: float | None  # a node's CPU memory (GL025: the load's host memory)


@value
class RopeScaling:
    """Rotary frequency scaling as a checkpoint's config.json ``rope_scaling`` block gives it:
    Llama 3.1's frequency bands (type llama3) or YaRN (type yarn: DeepSeek, gpt-oss); part of the
    model, so its defaults are Megatron's (as the schema's descriptions say)."""

    factor: float
    type: str = "llama3"
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    # Megatron's: Llama 3.1's 8192 (rope_utils), MLA's YaRN 4096 (MLATransformerConfig)
    original_max_position_embeddings: int = field(
        default=8192, metadata={"derive": lambda r: 4096 if r["type"] == "yarn" else 8192})
    mscale: float = 1.0
    mscale_all_dim: float = 0.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    truncate: bool = True  # YaRN's correction range rounded to integers (gpt-oss: false)


def _model_field(group: str, default: Any = MISSING, *, resume: str | None, required: bool = False,
                 derive: Any = None, null_is_a_value: bool = False, fact: bool = False) -> Any:
    """A model field: its default (Megatron's; the preset's value comes first) or ``derive``
    (its default from the other fields), and its metadata (see Model)."""
    metadata = {"group": group, "resume": resume, "required": required,
                "null_is_a_value": null_is_a_value, "fact": fact}
    if derive is not None:
        metadata["derive"] = derive
    return field(default=default, metadata=metadata)


def _shape(default: Any = MISSING, **metadata: Any) -> Any:
    return _model_field("shape", default, **metadata)


def _architecture(default: Any = MISSING, **metadata: Any) -> Any:
    return _model_field("architecture", default, **metadata)


def _moe(default: Any = MISSING, **metadata: Any) -> Any:
    return _model_field("moe", default, **metadata)


def _megatron_ffn(m: dict[str, Any]) -> int:
    """Megatron's default FFN size: 4h, or int(4h * 2/3 / 64) * 64 with --swiglu (arguments.py)."""
    h = m["hidden_size"]
    return (4 * h * 2 // 3 // 64) * 64 if m["activation"] == "swiglu" else 4 * h


@value
class Model:
    """The spec's model section, preset applied: the architecture Megatron builds.

    A field's default is Megatron's, applied after the preset's value: the schema states it in
    the field's description rather than as a JSON Schema ``default`` (which would override the
    preset). Its metadata says the rest; every list of model fields is read from it
    (``fields_of(Model, ...)``):

    - ``group``: shape | architecture (beyond the shape) | moe (the routed experts);
    - ``required``: given, or from the preset;
    - ``derive``: the default computed from the other fields (GQA groups, FFN size, ...);
    - ``null_is_a_value``: a spec's null overrides the preset's value (the derived default, no
      scaling, dropless ...), where any other null means "not given";
    - ``resume``: what another value means for a run that resumes the checkpoint: "weights"
      (another model: other parameter shapes, or weights that compute another function),
      "behaviour" (the same weights, used otherwise from the resumed step on), None (resume.py
      judges it by a rule of its own, or it does not matter to a resume);
    - ``fact``: a value the rules check (lint reads it from launch files too).
    """

    preset: str | None = field(default=None, metadata={"resume": None})  # the fields say it
    num_layers: int = _shape(required=True, resume="weights", fact=True)
    hidden_size: int = _shape(required=True, resume="weights", fact=True)
    num_attention_heads: int = _shape(required=True, resume="weights", fact=True)
    num_query_groups: int = _shape(derive=lambda m: m["num_attention_heads"], resume="weights", fact=True)
    ffn_hidden_size: int = _shape(derive=_megatron_ffn, resume="weights")
    vocab_size: int = _shape(required=True, resume="weights")
    seq_length: int = _shape(required=True, resume=None, fact=True)  # resume: safe, counted in samples
    # resume: refused or not by the position embedding and the dialect
    max_position_embeddings: int = _shape(derive=lambda m: m["seq_length"], resume=None, fact=True)
    num_experts: int | None = _shape(None, resume="weights", fact=True)
    moe_top_k: int | None = _shape(None, resume="behaviour", fact=True)
    activation: str = _shape("gelu", resume="weights")  # gelu | swiglu | quick_geglu (gated)
    normalization: str = _shape("layernorm", resume="weights")
    position_embedding: str = _shape("learned_absolute", resume="weights", fact=True)
    tie_embeddings: bool = _shape(True, resume="weights")
    # the architecture beyond the shape (defaults: what Megatron builds when not told)
    linear_bias: bool = _architecture(True, resume="weights", fact=True)
    qkv_bias: bool = _architecture(derive=lambda m: m["linear_bias"], null_is_a_value=True, resume="weights")
    rotary_base: int = _architecture(10000, resume="behaviour")
    rotary_percent: float = _architecture(1.0, resume="behaviour")
    rope_scaling: RopeScaling | None = _architecture(None, null_is_a_value=True, resume="behaviour")
    norm_epsilon: float = _architecture(1e-5, resume="behaviour")
    attention_dropout: float = _architecture(0.1, resume="behaviour")
    hidden_dropout: float = _architecture(0.1, resume="behaviour")
    init_method_std: float = _architecture(0.02, resume=None)  # used only at initialisation
    qk_layernorm: bool = _architecture(False, resume="weights")
    # resume: judged by the padded vocabulary it gives
    make_vocab_size_divisible_by: int = _architecture(128, resume=None)
    kv_channels: int = _architecture(derive=lambda m: m["hidden_size"] // m["num_attention_heads"],
                                     null_is_a_value=True, resume="weights")
    embedding_layernorm: bool = _architecture(False, resume="weights")
    parallel_residual: bool = _architecture(False, resume="weights")
    # multi-latent attention (DeepSeek): low-rank query and key/value latents, rotary channels apart
    multi_latent_attention: bool = _architecture(False, resume="weights", fact=True)
    q_lora_rank: int | None = _architecture(None, null_is_a_value=True, resume="weights")
    kv_lora_rank: int = _architecture(32, resume="weights")
    qk_head_dim: int = _architecture(128, resume="weights")
    qk_pos_emb_head_dim: int = _architecture(64, resume="weights")
    v_head_dim: int = _architecture(128, resume="weights")
    # attention sinks and sliding windows (gpt-oss)
    softmax_type: str = _architecture("vanilla", resume="weights")  # learnable: a sink per head
    window_size: tuple[int, int] | None = _architecture(None, null_is_a_value=True, resume="behaviour")
    window_attn_skip_freq: int | None = _architecture(None, null_is_a_value=True, resume="behaviour")
    # the gated MLP's linear offset and clamp (gpt-oss)
    glu_linear_offset: float = _architecture(0.0, resume="behaviour")
    activation_clamp: float | None = _architecture(None, null_is_a_value=True, resume="behaviour")
    # multi-token prediction (DeepSeek-V3): layers after the main model, sharing its embedding and head
    mtp_num_layers: int | None = _architecture(None, null_is_a_value=True, resume="weights", fact=True)
    mtp_loss_scaling_factor: float = _architecture(0.1, resume="behaviour")
    # mixture of experts (meaningful with num_experts)
    moe_ffn_hidden_size: int | None = _moe(None, null_is_a_value=True, resume="weights")
    moe_shared_expert_intermediate_size: int | None = _moe(None, null_is_a_value=True, resume="weights")
    moe_dense_layers: int = _moe(0, resume="weights")
    moe_load_balancing: str = _moe("aux_loss", resume="behaviour", fact=True)
    moe_aux_loss_coeff: float = _moe(0.0, resume="behaviour")
    moe_z_loss_coeff: float | None = _moe(None, null_is_a_value=True, resume="behaviour")
    # routing: score function, pre-softmax, aux-loss-free expert bias, group-limited top-k, scaling
    moe_router_score_function: str = _moe("softmax", resume="behaviour", fact=True)
    # Megatron's validate_args asks for pre-softmax with top-1 softmax routing (else a zero gradient)
    moe_router_pre_softmax: bool = _moe(derive=lambda m: m["moe_top_k"] == 1, null_is_a_value=True,
                                        resume="behaviour", fact=True)
    moe_router_expert_bias: bool = _moe(False, resume="behaviour", fact=True)  # a buffer, not a parameter
    moe_router_bias_update_rate: float = _moe(1e-3, resume="behaviour")
    moe_router_num_groups: int | None = _moe(None, null_is_a_value=True, resume="behaviour", fact=True)
    moe_router_group_topk: int | None = _moe(None, null_is_a_value=True, resume="behaviour", fact=True)
    moe_router_topk_scaling_factor: float | None = _moe(None, null_is_a_value=True, resume="behaviour")
    moe_router_dtype: str | None = _moe(None, null_is_a_value=True, resume="behaviour")
    moe_capacity_factor: float | None = _moe(None, null_is_a_value=True, resume="behaviour")
    moe_token_drop_policy: str = _moe("probs", resume="behaviour")
    moe_pad_to_capacity: bool = _moe(False, resume="behaviour")
    # None: alltoall with ep > 1, else allgather
    moe_token_dispatcher: str | None = _moe(None, null_is_a_value=True, resume="behaviour", fact=True)
    # the flex dispatcher's library: deepep | hybridep
    moe_flex_dispatcher_backend: str | None = _moe(None, null_is_a_value=True, resume=None)
    moe_grouped_gemm: bool = _moe(False, resume=None, fact=True)  # how they run, not what they hold

    def token_dispatcher(self, ep: int) -> str:
        """The MoE token dispatcher: the one given, else alltoall with ep > 1, else allgather
        (``ep`` may be an array: one per auto-plan candidate)."""
        return self.moe_token_dispatcher or where(ep > 1, "alltoall", "allgather")

    def padded_vocab_size(self, tp: int) -> int:
        """The vocabulary Megatron builds: rounded up to make_vocab_size_divisible_by × tp."""
        multiple = self.make_vocab_size_divisible_by * tp
        return -(-self.vocab_size // multiple) * multiple


MODEL_REQUIRED = fields_of(Model, required=True)
NULL_IS_A_VALUE = fields_of(Model, null_is_a_value=True)
MODEL_FACTS = fields_of(Model, fact=True)
# the architecture fields with a default of their own, Megatron's (qkv_bias and kv_channels
# derive theirs from the shape)
ARCHITECTURE = tuple(f.name for f in dataclasses.fields(Model)
                     if f.metadata.get("group") in ("architecture", "moe") and "derive" not in f.metadata)


def _pipeline_layout(given: str, at: At) -> str:
    """A layout in Megatron's notation, its syntax checked where it is written (how it fits the
    model and pp is GL235's)."""
    try:
        PipelineLayout.parse(given)
    except LayoutError as exc:
        raise UserError(f"{at.where()} {given!r}: {exc}", at.locate()) from None
    return given


@value
class Parallelism:
    """The spec's parallelism section: the parallel sizes and how state is sharded."""

    tp: int
    pp: int
    cp: int
    ep: int
    etp: int | None
    vpp: int
    sequence_parallel: bool
    zero_stage: int | None
    distributed_optimizer: bool
    megatron_fsdp: bool  # Megatron-LM: Megatron-FSDP, its sharding from zero_stage
    dp: int | None
    dp_shard: int | None  # FSDP: the shard group of the data-parallel group (None: derived)
    dp_replicate: int | None  # FSDP: replicas of the shard group (HSDP; None: derived)
    zero_offload: str
    first_stage_layers: int | None  # uneven pipelines (megatron-lm)
    last_stage_layers: int | None
    pipeline_layout: str | None = converted(_pipeline_layout)  # the layers of each stage (megatron-lm)
    hybrid_shard: bool  # fsdp: shard within a node, replicate across nodes
    # Megatron-LM: the embedding / the loss counted as a layer of the pipeline split
    account_for_embedding_in_pipeline_split: bool
    account_for_loss_in_pipeline_split: bool
    tp_comm_overlap: bool  # Megatron-LM: TP collectives pipelined with the GEMMs (TE)
    ep_comm_overlap: bool  # Megatron-LM: the experts' all-to-all under another micro-batch's compute

    def data_parallel(self, dp: int, nodes: int) -> tuple[int | None, int | None]:
        """(dp_replicate, dp_shard) of a data-parallel group of ``dp`` ranks: the ones given, the
        other derived (dp / the given one, None where it does not divide: GL026 says so); with
        neither given, hybrid_shard replicates over the nodes, else one shard group of dp."""
        replicate, shard = self.dp_replicate, self.dp_shard
        if replicate is None and shard is None:
            replicate = nodes if self.hybrid_shard and dp % nodes == 0 else 1
        if replicate is None:
            replicate = dp // shard if dp % shard == 0 else None
        if shard is None and replicate is not None:
            shard = dp // replicate if dp % replicate == 0 else None
        return replicate, shard

    def layout(self) -> PipelineLayout | None:
        return None if self.pipeline_layout is None else PipelineLayout.parse(self.pipeline_layout)

    def split_layers(self, num_layers: int) -> tuple[int | None, int | None]:
        """(first, last) stage transformer layers: the given ones, the first and last rank's of
        a pipeline layout, or with the embedding / loss counted in the split, a stage's share of
        num_layers + 1 (+ 1) less the one it holds."""
        layout = self.layout()
        if layout is not None and self.pp > 1 and len(layout.stages) % self.pp == 0:
            ranks = layout.rank_layers(self.pp)
            return ranks[0], ranks[-1]
        embedding = self.account_for_embedding_in_pipeline_split
        loss = self.account_for_loss_in_pipeline_split
        if not (embedding or loss) or self.pp < 2 or (num_layers + embedding + loss) % self.pp:
            return self.first_stage_layers, self.last_stage_layers
        share = (num_layers + embedding + loss) // self.pp
        return (share - 1 if embedding else None), (share - 1 if loss else None)


def _rampup(given: dict, at: At) -> tuple[int, int, int]:
    return given["start"], given["increment"], given["samples"]


def _step_schedule(given: tuple[dict, ...], at: At) -> tuple[tuple[int, int], ...]:
    return tuple((entry["tokens"], entry["global_batch_size"]) for entry in given)


@value
class Batch:
    """The spec's batch section: what was given of micro, accumulation, global and tokens."""

    micro_batch_size: int | None
    gradient_accumulation_steps: int | None
    global_batch_size: int | None
    tokens_per_step: int | None
    rampup: tuple[int, int, int] | None = converted(_rampup)  # (start, increment, samples)
    schedule: tuple[tuple[int, int], ...] | None = converted(_step_schedule)  # ((tokens, global batch), ...)


@value
class Warmup:
    """Warmup length in one unit: ``fraction`` of the run, or ``iters``/``samples``/``tokens``."""

    unit: str
    amount: Fraction | int


def _warmup(given: Any, at: At) -> Warmup:
    """The one form of several (1%, 0.01, {iters: N}, {samples: N}, {tokens: 375M}) as a unit and
    an amount: a form no schema conversion gives."""
    if isinstance(given, dict):
        (unit, amount), = given.items()
        return Warmup(unit, as_schema_says(amount, at.child(unit)))
    return Warmup("fraction", _fraction(given, at))


def _fraction(given: Any, at: At) -> Fraction:
    """A fraction of the run (1% or 0.01), exact."""
    try:
        return parse_fraction(given, at.where())
    except ValueError as exc:
        raise UserError(str(exc), at.locate()) from None


@value
class LRScaling:
    """Learning rate derived from a reference run's batch size (linear or square root)."""

    rule: str  # linear | sqrt
    reference_global_batch_size: int
    reference_lr: float


@value
class Training:
    """The spec's training section: precision, length, optimizer, schedule, recompute."""

    precision: str
    # the run's length: exactly one is given (the schema says so); a stage gives its own
    train_tokens: int | None = field(metadata={"run_length": True})
    train_iters: int | None = field(metadata={"run_length": True})
    train_samples: int | None = field(metadata={"run_length": True})
    lr: float | None  # None: derived from lr_scaling
    min_lr: float
    warmup: Warmup = converted(_warmup)
    decay: str
    weight_decay: float
    adam_betas: tuple[float, float]
    adam_eps: float
    gradient_clipping: float
    recompute: str
    recompute_modules: tuple[str, ...] | None  # module-level selective recompute (megatron-lm)
    seed: int
    log_interval: int
    flash_attention: bool | None  # None: the dialect's (dialects.flash_attention)
    lr_scaling: LRScaling | None
    target_loss: float | None
    wsd_decay: Fraction = converted(_fraction)
    optimizer_states: str  # Adam's moments (Megatron's precision-aware optimizer: bf16)
    main_grads: str
    fp8_recipe: str  # Transformer Engine's FP8 scaling (Megatron's default: delayed)


def _paths(given: tuple, at: At) -> tuple[str | ShellRef | tuple[str, float], ...]:
    """A blend of several datasets gives each a weight (the forks read --data-path as
    weight-path pairs, Megatron-LM too once one weight is given)."""
    weighted = [isinstance(p, dict) for p in given]
    if len(given) > 1 and not all(weighted):
        k = weighted.index(False)
        raise UserError(f"$.data.paths[{k}]: a blend of {len(given)} datasets gives each a weight, e.g. "
                        "{path: /data/a_text_document, weight: 0.7}", at.locate(k))
    return tuple((p["path"], p["weight"]) if isinstance(p, dict) else p for p in given)


@value
class Data:
    """The spec's data section: paths or blend, split, packing."""

    packing: bool
    average_sequence_length: int | None
    paths: tuple[str | ShellRef | tuple[str, float], ...] = converted(_paths)  # a prefix, or (prefix, weight)
    split: str | None
    cache_path: str | ShellRef | None
    mock: bool


@value
class Tokenizer:
    """The spec's tokenizer section."""

    type: str | None
    model: str | ShellRef | None
    vocab_file: str | ShellRef | None
    merge_file: str | ShellRef | None


def _torch_dist_only(why: str):
    """A checkpoint setting that Megatron has in the torch_dist format only."""

    def check(given: bool, at: At) -> bool:
        if given and at.setting("checkpoint", "format") == "torch":
            raise UserError(f"{at.where()}: {why}; set checkpoint.format: torch_dist (or leave it to the "
                            "release's default)", at.locate())
        return given

    return check


@value
class Checkpoint:
    """The spec's checkpoint section: where, how often, how many, in which format."""

    dir: str | ShellRef | None
    interval: int | None
    keep_last: int | None  # the Trainer's --save_total_limit
    format: str | None
    async_save: bool = converted(_torch_dist_only("Megatron saves in the background only in the torch_dist "
                                                  "format"))
    schedule: str | None  # checkpoint | spec: which schedule a resumed run follows
    # Megatron-LM: the distributed optimizer saved fully reshardable
    reshardable: bool = converted(_torch_dist_only("the distributed optimizer's state is reshardable in the "
                                                   "torch_dist format only"))
    universal: bool  # Megatron-DeepSpeed: load a universal checkpoint
    finetune_from: str | ShellRef | None


@value
class Logging:
    """The spec's logging section: wandb, tensorboard, throughput."""

    wandb_project: str | None
    wandb_run_name: str | None
    tensorboard_dir: str | ShellRef | None
    throughput: bool


@value
class Eval:
    """The spec's eval section: interval and iterations."""

    interval: int | None
    iters: int | None


@value
class Megatron:
    """Which Megatron-LM release or Megatron-DeepSpeed fork the files are written for."""

    version: str  # a Megatron-LM release: core_v0.12 ... core_v0.19 | latest
    fork: str  # the Megatron-DeepSpeed fork: microsoft | bigscience


@value
class Torchtitan:
    """Which torchtitan release the files are written for, and what it runs beside the sizes."""

    version: str  # a torchtitan release: 0.3
    compile: bool  # torch.compile the model and the loss


# names launch.sbatch sets and reads itself (an export would change the run it describes)
SCRIPT_OWNED_ENV = ("NODES", "PROCS_PER_NODE", "WORLD_SIZE", "GEN_LAUNCH_DIR", "MEGATRON_ARGS",
                    "TRAINER_ARGS", "TORCHTITAN_ARGS", "TRAIN_ARGS", "EXTRA_ARGS", "RANK", "LOCAL_RANK",
                    "IFS")
# names whose value a bash child runs (BASH_ENV is sourced, prompts and PROMPT_COMMAND are
# expanded, SHELLOPTS turns on xtrace ...) or that decide which programs run
CODE_ENV = ("BASH_ENV", "ENV", "PROMPT_COMMAND", "PS1", "PS2", "PS3", "PS4", "SHELLOPTS", "BASHOPTS",
            "BASH_XTRACEFD", "PATH", "CDPATH", "GLOBIGNORE")


def _env(env: dict, at: At) -> tuple[tuple[str, str], ...]:
    """launch.env, with the names that would change the script or run code refused (the latter
    unless launch.unsafe_env lists them: read here, so it is no field of its own)."""
    doc = at.doc
    unsafe = set(at.setting("launch", "unsafe_env") or ())
    for name in env:
        if name in SCRIPT_OWNED_ENV:
            raise UserError(f"$.launch.env: launch.sbatch sets or relies on {name} itself (the plan decides "
                            "it); remove it here", doc.locate(["launch", "env", name], key=True))
        if (name in CODE_ENV or name.startswith("BASH_")) and name not in unsafe:
            raise UserError(f"$.launch.env: {name} makes every bash the job starts run what it says (or "
                            f"decides which programs run); list it in launch.unsafe_env: [{name}] if that is "
                            "meant",
                            doc.locate(["launch", "env", name], key=True))
    for name in sorted(unsafe):
        if name in SCRIPT_OWNED_ENV:
            raise UserError(f"$.launch.unsafe_env: launch.sbatch sets or relies on {name} itself; it cannot "
                            "be exported",
                            doc.locate(["launch", "unsafe_env"]))
    return tuple((k, _env_text(v)) for k, v in env.items())


def _env_text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _entry_point_arguments(given: dict, at: At) -> tuple[tuple[str, str], ...]:
    """launch.arguments, for an entry point without a table of its own (plain DeepSpeed)."""
    if not given:
        return ()
    doc, data = at.doc, _with_defaults(at.doc.data, spec_schema())
    if not framework_of(data["framework"]).own_script(data["launch"]["launcher"]):
        raise UserError(f"$.launch.arguments: framework {data['framework']} with launcher "
                        f"{data['launch']['launcher']} writes the run's fields as its own arguments; "
                        "launch.arguments is for a plain DeepSpeed entry point (remove it)",
                        doc.locate(["launch", "arguments"]))
    options = list(given.values())
    twice = next((o for o in options if options.count(o) > 1), None)
    if twice is not None:
        raise UserError(f"$.launch.arguments: {twice} is given for two fields; one option carries one field",
                        doc.locate(["launch", "arguments"]))
    return tuple(given.items())


def _executor(name: str, at: At) -> str:
    """launch.executor, refused where it cannot start the launcher or misses what only the user
    knows (the image, the accelerator) or would lose the checkpoints (a folder on no volume)."""
    record = executor_of(name)
    launcher = at.setting("launch", "launcher")
    if launcher not in record.launchers:
        why = dict(record.refused).get(launcher)
        raise UserError(f"$.launch.executor: {name} starts the launcher {' or '.join(record.launchers)}, not "
                        f"{launcher}{f' ({why})' if why else ''}; set launch.launcher: {record.launchers[0]} "
                        "(or launch.executor: slurm)", at.locate())
    need = record.requires
    if need is not None and at.setting(*need.setting.split(".")) is None and \
            not (need.for_gpus and at.setting("cluster", "gpu") == "cpu"):
        raise UserError(f"$.launch.executor: {name} {need.why}; give {need.setting}, e.g. {need.example}",
                        at.locate())
    job = at.setting("name")
    problem = record.name_problem(job, at.setting("cluster", "nodes"), launcher)
    if problem is not None:
        raise UserError(f"$.name: {job!r} names the {record.title}; {problem}", at.doc.locate(["name"]))
    if record.volumes is not None:
        _checkpoint_on_a_volume(name, record.volumes, at)
    scheduler = at.setting("kubernetes", "scheduler") or "default"
    why = record.scheduler_refused(scheduler) if record.kubernetes else None
    if why is not None:
        raise UserError(f"$.kubernetes.scheduler: {scheduler} with launch.executor {name}: {why}",
                        at.doc.locate(["kubernetes", "scheduler"]))
    return name


def _checkpoint_on_a_volume(name: str, setting: str, at: At) -> None:
    """checkpoint.dir on a mounted claim or bucket: a pod's or a node's own disk is gone when it
    restarts or is recovered."""
    folder = at.setting("checkpoint", "dir")
    if not isinstance(folder, str):
        return
    given = at.setting(*setting.split(".")) or ()
    mounts = [v["mount_path"] for v in given] if isinstance(given, list) else list(given)
    if any(folder == m or folder.startswith(m.rstrip("/") + "/") for m in mounts):
        return
    parent = folder.rsplit("/", 1)[0] or "/"
    example = (f"kubernetes: {{volumes: [{{claim: checkpoints, mount_path: {parent}}}]}}"
               if setting.startswith("kubernetes") else f"skypilot: {{buckets: {{{parent}: s3://my-bucket{parent}}}}}")
    raise UserError(f"$.checkpoint.dir: {folder} is on none of the volumes {setting} mounts "
                    f"({', '.join(mounts) or 'none'}): a restarted {name} node would find no checkpoint to "
                    f"resume; mount one there, e.g. {example}", at.doc.locate(["checkpoint", "dir"]))


@value
class Launch:
    """How ranks are started: launcher, entry point, interpreter and pass-through arguments."""

    launcher: str
    executor: str = converted(_executor)  # where the nodes start (generator/executors.py)
    entrypoint: str
    python: str
    extra_args: tuple[str | ShellRef, ...]
    env: tuple[tuple[str, str], ...] = converted(_env)
    check_extra_args: bool
    # (run field, a plain entry point's option)
    arguments: tuple[tuple[str, str], ...] = converted(_entry_point_arguments)


@value
class Slurm:
    """The spec's slurm section: the sbatch header and srun settings."""

    partition: str | None
    account: str | None
    qos: str | None
    time: str
    cpus_per_task: int | None
    mem: str | None
    container_image: str | None
    container_mounts: tuple[str, ...]
    container_workdir: str | None
    exclusive: bool
    output: str
    error: str | None
    preflight: bool  # check every node (preflight.py) before the training step
    max_time: str | None  # the partition's MaxTime (GL314)


@value
class Toleration:
    """A taint the pods tolerate (Kubernetes' fields, snake_case)."""

    key: str | None
    operator: str | None
    value: str | None
    effect: str | None
    toleration_seconds: int | None


@value
class Volume:
    """A persistent volume claim every pod mounts."""

    claim: str
    mount_path: str
    read_only: bool


def _tolerations(given: tuple, at: At) -> tuple[Toleration, ...]:
    node = spec_schema()["properties"]["kubernetes"]["properties"]["tolerations"]["items"]
    return tuple(section(Toleration, t, node, at.child(k)) for k, t in enumerate(given))


def _volumes(given: tuple, at: At) -> tuple[Volume, ...]:
    node = spec_schema()["properties"]["kubernetes"]["properties"]["volumes"]["items"]
    return tuple(section(Volume, v, node, at.child(k)) for k, v in enumerate(given))


@value
class Kubernetes:
    """The spec's kubernetes section: the pods of a TrainJob, PyTorchJob or JobSet."""

    image: str | None
    namespace: str | None
    service_account: str | None
    image_pull_secrets: tuple[str, ...]
    node_selector: tuple[tuple[str, str], ...] = converted(lambda given, at: tuple(given.items()))
    tolerations: tuple[Toleration, ...] = converted(_tolerations)
    queue: str | None
    priority_class: str | None
    volumes: tuple[Volume, ...] = converted(_volumes)
    shm_size: str | None
    time: str | None
    max_restarts: int
    scheduler: str  # default | volcano (executors.yaml: schedulers)


@value
class Skypilot:
    """The spec's skypilot section: the resources and recovery of a SkyPilot task."""

    accelerator: str | None
    infra: str | None
    image_id: str | None
    disk_size: int | None
    use_spot: bool
    recovery: str | None
    max_restarts_on_errors: int
    workdir: str | None
    buckets: tuple[tuple[str, str], ...] = converted(lambda given, at: tuple(given.items()))


def _model(given: dict, at: At) -> Model:
    return model_from(given, at.locate)


@value
class Spec:
    """The typed, frozen spec: every section, with where each value came from."""

    name: str
    framework: str
    cluster: Cluster
    model: Model = converted(_model)  # its preset first
    parallelism: Parallelism
    batch: Batch
    training: Training
    launch: Launch
    slurm: Slurm
    kubernetes: Kubernetes
    skypilot: Skypilot
    megatron: Megatron
    torchtitan: Torchtitan
    source: str
    doc: Document = field(repr=False, compare=False)
    stage: str | None = None  # the stage this spec is (stages: see stage_specs)
    stage_names: tuple[str, ...] = ()
    auto: Any = field(default=None, repr=False, compare=False)  # autoplan.AutoPlan when searched
    data: Data
    tokenizer: Tokenizer
    checkpoint: Checkpoint
    logging: Logging
    eval: Eval

    @property
    def uses_trainer(self) -> bool:
        """Hugging Face TrainingArguments (trainer_args.sh): FSDP2, and DeepSpeed through accelerate."""
        return framework_of(self.framework).uses_trainer(self.launch.launcher)

    def time_limit(self) -> tuple[int | None, str | None]:
        """(minutes, setting): how long the executor lets the job run (slurm.time, kubernetes.time;
        None: no limit) and the setting that says it (None: the executor has none)."""
        setting = executor_of(self.launch.executor).time_limit
        if setting is None:
            return None, None
        section, key = setting.split(".")
        given = getattr(getattr(self, section), key)
        return (None if given is None else slurm_minutes(given)), setting

    def where(self, dotted: str) -> str:
        """Where a field's value came from: ``file:line:col``, ``preset NAME`` or ``default``."""
        path = dotted.split(".")
        if _has_path(self.doc.data, path):
            return str(self.doc.locate(path))
        if path[0] == "model" and self.model.preset and path[-1] in presets.models()[self.model.preset]:
            return f"preset {self.model.preset}"
        return "default"

    def location(self, dotted: str) -> Location:
        return self.doc.locate(dotted.split("."))


def _has_path(data: Any, path: list[str]) -> bool:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


def load_document(path: Path, display: str | None = None, overrides: tuple[str, ...] = ()) -> Document:
    """The spec file as a schema-checked document (its layers merged), not yet typed (run.py's
    load_spec chooses its auto fields and types it)."""
    display = display or str(path)
    doc = load_layers(path, display, tuple(overrides))
    if not isinstance(doc.data, dict):
        kind = "a list" if isinstance(doc.data, list) else f"a {type(doc.data).__name__}"
        raise UserError(f"$: a spec is a mapping of sections (name, framework, cluster, model, "
                        f"parallelism, batch, training, ...), got {kind}", doc.locate([]))
    validate(doc)
    return doc


RUN_LENGTH = fields_of(Training, run_length=True)


def stage_documents(spec: Spec) -> list[tuple[str, Document]]:
    """(stage name, document) per stage: the base with the stage's overrides (batch replaces the
    base batch, model and parallelism fields merge) and its own run length; named
    <name>-<stage> (run.py's stage_specs types them)."""
    stages = spec.doc.data.get("stages") or []
    out = []
    for stage in stages:
        data = copy.deepcopy({k: v for k, v in spec.doc.data.items() if k != "stages"})
        for merged in ("model", "parallelism"):
            if merged in stage:
                data[merged] = {**data.get(merged, {}), **stage[merged]}
        if "batch" in stage:
            data["batch"] = copy.deepcopy(stage["batch"])
        data["training"] = {k: v for k, v in data["training"].items() if k not in RUN_LENGTH}
        data["training"].update({k: stage[k] for k in RUN_LENGTH if k in stage})
        data["name"] = f"{spec.name}-{stage['name']}"
        doc = Document(spec.doc.file, data, spec.doc.root, spec.doc.digest)
        validate(doc)
        out.append((stage["name"], doc))
    return out


def build_spec(doc: Document, auto: Any = None) -> Spec:
    """The typed spec of a document whose fields are all given (run.py's build_spec has
    auto-plan choose the fields left ``auto`` or to a list first, and passes its record)."""
    return section(Spec, doc.data, spec_schema(), At(doc), source=doc.file, doc=doc,
                   stage_names=tuple(st["name"] for st in doc.data.get("stages") or ()), auto=auto)


def model_from(given: dict[str, Any], where=lambda: None) -> Model:
    """The model a spec's `model` section describes: its preset, then the values given, then
    Megatron's defaults. ``where()`` locates the section for the error when fields are missing."""
    preset_name = given.get("preset")
    merged = {**(presets.models()[preset_name] if preset_name else {}),
              **{k: v for k, v in given.items() if v is not None or k in NULL_IS_A_VALUE}}
    missing = [k for k in MODEL_REQUIRED if merged.get(k) is None]
    if missing:
        raise UserError(f"$.model: missing {', '.join(missing)}; give them or choose a preset "
                        f"({', '.join(presets.models())})", where())
    return section(Model, merged, spec_schema()["properties"]["model"], _MODEL_AT)


_MODEL_AT = At(None, ("model",))  # a model's fields are never refused at a line of their own


def _with_defaults(data: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` with the schema's ``default`` values filled in, section by section."""
    out = dict(data)
    for key, sub in schema.get("properties", {}).items():
        if key not in out and "default" in sub:
            out[key] = sub["default"]
        if isinstance(out.get(key), dict) and sub.get("type") == "object":
            out[key] = _with_defaults(out[key], sub)
    return out
