"""Which spec fields auto-plan may choose, and the values it tries for each.

A field is searched when the spec gives ``auto`` (the default range below) or a list (exactly
those values); every other field stays as the spec gives it. The default ranges are the usual
bounds (tp within a node, or an NVLink domain's 8 GPUs where the domain spans nodes, as GB200
NVL72's trays; pp up to the layer count, power-of-two cp); the structural rules then
prune them (generator/autoplan/search.py).
"""

from __future__ import annotations

from typing import Any

from generator import presets
from generator.dialects import dialect_of
from generator.dialects.arguments import unexpressed
from generator.estimate.plan import nvlink_gpus
from generator.frameworks import framework_of
from generator.rules.suggest import divisors

# short name -> (dotted path, the placeholder a template spec holds while the field is searched)
FIELDS = {
    "tp": ("parallelism.tp", 1), "pp": ("parallelism.pp", 1), "cp": ("parallelism.cp", 1),
    "ep": ("parallelism.ep", 1), "vpp": ("parallelism.vpp", 1),
    "zero_stage": ("parallelism.zero_stage", None),
    "distributed_optimizer": ("parallelism.distributed_optimizer", False),
    "micro_batch_size": ("batch.micro_batch_size", None), "recompute": ("training.recompute", "none"),
}
MICRO_BATCHES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)  # NeMo AutoConfigurator tries 1-8
CONTEXT_PARALLEL = (1, 2, 4, 8, 16, 32)


def _get(data: dict, dotted: str) -> Any:
    section, key = dotted.split(".")
    return (data.get(section) or {}).get(key)


def searched(data: dict) -> dict[str, Any]:
    """{dotted path: "auto" or the list given} for every field the spec leaves to auto-plan."""
    out = {}
    for path, _ in FIELDS.values():
        value = _get(data, path)
        if value == "auto" or isinstance(value, list):
            out[path] = value
    return out


def placeholders(data: dict) -> dict:
    """A copy of the spec data with each searched field at its placeholder (a valid template)."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    placeholder = dict(FIELDS.values())
    for path in searched(data):
        section, key = path.split(".")
        out[section][key] = placeholder[path]
        if placeholder[path] is None:
            del out[section][key]
    return out


def domains(given: dict[str, Any], spec) -> dict[str, list]:
    """The values to try per field: "auto" -> the default range, a list -> the list, a field
    the spec fixes -> its one value (``spec`` is the template, fixed fields as given)."""
    default, p = _defaults(spec), spec.parallelism
    # a stage not given is the framework's default (FSDP's 3), as the plan takes it
    stage = p.zero_stage if p.zero_stage is not None else framework_of(spec.framework).default_zero_stage
    fixed = {"tp": p.tp, "pp": p.pp, "cp": p.cp, "ep": p.ep, "vpp": p.vpp, "zero_stage": stage,
             "distributed_optimizer": p.distributed_optimizer,
             "micro_batch_size": spec.batch.micro_batch_size, "recompute": spec.training.recompute}
    out = {}
    for key, (path, _) in FIELDS.items():
        value = given.get(path)
        out[key] = default[key] if value == "auto" else list(value) if isinstance(value, list) \
            else [fixed[key]]
    return out


def narrowed(given: dict[str, Any], spec) -> list[str]:
    """A note for each field left to auto whose range is one value (the framework cannot vary
    it), so that a search of "tp: auto" on plain DeepSpeed does not pass for a search of tp."""
    default, fw, m = _defaults(spec), framework_of(spec.framework), spec.model
    # the framework's reason where it is the framework that narrows the range
    why = {
        "tp": fw.plain_deepspeed and f"plain {fw.title} trains your script's model unsplit (tensor "
        "parallelism is Megatron's layers)",
        "pp": fw.plain_deepspeed and f"{fw.title}'s pipeline engine is searched only from a list "
        "(e.g. parallelism.pp: [1, 2, 4])",
        "cp": fw.megatron_arguments and not fw.megatron_core and f"{fw.title} has no context parallelism",
        "ep": not m.num_experts and "a dense model has no experts",
        "vpp": not fw.megatron_core and f"{fw.title} has no interleaved (virtual pipeline) schedule",
        "zero_stage": fw.sharding == "distributed_optimizer" and
        f"{fw.title} shards with the distributed optimizer, not ZeRO stages",
        "distributed_optimizer": fw.sharding != "distributed_optimizer" and
        f"{fw.title} has no distributed optimizer (parallelism.zero_stage shards it)",
    }
    out = []
    for key, (path, _) in FIELDS.items():
        values = default[key]
        if given.get(path) == "auto" and len(values) == 1 and values != ["auto"]:  # (vpp: per pp)
            shown = "none" if values[0] is None else str(values[0]).lower()
            reason = why.get(key) or "no other value fits this cluster, model and dialect"
            out.append(f"{path}: auto searches {shown} alone: {reason}")
    return out


def _defaults(spec) -> dict[str, list]:
    """Each field's range under "auto" for this spec's framework, cluster and model."""
    c, m, fw = spec.cluster, spec.model, framework_of(spec.framework)
    world = c.nodes * c.gpus_per_node
    megatron = not fw.plain_deepspeed  # tensor and pipeline parallel layers
    reach = nvlink_gpus(presets.gpus().get(c.gpu, {}), c.gpus_per_node)
    return {
        # within an NVLink domain (up to 8 where it spans nodes); DeepSpeed has no tp
        "tp": [d for d in divisors(reach) if d <= max(c.gpus_per_node, 8)] if megatron else [1],
        # pp dividing the world, at most the layers; DeepSpeed's pipeline engine only when listed
        "pp": [d for d in divisors(world) if d <= m.num_layers] if megatron else [1],
        "cp": [x for x in CONTEXT_PARALLEL if x <= world] if fw.megatron_core or not fw.megatron_arguments
        else [1],
        "ep": divisors(m.num_experts) if m.num_experts else [1],
        "vpp": ["auto"] if fw.megatron_core else [1],  # per pp: see virtual_stages
        "zero_stage": [None] if fw.sharding == "distributed_optimizer" else [0, 1, 2, 3],
        "distributed_optimizer": [False, True] if fw.sharding == "distributed_optimizer" else [False],
        "micro_batch_size": list(MICRO_BATCHES),
        "recompute": expressible(spec, "recompute", ["none", "selective", "full"]),
    }


def expressible(spec, name: str, values: list) -> list:
    """The values of ``name`` that the spec's Megatron dialect can write (all without one)."""
    d = dialect_of(spec)
    return values if d is None else [v for v in values if name not in unexpressed(d, {name: v})]


def virtual_stages(choice: list, layers_per_stage: int, pp: int) -> list[int]:
    """vpp values for one pp: "auto" means every divisor of the stage's layers (interleaving
    needs pp > 1); a list is taken as given."""
    if choice != ["auto"]:
        return choice
    return divisors(layers_per_stage) if pp > 1 else [1]
