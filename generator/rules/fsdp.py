"""GL112-GL114, GL117, GL240, GL241: FSDP2 and Hugging Face accelerate (the data-parallel engines
beside DeepSpeed), Megatron-LM's replicas of its distributed optimizer (HSDP), torchtitan's async
tensor parallelism."""

from __future__ import annotations

from generator.frameworks import FRAMEWORKS, framework_of
from generator.rules.registry import rule
from generator.rules.suggest import divisors

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
                  hybrid_shard: bool | None = None, launcher: str | None = None) -> str | None:
    """FSDP2 (fully_shard) re-shards the parameters after the forward pass (zero_stage 3, full
    shard) or keeps them for the backward (zero_stage 2, shard-grad-op); it has no tensor,
    pipeline or context parallelism of its own here, offloads parameters, gradients and optimizer
    states together (zero_offload optimizer_and_params), and hybrid sharding is an FSDP setting.
    torchtitan adds tensor, pipeline and context parallelism to FSDP2; the Trainer's FSDP2 adds
    tensor and context parallelism through accelerate's parallelism_config (launcher accelerate).
    Fix: zero_stage 2 or 3, tp = pp = cp = 1, launcher accelerate for tp and cp, or framework
    torchtitan or megatron-lm for model parallelism.

    Example: framework fsdp with zero_stage 1."""
    if not framework_of(framework).fsdp:
        return ("hybrid_shard is an FSDP setting; use framework fsdp", ("hybrid_shard", "framework")) \
            if hybrid_shard else None
    if zero_stage is not None and zero_stage not in (2, 3):
        return (f"zero_stage {zero_stage} has no FSDP2 form; use 3 (full shard) or 2 "
                "(shard gradients and optimizer states)", ("zero_stage", "framework"))
    record = framework_of(framework)
    given = [(name, value) for name, value in (("tp", tp), ("pp", pp), ("cp", cp)) if value and value > 1]
    sizes = [f"{name} {value}" for name, value in given if name not in record.model_parallel]
    if sizes:
        return (f"framework {framework} has no model parallelism here ({', '.join(sizes)}); use 1, or "
                "framework torchtitan or megatron-lm", ("tp", "pp", "cp", "framework"))
    carrier = record.model_parallel_launcher
    if given and carrier is not None and launcher is not None and launcher != carrier:
        sizes = [f"{name} {value}" for name, value in given]
        return (f"framework {framework} takes {', '.join(sizes)} from {carrier}'s config; use launcher "
                f"{carrier}, or 1", ("tp", "cp", "launcher", "framework"))
    if zero_offload == "optimizer":
        return ("FSDP2 offloads parameters, gradients and optimizer states together; use "
                "zero_offload optimizer_and_params or none", ("zero_offload", "framework"))
    return None


@rule("GL117", "accelerate-parallelism-config",
      "accelerate's ParallelismConfig needs FSDP2 to shard over dp_shard or cp.")
def accelerate_parallelism(dp_shard: int, launcher: str, framework: str, dp_replicate: int | None = None,
                           tp: int | None = None, cp: int | None = None) -> str | None:
    """accelerate 1.15 builds its device mesh from parallelism_config (dp_replicate × dp_shard ×
    cp × tp = the processes): FSDP2 shards over dp_shard × cp, so ``_validate_accelerator``
    refuses a config where both are 1, and the ParallelismConfig constructor refuses tp or cp
    beside replicas of a one-rank shard group. (Tensor parallelism also needs transformers ≥
    4.52 installed where the run trains.) Fix: fewer tp ranks, so that dp_shard > 1, or cp > 1.

    Example: 8 GPUs with tp 8 (dp_shard 1, cp 1)."""
    record = framework_of(framework)
    tp, cp, dp_replicate = tp or 1, cp or 1, dp_replicate or 1
    if launcher != record.model_parallel_launcher or (tp == cp == dp_replicate == 1):
        return None  # no parallelism_config: accelerate's plain FSDP2 over every process
    if dp_shard == 1 and cp == 1:
        return (f"accelerate's FSDP2 shards over dp_shard × cp = 1 (tp {tp}, dp_replicate {dp_replicate}); "
                "use a smaller tp so that dp_shard > 1, or cp > 1", ("dp_shard", "cp", "tp", "dp_replicate"))
    if dp_shard == 1 and dp_replicate > 1 and (tp > 1 or cp > 1):
        return (f"accelerate refuses tp {tp} / cp {cp} beside dp_replicate {dp_replicate} of dp_shard 1; "
                f"give dp_shard {dp_replicate} instead of dp_replicate",
                ("dp_replicate", "dp_shard", "tp", "cp"))
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


