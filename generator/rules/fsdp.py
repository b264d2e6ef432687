"""GL112-GL114: FSDP2 and Hugging Face accelerate (the data-parallel engines beside DeepSpeed)."""

from __future__ import annotations

from generator.frameworks import FRAMEWORKS, framework_of
from generator.rules.registry import rule

_LAUNCHER_TITLE = {"deepspeed": "DeepSpeed"}


@rule("GL112", "accelerate-processes-mismatch",
      "accelerate's process and machine counts must match the Slurm allocation.")
def accelerate_allocation(accelerate_num_processes: int, nodes: int,
                          accelerate_num_machines: int | None = None,
                          sbatch_gpus_per_node: int | None = None) -> str | None:
    """accelerate launch starts num_processes / num_machines processes on each machine and waits
    for num_machines machines: a count that differs from the allocation hangs at the rendezvous
    or leaves GPUs idle. Fix: num_machines = nodes and num_processes = nodes × GPUs per node (on
    the command line or in the config file).

    Example: an accelerate config with num_processes 8 launched on 2 nodes of 8 GPUs."""
    if accelerate_num_machines is not None and accelerate_num_machines != nodes:
        return (f"accelerate num_machines {accelerate_num_machines} ≠ {nodes} nodes allocated",
                ("accelerate_num_machines", "nodes"))
    if sbatch_gpus_per_node and accelerate_num_processes != nodes * sbatch_gpus_per_node:
        return (f"accelerate num_processes {accelerate_num_processes} ≠ {nodes} nodes × "
                f"{sbatch_gpus_per_node} GPUs allocated = {nodes * sbatch_gpus_per_node}",
                ("accelerate_num_processes", "nodes", "sbatch_gpus_per_node"))
    return None


@rule("GL113", "fsdp-settings", "FSDP2 shards data-parallel state; its settings must say how.")
def fsdp_settings(framework: str, zero_stage: int | None = None, tp: int | None = None,
                  pp: int | None = None, cp: int | None = None, zero_offload: str | None = None,
                  hybrid_shard: bool | None = None) -> str | None:
    """FSDP2 (fully_shard) re-shards the parameters after the forward pass (zero_stage 3, full
    shard) or keeps them for the backward (zero_stage 2, shard-grad-op); it has no tensor,
    pipeline or context parallelism of its own here, offloads parameters, gradients and optimizer
    states together (zero_offload optimizer_and_params), and hybrid sharding is an FSDP setting.
    torchtitan adds tensor, pipeline and context parallelism to FSDP2; the Trainer's does not.
    Fix: zero_stage 2 or 3, tp = pp = cp = 1, or framework torchtitan or megatron-lm for model
    parallelism.

    Example: framework fsdp with zero_stage 1."""
    if not framework_of(framework).fsdp:
        return ("hybrid_shard is an FSDP setting; use framework fsdp", ("hybrid_shard", "framework")) \
            if hybrid_shard else None
    if zero_stage is not None and zero_stage not in (2, 3):
        return (f"zero_stage {zero_stage} has no FSDP2 form; use 3 (full shard) or 2 "
                "(shard gradients and optimizer states)", ("zero_stage", "framework"))
    record = framework_of(framework)
    sizes = [f"{name} {value}" for name, value in (("tp", tp), ("pp", pp), ("cp", cp))
             if value and value > 1 and name not in record.model_parallel]
    if sizes:
        return (f"framework {framework} has no model parallelism here ({', '.join(sizes)}); use 1, or "
                "framework torchtitan or megatron-lm", ("tp", "pp", "cp", "framework"))
    if zero_offload == "optimizer":
        return ("FSDP2 offloads parameters, gradients and optimizer states together; use "
                "zero_offload optimizer_and_params or none", ("zero_offload", "framework"))
    return None


@rule("GL114", "launcher-framework", "The launcher must be able to start the framework.")
def launcher_framework(launcher: str, framework: str) -> str | None:
    """accelerate launch starts DeepSpeed and FSDP2 runs of a Trainer-style script (Megatron has
    its own arguments and launch); the DeepSpeed launcher does not set up FSDP. Fix: torchrun or
    srun for Megatron, accelerate or torchrun for fsdp.

    Example: launcher accelerate with framework megatron-lm."""
    record = framework_of(framework)
    if launcher in record.launchers:
        return None
    started = [name for name, f in FRAMEWORKS.items() if launcher in f.launchers]
    if launcher == "accelerate":
        return f"launcher accelerate starts {' and '.join(started)} runs, not {framework}; use torchrun"
    others = " or ".join(other for other in record.launchers if other != "srun")
    launcher = _LAUNCHER_TITLE.get(launcher, launcher)
    return f"the {launcher} launcher does not start {record.title} runs; use {others}"
