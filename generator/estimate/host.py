"""Host (CPU) memory of the most loaded node while a run loads its weights or resumes its
checkpoint: what each framework's load path holds in CPU memory at once, read from its code. A
common start-up failure: every rank of a node reading a full copy into CPU memory.

- Megatron-LM, --ckpt-format torch (and both Megatron-DeepSpeed forks' Megatron checkpoints):
  every rank torch.load()s its own file with map_location='cpu' (megatron/training/
  checkpointing.py): its tp/pp shard of the weights, and without the distributed optimizer the
  fp32 main weights and Adam moments in the same file. The distributed optimizer's state
  (distrib_optim.pt) is read whole by data-parallel rank 0 of each shard and scattered
  (DistributedOptimizer.load_parameter_state). torch_dist reads each rank's shards through
  torch.distributed.checkpoint into its own tensors: nothing of note on the host.
- Megatron-DeepSpeed: DeepSpeed's engine loads each rank's model-states file and its own ZeRO
  (or BF16_Optimizer) partition of the optimizer state onto the CPU first.
- The Hugging Face Trainer: every process's from_pretrained builds the whole model in CPU
  memory before the Trainer moves it, except under ZeRO-3 (zero.Init partitions it while it
  loads) and FSDP with cpu_ram_efficient_loading (the local rank 0 of each node loads it, the
  others start empty; transformers' modeling_utils), which gen-launch's FSDP files turn on.
"""

from __future__ import annotations

import re

from generator.estimate.memory import GIB, Layout, rank_params, state_bytes_per_param
from generator.estimate.params import Shape, count_params
from generator.values import value


def state_bytes(layout: Layout) -> float:
    """Bytes per parameter of the optimizer's state as a checkpoint holds it, unsharded: the
    memory estimate's own count (fp32 main weights and Adam's moments, by precision and
    training.optimizer_states)."""
    return state_bytes_per_param(layout.precision, "none", 1, layout.optimizer_states, layout.main_grads)[2]


@value
class HostLoad:
    """The CPU memory a node needs while its ranks load the checkpoint."""

    bytes_per_node: float  # on the most loaded node
    how: str  # the load path, in words
    capacity: float | None  # the node's CPU memory in bytes (None: not known)
    source: str | None = None  # the spec field the capacity comes from

    @property
    def fits(self) -> bool | None:
        return None if self.capacity is None else self.bytes_per_node <= self.capacity

    def to_json(self) -> dict:
        return {"gib_per_node": round(self.bytes_per_node / GIB, 2), "how": self.how,
                "capacity_gib": None if self.capacity is None else round(self.capacity / GIB, 2),
                "fits": self.fits}


def optimizer_rank_zeros(layout: Layout, gpus_per_node: int) -> int:
    """The ranks of the first node that are data-parallel rank 0 of their shard (the dp × cp
    group's ranks lie tp apart): those read the distributed optimizer's whole file."""
    span = layout.tp * layout.cp * layout.dp
    world = span * layout.pp
    return sum(1 for rank in range(min(gpus_per_node, world)) if rank % span < layout.tp)


def node_capacity(spec) -> tuple[float | None, str | None]:
    """A node's CPU memory: cluster.host_memory_gib, else slurm.mem where it names an amount
    (sbatch --mem: megabytes unless K, M, G or T follows; 0 asks for all of it, unknown here)."""
    if spec.cluster.host_memory_gib is not None:
        return spec.cluster.host_memory_gib * GIB, "cluster.host_memory_gib"
    match = re.fullmatch(r"([0-9]+)([KMGT]?)", spec.slurm.mem or "")
    if match is None or int(match.group(1)) == 0:
        return None, None
    scale = {"K": 1 << 10, "M": 1 << 20, "": 1 << 20, "G": 1 << 30, "T": 1 << 40}[match.group(2)]
    return int(match.group(1)) * scale, "slurm.mem"


def host_load(plan, shape: Shape, layout: Layout) -> HostLoad | None:
    """The host memory of the most loaded node at load; None when the run loads nothing that
    gen-launch knows of (a fresh Megatron run, a plain DeepSpeed script's own loading)."""
    spec = plan.spec
    per_node = spec.cluster.gpus_per_node
    capacity, source = node_capacity(spec)
    weight_bytes = 4 if spec.training.precision == "fp32" else 2
    if plan.uses_trainer:
        model = count_params(shape).total * weight_bytes
        if plan.framework_record.fsdp:
            return HostLoad(model, "from_pretrained on each node's local rank 0 (FSDP "
                            "cpu_ram_efficient_loading; the others start empty)", capacity, source)
        if plan.zero_stage == 3:
            return HostLoad(model / plan.world_size * per_node, "from_pretrained under ZeRO-3's "
                            "zero.Init: each rank keeps its partition", capacity, source)
        return HostLoad(model * per_node, f"from_pretrained in each of the node's {per_node} "
                        "processes: a whole copy each", capacity, source)
    ckpt = spec.checkpoint
    if not plan.uses_megatron or (ckpt.dir is None and ckpt.finetune_from is None):
        return None
    resume = ckpt.dir is not None  # the folder it saves to is the one it resumes from
    what = "resuming from checkpoint.dir" if resume else "loading checkpoint.finetune_from (weights only)"
    params = sum(rank_params(shape, layout))
    if plan.uses_deepspeed:
        optimizer = state_bytes(layout) * params / max(plan.dp, 1) if resume else 0.0
        return HostLoad(per_node * (weight_bytes * params + optimizer), f"{what}: DeepSpeed's engine "
                        "loads each rank's model states and optimizer partition onto the CPU",
                        capacity, source)
    weights = per_node * weight_bytes * params
    if not resume:  # Megatron reads the format it finds; tools/checkpoint's converters write torch
        return HostLoad(weights, f"{what}: in torch format (as tools/checkpoint writes it) every rank "
                        "torch.load()s its file to the CPU; a torch_dist one would not", capacity, source)
    if plan.checkpoint_format == "torch_dist":
        return HostLoad(0.0, f"{what}: torch_dist reads each rank's shards into its own tensors",
                        capacity, source)
    if layout.sharding == "distributed_optimizer":
        optimizer = optimizer_rank_zeros(layout, per_node) * state_bytes(layout) * params
    else:
        optimizer = per_node * state_bytes(layout) * params
    return HostLoad(weights + optimizer, f"{what}: --ckpt-format torch, every rank torch.load()s its "
                    "file to the CPU" + (" and data-parallel rank 0 the distributed optimizer's"
                                         if layout.sharding == "distributed_optimizer" else ""),
                    capacity, source)
