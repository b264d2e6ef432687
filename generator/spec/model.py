"""The typed, frozen spec: schema defaults and presets applied, counts parsed to integers.

Every field remembers where it came from (``spec.yaml:12:5``, ``preset llama3-8b`` or
``default``), so that plan errors can point at the values involved.
"""

from __future__ import annotations

import copy
from dataclasses import field
from fractions import Fraction
from pathlib import Path
from typing import Any

from generator import presets
from generator.errors import Location, UserError
from generator.frameworks import framework_of
from generator.shell import ShellRef
from generator.spec.load import Document
from generator.spec.overlay import load_layers
from generator.spec.schema import count_maximum, spec_schema, validate
from generator.units import parse_count, parse_fraction
from generator.values import value
from generator.vectors import where

_MODEL_REQUIRED = ("num_layers", "hidden_size", "num_attention_heads", "vocab_size", "seq_length")
# model fields where a spec's null overrides the preset (no scaling, dropless, the default size)
_NULL_IS_A_VALUE = ("rope_scaling", "qkv_bias", "kv_channels", "moe_ffn_hidden_size",
                    "moe_shared_expert_intermediate_size", "moe_z_loss_coeff", "moe_capacity_factor",
                    "moe_token_dispatcher")


@value
class Cluster:
    """The spec's cluster section: nodes, GPUs per node, the GPU preset and its limits."""

    nodes: int
    gpus_per_node: int
    gpu: str
    allow_oversize: bool = False  # write the files even beyond 1.5× the GPU's memory (GL024)
    memory_headroom_gib: float = 0.0  # kept free of the estimate: fits are judged without it
    host_memory_gib: float | None = None  # a node's CPU memory (GL025: the load's host memory)


@value
class RopeScaling:
    """Llama 3.1's rotary frequency scaling (its config.json ``rope_scaling`` block)."""

    factor: float
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


