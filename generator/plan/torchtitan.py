"""A plan as torchtitan runs it: the config function its release names (the preset's model
flavor, in torchtitan_config.py) and the values torchtitan.yaml's entries write over it.

Batch: torchtitan splits a dp rank's local batch into pipeline micro-batches of
pipeline_parallel_microbatch_size and accumulates global / (local × dp) local batches (0.3.0
trainer.py). Without pipelining the plan's micro batch is the local batch; with it the plan's
accumulation steps are the pipeline's micro-batches (as Megatron's schedules run them): local =
micro × accumulation and torchtitan accumulates once.
"""

from __future__ import annotations

from typing import Any

from generator.dialects import Dialect, dialect, table
from generator.errors import UserError
from generator.frameworks import framework_of
from generator.spec.model import model_from
from generator.values import value

CONFIG_MODULE = "torchtitan_config"  # torchtitan_config.py beside torchtitan_args.sh
CONFIG_FUNCTION = "gen_launch_run"
# the run's FP8 converters are of this module (the table names the classes)
QUANTIZATION = "torchtitan.components.quantization"
# the spec's decay -> (torchtitan's decay_type, decay_ratio: None decays right after warmup)
_DECAY = {"cosine": ("cosine", None), "linear": ("linear", None), "constant": (None, 0.0)}


@value
class RegistryModel:
    """A preset as torchtitan builds it: the model module, the config function the run starts
    from, and the flavor its model_registry takes."""

    module: str
    config: str
    flavor: str


def registry_dialect(spec) -> Dialect:
    """The config registry's table at the spec's release (framework.dialect_setting)."""
    record = framework_of(spec.framework)
    section, name = record.dialect_setting.split(".")
    return dialect(record.name, getattr(getattr(spec, section), name))


def registry_model(spec) -> RegistryModel:
    """The preset's torchtitan model, or a located refusal: a model without a preset, a preset
    torchtitan has no flavor for, or preset fields the spec changes (a flavor is fixed)."""
    models = table(spec.framework)["models"]
    preset = spec.model.preset
    if preset not in models:
        raise UserError(f"$.model.preset: torchtitan builds its models from its own flavors; "
                        f"{preset or 'a model without a preset'} has none. Use one of {', '.join(models)}, "
                        "or framework megatron-lm",
                        spec.doc.locate(["model", "preset"] if preset else ["model"]))
    flavor = model_from({"preset": preset})
    changed = [k for k in spec.doc.data.get("model", {}) if k not in ("preset", "seq_length")
               and getattr(spec.model, k, None) != getattr(flavor, k, None)]
    if changed:
        raise UserError(f"$.model: torchtitan's flavor {models[preset][2]} fixes the architecture; "
                        f"remove {', '.join(changed)}, or give {preset}'s values (only seq_length is a "
                        "training setting)",
                        spec.doc.locate(["model", changed[0]], key=True))
    if spec.training.precision == "fp16":
        raise UserError("$.training.precision: torchtitan trains its parameters in bfloat16 or float32, not "
                        "float16; use bf16 (or fp8: bf16 with FP8 linear layers)",
                        spec.doc.locate(["training", "precision"]))
    return RegistryModel(*models[preset])


@value
class Converter:
    """An FP8 converter torchtitan_config.py gives the flavor (precision fp8)."""

    name: str  # of torchtitan.components.quantization
    keywords: tuple[tuple[str, Any], ...]  # its Config's, as the table gives them (lists as tuples)
    compiled: bool  # the run compiles the model (the converter is told, as torchtitan's own are)


def fp8_converters(spec) -> tuple[Converter, ...]:
    """The converters of the spec's fp8_recipe (GL226 refuses a recipe the table lacks): the linear
    layers', and with experts (an MoE preset) the grouped experts' too, the linear one then told
    which layers stay in bf16."""
    if spec.training.precision != "fp8":
        return ()
    entry = table(spec.framework)["fp8"][spec.training.fp8_recipe]
    name, recipe = entry["linear"]
    linear = {"recipe_name": recipe} if recipe else {}
    compiled = spec.torchtitan.compile
    if not spec.model.num_experts:
        return (Converter(name, _keywords(linear), compiled),)
    experts, keywords = entry["experts"]
    return (Converter(name, _keywords({**linear, **entry["moe_linear"]}), compiled),
            Converter(experts, _keywords(keywords), compiled))