@rule("GL240", "distributed-optimizer-instances",
      "Megatron-LM replicates a distributed optimizer, over data-parallel groups the replicas divide.")
def optimizer_instances(dp_replicate: int, framework: str, world_size: int,
                        distributed_optimizer: bool | None = None, megatron_fsdp: bool | None = None,
                        tp: int | None = None, pp: int | None = None, ep: int | None = None,
                        etp: int | None = None) -> str | None:
    """Megatron-LM's --num-distributed-optimizer-instances N (dp_replicate) shards the distributed
    optimizer (or Megatron-FSDP's state: its HSDP) over dp × cp / N ranks and keeps N replicas of
    it: there must be a distributed optimizer to replicate, and megatron-core's parallel_state
    asserts that N divides the data-parallel size (``Data parallel size should be divisible by
    partial DistOpt shard factor``, GL026) and, with experts, the expert data-parallel size world
    / (etp × ep × pp) (``Expert data parallel size should be divisible by partial DistOpt shard
    factor``) when the process groups are built. Fix: distributed_optimizer: true (or
    megatron_fsdp: true), and a dp_replicate that divides both.

    Example: dp_replicate 2 without the distributed optimizer; 64 GPUs with ep 32, pp 2 (expert
    data-parallel 1) and dp_replicate 2."""
    if dp_replicate <= 1 or framework_of(framework).sharding != "distributed_optimizer":
        return None
    if not (distributed_optimizer or megatron_fsdp):
        return (f"dp_replicate {dp_replicate} (--num-distributed-optimizer-instances) replicates the "
                "distributed optimizer, and this run has none; set distributed_optimizer: true (or "
                "megatron_fsdp: true), or dp_replicate 1", ("dp_replicate", "distributed_optimizer"))
    ep, pp = ep or 1, pp or 1
    etp = etp or tp or 1
    grid = etp * ep * pp
    if ep == 1 or world_size % grid:
        return None  # GL003's
    expert_dp = world_size // grid
    if expert_dp % dp_replicate == 0:
        return None
    return (f"dp_replicate {dp_replicate} does not divide the expert data-parallel size {expert_dp} = world "
            f"{world_size} / (etp {etp} × ep {ep} × pp {pp}); use dp_replicate in {divisors(expert_dp)}, "
            "or a smaller ep", ("dp_replicate", "ep", "etp", "pp", "world_size"))


@rule("GL241", "async-tp-needs-compile", "torchtitan's async tensor parallelism is a pass of torch.compile.")
def async_tp_compile(tp_comm_overlap: bool, framework: str, compile: bool | None = None) -> str | None:
    """torchtitan pipelines the tensor-parallel collectives with the matmuls (async TP,
    parallelism.tp_comm_overlap: --compile.enable_async_tensor_parallel) in Inductor's
    micro-pipeline pass: its CompileConfig refuses the option without compiling the model
    (``Async TP requires 'model' in --compile.components and --compile.enable``). A command line
    without --compile.enable may name a config function that compiles (torchtitan's llama3_405b
    does): only a run known not to compile is refused. Fix: torchtitan.compile: true, or leave the
    overlap off.

    Example: tp_comm_overlap: true with torchtitan.compile: false."""
    if not tp_comm_overlap or not framework_of(framework).config_registry or compile is None or compile:
        return None
    return ("tp_comm_overlap is torchtitan's async TP (--compile.enable_async_tensor_parallel), a pass of "
            "torch.compile, and torchtitan refuses it without --compile.enable; set torchtitan.compile: "
            "true, or leave the overlap off", ("tp_comm_overlap", "compile"))