@value
class Model:
    """The spec's model section, preset applied: the architecture Megatron builds."""

    preset: str | None
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_query_groups: int
    ffn_hidden_size: int
    vocab_size: int
    seq_length: int
    max_position_embeddings: int
    num_experts: int | None
    moe_top_k: int | None
    activation: str
    normalization: str
    position_embedding: str
    tie_embeddings: bool
    # the architecture beyond the shape (defaults: what Megatron builds when not told)
    linear_bias: bool = True
    qkv_bias: bool = True
    rotary_base: int = 10000
    rotary_percent: float = 1.0
    rope_scaling: RopeScaling | None = None
    norm_epsilon: float = 1e-5
    attention_dropout: float = 0.1
    hidden_dropout: float = 0.1
    init_method_std: float = 0.02
    qk_layernorm: bool = False
    make_vocab_size_divisible_by: int = 128
    kv_channels: int = 0  # 0 until model_from sets hidden_size / heads
    embedding_layernorm: bool = False
    parallel_residual: bool = False
    # mixture of experts (meaningful with num_experts)
    moe_ffn_hidden_size: int | None = None
    moe_shared_expert_intermediate_size: int | None = None
    moe_dense_layers: int = 0
    moe_load_balancing: str = "aux_loss"
    moe_aux_loss_coeff: float = 0.0
    moe_z_loss_coeff: float | None = None
    moe_capacity_factor: float | None = None
    moe_token_drop_policy: str = "probs"
    moe_pad_to_capacity: bool = False
    moe_token_dispatcher: str | None = None  # None: alltoall with ep > 1, else allgather
    moe_grouped_gemm: bool = False

    def token_dispatcher(self, ep: int) -> str:
        """The MoE token dispatcher: the one given, else alltoall with ep > 1, else allgather
        (``ep`` may be an array: one per auto-plan candidate)."""
        return self.moe_token_dispatcher or where(ep > 1, "alltoall", "allgather")

    def padded_vocab_size(self, tp: int) -> int:
        """The vocabulary Megatron builds: rounded up to make_vocab_size_divisible_by × tp."""
        multiple = self.make_vocab_size_divisible_by * tp
        return -(-self.vocab_size // multiple) * multiple


# the architecture fields and their defaults (the shape fields are required or derived)
ARCHITECTURE = {name: f.default for name, f in Model.__dataclass_fields__.items()
                if name in ("linear_bias", "rotary_base", "rotary_percent", "norm_epsilon",
                            "attention_dropout", "hidden_dropout", "init_method_std", "qk_layernorm",
                            "make_vocab_size_divisible_by", "embedding_layernorm", "parallel_residual",
                            "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size",
                            "moe_dense_layers", "moe_load_balancing", "moe_aux_loss_coeff",
                            "moe_z_loss_coeff", "moe_capacity_factor", "moe_token_drop_policy",
                            "moe_pad_to_capacity", "moe_token_dispatcher", "moe_grouped_gemm")}


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
    dp: int | None
    zero_offload: str
    first_stage_layers: int | None = None  # uneven pipelines (megatron-lm)
    last_stage_layers: int | None = None
    hybrid_shard: bool = False  # fsdp: shard within a node, replicate across nodes
    # Megatron-LM: the embedding / the loss counted as a layer of the pipeline split
    account_for_embedding_in_pipeline_split: bool = False
    account_for_loss_in_pipeline_split: bool = False
    tp_comm_overlap: bool = False  # Megatron-LM: TP collectives pipelined with the GEMMs (TE)

    def split_layers(self, num_layers: int) -> tuple[int | None, int | None]:
        """(first, last) stage transformer layers: the given ones, or with the embedding / loss
        counted in the split, a stage's share of num_layers + 1 (+ 1) less the one it holds."""
        embedding = self.account_for_embedding_in_pipeline_split
        loss = self.account_for_loss_in_pipeline_split
        if not (embedding or loss) or self.pp < 2 or (num_layers + embedding + loss) % self.pp:
            return self.first_stage_layers, self.last_stage_layers
        share = (num_layers + embedding + loss) // self.pp
        return (share - 1 if embedding else None), (share - 1 if loss else None)


@value
class Batch:
    """The spec's batch section: what was given of micro, accumulation, global and tokens."""

    micro_batch_size: int | None
    gradient_accumulation_steps: int | None
    global_batch_size: int | None
    tokens_per_step: int | None
    rampup: tuple[int, int, int] | None = None  # (start, increment, samples)
    schedule: tuple[tuple[int, int], ...] | None = None  # ((tokens, global batch), ...)


@value
class Warmup:
    """Warmup length in one unit: ``fraction`` of the run, or ``iters``/``samples``/``tokens``."""

    unit: str
    amount: Fraction | int


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
    train_tokens: int | None
    train_iters: int | None
    train_samples: int | None
    lr: float | None  # None: derived from lr_scaling
    min_lr: float
    warmup: Warmup
    decay: str
    weight_decay: float
    adam_betas: tuple[float, float]
    adam_eps: float
    gradient_clipping: float
    recompute: str
    seed: int
    log_interval: int
    flash_attention: bool
    lr_scaling: LRScaling | None = None
    target_loss: float | None = None
    wsd_decay: Fraction = Fraction(1, 10)
    optimizer_states: str = "fp32"  # Adam's moments (Megatron's precision-aware optimizer: bf16)
    main_grads: str = "fp32"
    fp8_recipe: str = "delayed"  # Transformer Engine's FP8 scaling (Megatron's default: delayed)


@value
class Data:
    """The spec's data section: paths or blend, split, packing."""

    packing: bool = False
    average_sequence_length: int | None = None
    paths: tuple[str | ShellRef | tuple[str, float], ...] = ()  # a prefix, or (prefix, weight) of a blend
    split: str | None = None
    cache_path: str | ShellRef | None = None
    mock: bool = False


@value
class Tokenizer:
    """The spec's tokenizer section."""

    type: str | None = None
    model: str | ShellRef | None = None
    vocab_file: str | ShellRef | None = None
    merge_file: str | ShellRef | None = None


@value
class Checkpoint:
    """The spec's checkpoint section: where, how often, how many, in which format."""

    dir: str | ShellRef | None = None
    interval: int | None = None
    keep_last: int | None = None  # the Trainer's --save_total_limit
    format: str | None = None
    async_save: bool = False
    schedule: str | None = None  # checkpoint | spec: which schedule a resumed run follows
    reshardable: bool = False  # Megatron-LM: the distributed optimizer saved fully reshardable
    universal: bool = False  # Megatron-DeepSpeed: load a universal checkpoint
    finetune_from: str | ShellRef | None = None


@value
class Logging:
    """The spec's logging section: wandb, tensorboard, throughput."""

    wandb_project: str | None = None
    wandb_run_name: str | None = None
    tensorboard_dir: str | ShellRef | None = None
    throughput: bool = False


@value
class Eval:
    """The spec's eval section: interval and iterations."""

    interval: int | None = None
    iters: int | None = None


@value
class Megatron:
    """Which Megatron-LM release or Megatron-DeepSpeed fork the files are written for."""

    version: str  # a Megatron-LM release: core_v0.12 ... core_v0.19 | latest
    fork: str = "microsoft"  # the Megatron-DeepSpeed fork: microsoft | bigscience


@value
class Launch:
    """How ranks are started: launcher, entry point, interpreter and pass-through arguments."""

    launcher: str
    entrypoint: str
    python: str
    extra_args: tuple[str | ShellRef, ...]
    env: tuple[tuple[str, str], ...]
    check_extra_args: bool = True
    arguments: tuple[tuple[str, str], ...] = ()  # (run field, a plain entry point's option)


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
    preflight: bool = False  # check every node (preflight.py) before the training step
    max_time: str | None = None  # the partition's MaxTime (GL314)


@value
class Spec:
    """The typed, frozen spec: every section, with where each value came from."""

    name: str
    framework: str
    cluster: Cluster
    model: Model
    parallelism: Parallelism
    batch: Batch
    training: Training
    launch: Launch
    slurm: Slurm
    megatron: Megatron
    source: str
    doc: Document = field(repr=False, compare=False)
    stage: str | None = None  # the stage this spec is (stages: see stage_specs)
    stage_names: tuple[str, ...] = ()
    auto: Any = field(default=None, repr=False, compare=False)  # autoplan.AutoPlan when searched
    data: Data = field(default_factory=Data)
    tokenizer: Tokenizer = field(default_factory=Tokenizer)
    checkpoint: Checkpoint = field(default_factory=Checkpoint)
    logging: Logging = field(default_factory=Logging)
    eval: Eval = field(default_factory=Eval)

    @property
    def uses_trainer(self) -> bool:
        """Hugging Face TrainingArguments (trainer_args.sh): FSDP2, and DeepSpeed through accelerate."""
        return framework_of(self.framework).uses_trainer(self.launch.launcher)

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


STAGE_RUN_LENGTH = ("train_tokens", "train_iters", "train_samples")


def stage_documents(spec: Spec) -> list[tuple[str, Document]]:
    """(stage name, document) per stage: the base with the stage's overrides (batch replaces the
    base batch, model and parallelism fields merge) and its own run length; named
    <name>-<stage> (run.py's stage_specs types them)."""
    stages = spec.doc.data.get("stages") or []
    out = []
    for stage in stages:
        data = copy.deepcopy({k: v for k, v in spec.doc.data.items() if k != "stages"})
        for section in ("model", "parallelism"):
            if section in stage:
                data[section] = {**data.get(section, {}), **stage[section]}
        if "batch" in stage:
            data["batch"] = copy.deepcopy(stage["batch"])
        data["training"] = {k: v for k, v in data["training"].items() if k not in STAGE_RUN_LENGTH}
        data["training"].update({k: stage[k] for k in STAGE_RUN_LENGTH if k in stage})
        data["name"] = f"{spec.name}-{stage['name']}"
        doc = Document(spec.doc.file, data, spec.doc.root, spec.doc.digest)
        validate(doc)
        out.append((stage["name"], doc))
    return out


def build_spec(doc: Document, auto: Any = None) -> Spec:
    """The typed spec of a document whose fields are all given (run.py's build_spec has
    auto-plan choose the fields left ``auto`` or to a list first, and passes its record)."""
    data = _with_defaults(doc.data, spec_schema())

    def count(section: str, key: str) -> int | None:
        value = data[section].get(key)
        if value is None:
            return None
        number = _located_count(doc, value, [section, key])
        if number <= 0:
            raise UserError(f"$.{section}.{key}: must be positive, got {value!r}",
                            doc.locate([section, key]))
        return number

    t = data["training"]
    return Spec(
        name=data["name"],
        framework=data["framework"],
        cluster=Cluster(**data["cluster"]),
        model=model_from(data["model"], lambda: doc.locate(["model"])),
        parallelism=Parallelism(**data["parallelism"]),
        batch=Batch(
            micro_batch_size=data["batch"].get("micro_batch_size"),
            gradient_accumulation_steps=data["batch"].get("gradient_accumulation_steps"),
            global_batch_size=data["batch"].get("global_batch_size"),
            tokens_per_step=count("batch", "tokens_per_step"),
            rampup=_rampup(doc, data["batch"].get("rampup")),
            schedule=_step_schedule(doc, data["batch"].get("schedule")),
        ),
        training=Training(
            precision=t["precision"],
            train_tokens=count("training", "train_tokens"),
            train_iters=count("training", "train_iters"),
            train_samples=count("training", "train_samples"),
            lr=float(t["lr"]) if t.get("lr") is not None else None,
            min_lr=float(t["min_lr"]),
            warmup=_warmup(doc, t["warmup"], count),
            decay=t["decay"],
            weight_decay=float(t["weight_decay"]),
            adam_betas=(float(t["adam_betas"][0]), float(t["adam_betas"][1])),
            adam_eps=float(t["adam_eps"]),
            gradient_clipping=float(t["gradient_clipping"]),
            recompute=t["recompute"],
            seed=t["seed"],
            log_interval=t["log_interval"],
            flash_attention=t["flash_attention"],
            lr_scaling=LRScaling(**t["lr_scaling"]) if t.get("lr_scaling") else None,
            target_loss=t["target_loss"],
            wsd_decay=parse_fraction(t["wsd_decay"], "$.training.wsd_decay"),
            optimizer_states=t["optimizer_states"], main_grads=t["main_grads"],
            fp8_recipe=t["fp8_recipe"],
        ),
        launch=Launch(
            launcher=data["launch"]["launcher"],
            entrypoint=data["launch"]["entrypoint"],
            python=data["launch"]["python"],
            extra_args=tuple(ShellRef(a["shell"]) if isinstance(a, dict) else a
                             for a in data["launch"]["extra_args"]),
            env=_env(doc, data["launch"]),
            check_extra_args=data["launch"].get("check_extra_args", True),
            arguments=_entry_point_arguments(doc, data),
        ),
        slurm=Slurm(**{**data["slurm"], "container_mounts": tuple(data["slurm"]["container_mounts"])}),
        megatron=Megatron(**data["megatron"]),
        data=_data(doc, data["data"]),
        tokenizer=Tokenizer(**{k: _word(v) for k, v in data["tokenizer"].items()}),
        checkpoint=_checkpoint(doc, data["checkpoint"]),
        logging=Logging(**{k: _word(v) for k, v in data["logging"].items()}),
        eval=Eval(**data["eval"]),
        source=doc.file,
        doc=doc,
        stage_names=tuple(st["name"] for st in data.get("stages") or ()),
        auto=auto,
    )


def _word(value: Any) -> Any:
    """A value that reaches a launch file as one word: {shell: "${NAME}/..."} is a run-time
    reference, anything else the value itself."""
    return ShellRef(value["shell"]) if isinstance(value, dict) and set(value) == {"shell"} else value


def _checkpoint(doc: Document, data: dict) -> Checkpoint:
    if data.get("async_save") and data.get("format") == "torch":
        raise UserError("$.checkpoint.async_save: Megatron saves in the background only in the torch_dist "
                        "format; set checkpoint.format: torch_dist (or leave it to the release's default)",
                        doc.locate(["checkpoint", "async_save"]))
    if data.get("reshardable") and data.get("format") == "torch":
        raise UserError("$.checkpoint.reshardable: the distributed optimizer's state is reshardable in the "
                        "torch_dist format only; set checkpoint.format: torch_dist (or leave it to the "
                        "release's default)", doc.locate(["checkpoint", "reshardable"]))
    return Checkpoint(**{k: _word(v) for k, v in data.items()})


def _entry_point_arguments(doc: Document, data: dict) -> tuple[tuple[str, str], ...]:
    """launch.arguments, for an entry point without a table of its own (plain DeepSpeed)."""
    given = data["launch"].get("arguments") or {}
    framework = framework_of(data["framework"])
    plain = framework.plain_deepspeed and not framework.uses_trainer(data["launch"]["launcher"])
    if given and not plain:
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


def _data(doc: Document, data: dict) -> Data:
    """The data section; a blend of several datasets gives each a weight (the forks read
    --data-path as weight-path pairs, Megatron-LM too once one weight is given)."""
    paths = data.get("paths") or []
    weighted = [isinstance(p, dict) and "weight" in p for p in paths]
    if len(paths) > 1 and not all(weighted):
        k = weighted.index(False)
        raise UserError(f"$.data.paths[{k}]: a blend of {len(paths)} datasets gives each a weight, e.g. "
                        "{path: /data/a_text_document, weight: 0.7}", doc.locate(["data", "paths", k]))
    return Data(**{**data, "paths": tuple((p["path"], float(p["weight"])) if isinstance(p, dict)
                                          and "weight" in p else _word(p) for p in paths),
                   "cache_path": _word(data.get("cache_path"))})


def _located_count(doc: Document, value: Any, path: list) -> int:
    """A count (8Mi, 1T, 4096) at ``path``, within the schema's maximum."""
    where = "$." + ".".join(map(str, path))
    try:
        number = parse_count(value, where)
    except ValueError as exc:
        raise UserError(str(exc), doc.locate(path)) from None
    limit = count_maximum(path)
    if limit is not None and number > limit:
        raise UserError(f"{where}: {value!r} is {number:,}; at most {limit:,}", doc.locate(path))
    return number


def _rampup(doc: Document, value: dict | None) -> tuple[int, int, int] | None:
    if not value:
        return None
    samples = _located_count(doc, value["samples"], ["batch", "rampup", "samples"])
    return value["start"], value["increment"], samples


def _step_schedule(doc: Document, value: list | None) -> tuple[tuple[int, int], ...] | None:
    if not value:
        return None
    return tuple((_located_count(doc, e["tokens"], ["batch", "schedule", k, "tokens"]),
                  e["global_batch_size"]) for k, e in enumerate(value))


# names launch.sbatch sets and reads itself (an export would change the run it describes)
SCRIPT_OWNED_ENV = ("NODES", "PROCS_PER_NODE", "WORLD_SIZE", "GEN_LAUNCH_DIR", "MEGATRON_ARGS",
                    "TRAINER_ARGS", "TRAIN_ARGS", "EXTRA_ARGS", "RANK", "LOCAL_RANK", "IFS")
# names whose value a bash child runs (BASH_ENV is sourced, prompts and PROMPT_COMMAND are
# expanded, SHELLOPTS turns on xtrace ...) or that decide which programs run
CODE_ENV = ("BASH_ENV", "ENV", "PROMPT_COMMAND", "PS1", "PS2", "PS3", "PS4", "SHELLOPTS", "BASHOPTS",
            "BASH_XTRACEFD", "PATH", "CDPATH", "GLOBIGNORE")


def _env(doc: Document, launch: dict) -> tuple[tuple[str, str], ...]:
    """launch.env, with the names that would change the script or run code refused (the latter
    unless launch.unsafe_env lists them)."""
    unsafe = set(launch.get("unsafe_env") or ())
    for name in launch["env"]:
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
    return tuple((k, _env_text(v)) for k, v in launch["env"].items())


def _env_text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _warmup(doc: Document, value: Any, count) -> Warmup:
    if isinstance(value, dict):
        (unit, _), = value.items()
        amount = _located_count(doc, value[unit], ["training", "warmup", unit])
        return Warmup(unit, amount)
    try:
        return Warmup("fraction", parse_fraction(value, "$.training.warmup"))
    except ValueError as exc:
        raise UserError(str(exc), doc.locate(["training", "warmup"])) from None


def model_from(given: dict[str, Any], where=lambda: None) -> Model:
    """The model a spec's `model` section describes: its preset, then the values given, then
    Megatron's defaults. ``where()`` locates the section for the error when fields are missing."""
    preset_name = given.get("preset")
    merged = {**(presets.models()[preset_name] if preset_name else {}),
              **{k: v for k, v in given.items() if v is not None or k in _NULL_IS_A_VALUE}}
    missing = [k for k in _MODEL_REQUIRED if merged.get(k) is None]
    if missing:
        raise UserError(f"$.model: missing {', '.join(missing)}; give them or choose a preset "
                        f"({', '.join(presets.models())})", where())
    h, heads = merged["hidden_size"], merged["num_attention_heads"]
    activation = merged.get("activation") or "gelu"
    ffn = merged.get("ffn_hidden_size")
    if ffn is None:
        # Megatron's default: 4h, or int(4h * 2/3 / 64) * 64 with --swiglu (arguments.py).
        ffn = (4 * h * 2 // 3 // 64) * 64 if activation == "swiglu" else 4 * h
    architecture = {name: default if merged.get(name) is None else merged[name]
                    for name, default in ARCHITECTURE.items()}
    for name in ("rotary_percent", "norm_epsilon", "attention_dropout", "hidden_dropout",
                 "init_method_std", "moe_aux_loss_coeff", "moe_z_loss_coeff", "moe_capacity_factor"):
        if architecture[name] is not None:
            architecture[name] = float(architecture[name])
    for name in ("rotary_base", "make_vocab_size_divisible_by", "moe_dense_layers", "moe_ffn_hidden_size",
                 "moe_shared_expert_intermediate_size"):  # counts: a whole-number float (1.0e+6) as one
        if architecture[name] is not None:
            architecture[name] = int(architecture[name])
    scaling = merged.get("rope_scaling")
    return Model(
        preset=preset_name,
        num_layers=merged["num_layers"],
        hidden_size=h,
        num_attention_heads=heads,
        num_query_groups=merged.get("num_query_groups") or heads,
        ffn_hidden_size=ffn,
        vocab_size=merged["vocab_size"],
        seq_length=merged["seq_length"],
        max_position_embeddings=merged.get("max_position_embeddings") or merged["seq_length"],
        num_experts=merged.get("num_experts"),
        moe_top_k=merged.get("moe_top_k"),
        activation=activation,
        normalization=merged.get("normalization") or "layernorm",
        position_embedding=merged.get("position_embedding") or "learned_absolute",
        tie_embeddings=merged.get("tie_embeddings", True),
        qkv_bias=architecture["linear_bias"] if merged.get("qkv_bias") is None else merged["qkv_bias"],
        rope_scaling=RopeScaling(**{k: float(v) if k != "original_max_position_embeddings" else int(v)
                                    for k, v in scaling.items()}) if scaling else None,
        kv_channels=int(merged.get("kv_channels") or h // heads),
        **architecture,
    )


def _with_defaults(data: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` with the schema's ``default`` values filled in, section by section."""
    out = dict(data)
    for key, sub in schema.get("properties", {}).items():
        if key not in out and "default" in sub:
            out[key] = sub["default"]
        if isinstance(out.get(key), dict) and sub.get("type") == "object":
            out[key] = _with_defaults(out[key], sub)
    return out