def _keywords(given: dict) -> tuple[tuple[str, Any], ...]:
    return tuple((key, tuple(v) if isinstance(v, list) else v) for key, v in given.items())


def layers_per_stage(plan) -> int:
    """pipeline_parallel_layers_per_stage for pp × vpp stages: torchtitan makes ceil((layers +
    the embedding's and output's share) / layers per stage) stages; a refusal where none does."""
    first, last = table(plan.framework)["stage_less_layers"]
    weighted, stages = plan.model.num_layers + first + last, plan.pp * plan.vpp
    per_stage = -(-weighted // stages)
    if -(-weighted // per_stage) != stages:
        layers = plan.model.num_layers
        raise UserError(f"$.parallelism.vpp: torchtitan splits {layers} layers (+ {first + last} for the "
                        f"embedding and output) into stages of equal size; no size gives pp {plan.pp} × vpp "
                        f"{plan.vpp} = {stages} stages (use another vpp)",
                        plan.spec.doc.locate(["parallelism", "vpp"]))
    return per_stage


def torchtitan_values(plan) -> dict[str, Any]:
    """The values torchtitan.yaml's entries write, and those its comments name."""
    s, t = plan.spec, plan.spec.training
    model = registry_model(s)
    piped = plan.pp > 1
    local = plan.micro_batch_size * (plan.gradient_accumulation_steps if piped else 1)
    decay_type, decay_ratio = _DECAY.get(t.decay, ("linear", float(t.wsd_decay)))
    interleaved = piped and plan.vpp > 1
    return {
        "titan_module": CONFIG_MODULE, "titan_config": CONFIG_FUNCTION,
        "titan_model": model.module, "flavor": model.flavor,
        "world_size": plan.world_size, "dp": plan.dp,
        "dp_replicate": plan.dp_replicate, "dp_shard": plan.dp_shard,
        "tp": plan.tp, "cp": plan.cp, "pp": plan.pp, "ep": plan.ep,
        "titan_sequence_parallel": s.parallelism.sequence_parallel if plan.tp > 1 else None,
        "pp_schedule": ("Interleaved1F1B" if interleaved else "1F1B") if piped else None,
        "pp_microbatch_size": plan.micro_batch_size if piped else None,
        "pp_layers_per_stage": layers_per_stage(plan) if interleaved else None,
        "local_batch_size": local, "global_batch_size": plan.global_batch_size,
        "titan_accumulation": plan.global_batch_size // (local * plan.dp),
        "seq_length": plan.model.seq_length, "train_iters": plan.schedule.train_iters,
        # the parser refuses CUDA graphs with pipelining, and with the experts' default all-to-all
        "precision": t.precision, "disable_cuda_graphs": piped or plan.ep > 1,
        "lr": plan.lr, "lr_warmup_iters": plan.schedule.warmup_iters,
        "warmup_steps": plan.schedule.warmup_iters, "decay": t.decay,
        "titan_decay_type": decay_type, "titan_decay_ratio": decay_ratio,
        "min_lr_factor": plan.min_lr_ratio if decay_type is not None else None,
        "compile": s.torchtitan.compile, "tp_comm_overlap": s.parallelism.tp_comm_overlap,
        # the config function compiles: a run that does not says so (--compile.no_enable)
        "titan_function_compiles": model.config in table(s.framework).get("compiling", ()),
        "compile_components": "model,loss" if s.torchtitan.compile else None,
        "checkpoint_enable": s.checkpoint.dir is not None,
        "save": s.checkpoint.dir, "save_interval": s.checkpoint.interval if s.checkpoint.dir else None,
        "keep_last": s.checkpoint.keep_last if s.checkpoint.dir else None,
        "recompute": t.recompute,
    }
