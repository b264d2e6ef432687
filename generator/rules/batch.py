"""GL0xx: world, data-parallel and batch arithmetic (Megatron validate_args, the microbatch
calculator and DeepSpeed's _batch_assertion agree on these). Codes GL001-GL012 are the linter's
contract."""

from __future__ import annotations

from generator.frameworks import framework_of, frameworks_where
from generator.rules.registry import rule
from generator.rules.suggest import divisors, nearest_multiples, or_list, world_alternatives


def micro_alternatives(global_batch_size: int, micro_batch_size: int, dp: int) -> list[str]:
    """Micro batch sizes near ``micro_batch_size`` that divide the global batch at this dp."""
    if global_batch_size % dp:
        return []
    per_rank = global_batch_size // dp
    candidates = divisors(per_rank)
    lower = [d for d in candidates if d < micro_batch_size][-1:]
    upper = [d for d in candidates if d > micro_batch_size][:1]
    return [f"micro {m} with accumulation {per_rank // m}" for m in lower + upper]


@rule("GL001", "batch-mismatch", "train batch = micro × accumulation × dp must hold exactly.")
def batch_mismatch(global_batch_size: int, micro_batch_size: int, gradient_accumulation_steps: int,
                   dp: int) -> str | None:
    """DeepSpeed: ``train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step *
    world_size``. When the three numbers are written in different places they drift apart and
    the run either crashes at start-up or trains with a batch other than the one written down.
    Fix: give any two of them and let the third be derived.

    Example: train_batch_size 1000 with micro 4, accumulation 8 on dp 32 (4 × 8 × 32 = 1024)."""
    product = micro_batch_size * gradient_accumulation_steps * dp
    if product == global_batch_size:
        return None
    return (f"global batch {global_batch_size} != micro {micro_batch_size} × accumulation "
            f"{gradient_accumulation_steps} × dp {dp} = {product}; give two of the three and let "
            "the third be derived")


@rule("GL002", "global-batch-not-divisible",
      "The global batch must be a multiple of micro batch × dp (or accumulation × dp).")
def global_not_divisible(global_batch_size: int, dp: int, micro_batch_size: int | None = None,
                         gradient_accumulation_steps: int | None = None,
                         framework: str | None = None) -> str | None:
    """Megatron's microbatch calculator asserts ``global batch size (G) is not divisible by micro batch
    size (B) times data parallel size (D)``; DeepSpeed floors and then fails its batch
    assertion, also for a config with train_batch_size alone (accumulation 1, micro = train
    batch / dp). Fix: pick a global batch that is a multiple, or a micro batch that divides it.

    Example: --global-batch-size 1000 --micro-batch-size 16 on dp 32: 1000 is not a multiple of
    512."""
    if micro_batch_size is None and gradient_accumulation_steps is None and \
            framework_of(framework).plain_deepspeed:
        if global_batch_size % dp == 0:
            return None
        return (f"train_batch_size {global_batch_size} alone is not divisible by dp {dp} (DeepSpeed "
                f"takes accumulation 1 and micro = train batch / dp); use "
                f"{or_list(nearest_multiples(global_batch_size, dp))}, or give the micro batch")
    if micro_batch_size is not None:
        step = micro_batch_size * dp
        if global_batch_size % step == 0:
            return None
        alternatives = [str(m) for m in nearest_multiples(global_batch_size, step)]
        alternatives += micro_alternatives(global_batch_size, micro_batch_size, dp)
        return (f"global batch {global_batch_size} is not divisible by micro {micro_batch_size} × "
                f"dp {dp} = {step}; use {or_list(alternatives)}")
    if gradient_accumulation_steps is not None:
        step = gradient_accumulation_steps * dp
        if global_batch_size % step == 0:
            return None
        return (f"global batch {global_batch_size} is not divisible by accumulation "
                f"{gradient_accumulation_steps} × dp {dp} = {step}; use "
                f"{or_list(nearest_multiples(global_batch_size, step))}")
    return None


@rule("GL003", "world-not-divisible",
      "The world size must be divisible by tp × pp × cp, and with experts by etp × ep × pp.")
def world_not_divisible(world_size: int, tp: int, pp: int, cp: int, ep: int | None = None,
                        etp: int | None = None, procs_per_node: int | None = None) -> str | None:
    """Megatron computes dp = world / (tp × pp × cp) and asserts the division is exact (``world size
    (W) is not divisible by total_model_size``); megatron-core builds expert data-parallel
    groups of world / (etp × ep × pp) (parallel folding, core ≥ 0.10) and raises ``world_size
    (W) is not divisible by expert_tensor_model_pipeline_parallel size (N)``; EP need not divide
    dp. Fix: change the node count (the nearest counts that fit are suggested, in whole nodes
    where the GPUs per node are known) or the parallel sizes.

    Example: tp 8 × pp 2 = 16 on 3 nodes × 8 GPUs = 24 (use 2 or 4 nodes); experts: etp 1 ×
    ep 8 × pp 4 = 32 on 8 GPUs."""
    model = tp * pp * cp
    if world_size % model:
        return (f"world size {world_size} is not divisible by tp {tp} × pp {pp} × cp {cp} = "
                f"{model}; use {world_alternatives(world_size, model, procs_per_node)}, or "
                f"parallel sizes whose product divides {world_size}")
    ep, etp = ep or 1, etp or tp
    grid = etp * ep * pp
    if ep == 1 or world_size % grid == 0:
        return None
    return (f"world size {world_size} is not divisible by etp {etp} × ep {ep} × pp {pp} = {grid} "
            f"(the expert grid); use {world_alternatives(world_size, grid, procs_per_node)} "
            "or a smaller ep")


@rule("GL011", "seq-not-divisible-by-2cp",
      "With context parallelism the sequence length must be a multiple of 2 × cp.")
def seq_cp(seq_length: int, cp: int, framework: str) -> str | None:
    """Megatron: ``seq-length should be a multiple of 2 * context-parallel-size if context-parallel-
    size > 1.`` (each rank takes two load-balanced chunks). Fix: a sequence length that is a
    multiple of 2 × cp.

    Example: --seq-length 2050 with --context-parallel-size 2 (needs a multiple of 4)."""
    if cp == 1 or not framework_of(framework).megatron_core or seq_length % (2 * cp) == 0:
        return None
    return (f"seq_length {seq_length} is not divisible by 2 × cp {cp} = {2 * cp}; use seq_length "
            f"{or_list(nearest_multiples(seq_length, 2 * cp))}")


@rule("GL012", "experts-not-divisible-by-ep", "The number of experts must be a multiple of ep.")
def experts_ep(num_experts: int, ep: int) -> str | None:
    """Megatron: ``Number of experts should be a multiple of expert model parallel_size.`` Fix: an ep
    that divides the number of experts.

    Example: --num-experts 6 with --expert-model-parallel-size 4."""
    if num_experts % ep == 0:
        return None
    return f"num_experts {num_experts} is not divisible by ep {ep}; use ep in {divisors(num_experts)}"


@rule("GL013", "dp-mismatch", "A data-parallel size written down must equal world / (tp × pp × cp).")
def dp_mismatch(dp_given: int, world_size: int, tp: int, pp: int, cp: int) -> str | None:
    """dp is never an input to the frameworks: they derive it. A different value written in a spec or a
    script is a stale copy. Fix: remove it, or change the sizes it came from.

    Example: parallelism.dp: 16 while 256 GPUs / (tp 4 × pp 2 × cp 1) = 32."""
    model = tp * pp * cp
    if world_size % model or dp_given == world_size // model:
        return None
    return (f"dp {dp_given} does not match world {world_size} / (tp {tp} × pp {pp} × cp {cp}) = "
            f"{world_size // model}; remove dp or set it to {world_size // model}")


@rule("GL026", "data-parallel-factors",
      "world = dp_replicate × dp_shard × cp × tp × pp, and replicas of a shard group need FSDP.")
def data_parallel_factors(world_size: int, dp_shard: int | None = None, dp_replicate: int | None = None,
                          tp: int | None = None, pp: int | None = None, cp: int | None = None,
                          framework: str | None = None) -> str | None:
    """The data-parallel group is dp_replicate replicas of a group of dp_shard ranks that shard the
    model's state among them (HSDP; plain FSDP and ZeRO: one replica). torchtitan's ParallelDims
    asserts ``dp_replicate * dp_shard * cp * tp * pp == WORLD_SIZE`` and accelerate's
    ParallelismConfig that its product is the number of processes; only FSDP replicates a shard
    group (torchtitan, accelerate's FSDP2), and Megatron-LM its distributed optimizer
    (--num-distributed-optimizer-instances; see GL240). Fix: give one of dp_shard and dp_replicate
    (the other is derived), a pair whose product is dp, or framework fsdp, torchtitan or
    megatron-lm for HSDP.

    A model-parallel size a file does not give is 1 (accelerate's parallelism_config has no pp);
    of dp_shard and dp_replicate, one not given is dp / the other.

    Example: 64 GPUs with tp 8 (dp 8) and dp_shard 3; dp_replicate 2 with framework deepspeed."""
    tp, pp, cp = tp or 1, pp or 1, cp or 1
    model = tp * pp * cp
    if world_size % model:
        return None  # GL003's
    dp = world_size // model
    if dp_replicate and dp_replicate > 1 and framework is not None and not framework_of(framework).hsdp:
        return (f"framework {framework} does not replicate a sharded group (dp_replicate {dp_replicate}); "
                f"use dp_replicate 1, or framework {or_list(frameworks_where(hsdp=True))} (HSDP)",
                ("dp_replicate", "framework"))
    if dp_shard is None and dp_replicate is None:
        return None
    if dp_shard is None:  # the other derived: dp / the given one
        if dp % dp_replicate == 0:
            return None
        return (f"dp_replicate {dp_replicate} does not divide dp {dp} = world {world_size} / (cp {cp} × "
                f"tp {tp} × pp {pp}); use dp_replicate in {divisors(dp)}",
                ("dp_replicate", "world_size", "tp", "pp", "cp"))
    if dp_replicate is None:
        if dp % dp_shard == 0:
            return None
        return (f"dp_shard {dp_shard} does not divide dp {dp} = world {world_size} / (cp {cp} × tp {tp} × "
                f"pp {pp}); use dp_shard in {divisors(dp)}", ("dp_shard", "world_size", "tp", "pp", "cp"))
    if dp_replicate * dp_shard * model != world_size:
        return (f"world {world_size} ≠ dp_replicate {dp_replicate} × dp_shard {dp_shard} × cp {cp} × "
                f"tp {tp} × pp {pp} = {dp_replicate * dp_shard * model}; give dp_shard × dp_replicate = "
                f"dp {dp}, e.g. dp_shard {dp // dp_replicate if dp % dp_replicate == 0 else dp} alone",
                ("dp_replicate", "dp_shard", "world_size", "tp", "pp", "cp"))
    return None


@rule("GL014", "tokens-per-step-mismatch",
      "A tokens-per-step figure written down must equal global batch × sequence length.")
def tokens_mismatch(tokens_per_step: int, global_batch_size: int, seq_length: int) -> str | None:
    """The token-level batch is what matters for convergence; a stated figure that differs from global
    batch × seq_length describes a different run. Fix: drop one of them.

    Example: tokens_per_step: 4M with global batch 2048 at seq_length 2048 (4,194,304 tokens)."""
    actual = global_batch_size * seq_length
    if actual == tokens_per_step:
        return None
    return (f"tokens_per_step {tokens_per_step:,} != global batch {global_batch_size} × seq_length "
            f"{seq_length} = {actual:,}; remove tokens_per_step or the value that fixes the batch")


@rule("GL015", "ep-without-experts", "Expert parallelism (ep > 1) needs an MoE model.")
def ep_without_experts(ep: int, num_experts: int | None = None) -> str | None:
    """Megatron: ``num_experts must be non None to use expert model parallelism``. Fix: ep 1, or an MoE
    model.

    Example: parallelism.ep: 2 for a dense model."""
    if ep == 1 or num_experts:
        return None
    return f"ep {ep} needs model.num_experts (a dense model has no experts); set ep to 1"


@rule("GL016", "interleaved-microbatches",
      "With virtual pipeline stages the number of micro-batches must be a multiple of pp.")
def interleaved_microbatches(vpp: int, pp: int, gradient_accumulation_steps: int) -> str | None:
    """Megatron's interleaved 1F1B schedule (default group size pp) needs M ≥ pp and M % pp == 0 micro-
    batches per step (``The remainder of M ... should be 0, or larger than or equal to the
    pipeline-parallel size``), checked only at the first training step. Fix: change the
    accumulation (or the global batch) to a multiple of pp.

    Example: vpp 2, pp 4 and 6 micro-batches per step."""
    m = gradient_accumulation_steps
    if vpp == 1 or pp == 1 or (m >= pp and m % pp == 0):
        return None
    return (f"with vpp {vpp}, {m} micro-batches per step must be a multiple of pp {pp}; use "
            f"accumulation {or_list(nearest_multiples(m, pp) or [pp])}")


@rule("GL017", "vpp-needs-pp", "Virtual pipeline stages need pipeline parallelism (pp > 1).")
def vpp_needs_pp(vpp: int, pp: int) -> str | None:
    """Megatron: ``When interleaved schedule is used, pipeline-model-parallel size should be greater
    than 1``. Fix: vpp 1, or pp > 1.

    Example: vpp 2 with pp 1."""
    if vpp == 1 or pp > 1:
        return None
    return f"vpp {vpp} needs pp > 1 (got pp {pp}); set vpp to 1 or use pipeline parallelism"


@rule("GL018", "batch-underdetermined",
      "The batch needs micro + accumulation, global + micro, global + accumulation, or a "
      "tokens-per-step target + micro (or accumulation).")
def batch_underdetermined(spec: str, micro_batch_size: int | None = None,
                          gradient_accumulation_steps: int | None = None,
                          global_batch_size: int | None = None,
                          tokens_per_step: int | None = None,
                          tokens_per_step_target: int | None = None) -> str | None:
    """Megatron needs --micro-batch-size (and defaults the global batch to micro × dp, a silent
    choice); DeepSpeed needs train_batch_size or train_micro_batch_size_per_gpu. gen-launch
    makes no silent choice in a spec (``spec`` names it). Fix: add one of the missing values.

    Example: batch: {global_batch_size: 512} and nothing else."""
    micro, acc, glob = micro_batch_size, gradient_accumulation_steps, global_batch_size
    tokens = tokens_per_step or tokens_per_step_target
    if (micro and acc) or (glob and (micro or acc)) or (tokens and (micro or acc)):
        return None
    given = [n for n, v in (("micro_batch_size", micro), ("gradient_accumulation_steps", acc),
                            ("global_batch_size", glob), ("tokens_per_step", tokens)) if v]
    return (f"{' + '.join(given) or 'no batch value'} does not determine the batch; give "
            "micro_batch_size + gradient_accumulation_steps, global_batch_size + micro_batch_size, "
            "global_batch_size + gradient_accumulation_steps, or tokens_per_step + micro_batch_size")


@rule("GL019", "tokens-per-step-unreachable",
      "No global batch within 10% of the tokens-per-step target is a multiple of micro × dp.")
def tokens_unreachable(tokens_per_step_target: int, global_batch_size: int,
                       seq_length: int) -> str | None:
    """The global batch moves in steps of micro × dp (or accumulation × dp) sequences; a target between
    two steps is rounded to the closer one, and refused when even that is more than 10% away.
    Fix: change the target, the micro batch or the parallel layout.

    Example: tokens_per_step 1.5Mi with micro 64 on dp 8 (steps of 1,048,576 tokens)."""
    actual = global_batch_size * seq_length
    if abs(actual - tokens_per_step_target) * 10 <= tokens_per_step_target:
        return None
    return (f"tokens_per_step target {tokens_per_step_target:,} is unreachable: the closest "
            f"usable global batch {global_batch_size} gives {actual:,} tokens "
            f"({(actual - tokens_per_step_target) / tokens_per_step_target * 100:+.1f}%, more than "
            "10% away); change the target, the micro batch or the parallel layout")


@rule("GL020", "memory-does-not-fit",
      "The estimated memory of the most loaded GPU exceeds the GPU's capacity.", severity="warning")
def memory_fit(memory_total_gib: float, memory_capacity_gib: float,
               memory_advice: str | None = None, memory_headroom_gib: float | None = None) -> str | None:
    """Weights, gradients, optimizer states, activations of the first pipeline stage (which holds
    p micro-batches in flight) and an allowance, against the GPU preset's memory (gen-launch
    explain shows the breakdown). An estimate, so a warning; generate --strict makes it fail.
    Fix: the cheapest change listed (recompute, a smaller micro batch, a sharded optimizer, more
    tp or pp).

    Example: GPT-3 175B with tp 8, pp 1 on A100-80GB: the weights alone need 40 GiB per GPU."""
    if memory_total_gib <= memory_capacity_gib:
        return None
    kept = f" (its memory less memory_headroom_gib {memory_headroom_gib:g})" if memory_headroom_gib else ""
    return (f"estimated {memory_total_gib:.1f} GiB per GPU exceeds the {memory_capacity_gib:.0f} GiB "
            f"of the GPU{kept}" + (f"; {memory_advice}" if memory_advice else ""))


OVERSIZE = 1.5  # beyond this multiple of the GPU's memory an estimate is refused (GL024)


@rule("GL024", "memory-far-beyond-capacity",
      "The estimated memory of the most loaded GPU is more than 1.5× the GPU's capacity.")
def memory_far_beyond(memory_total_gib: float, memory_capacity_gib: float,
                      memory_advice: str | None = None) -> str | None:
    """The estimate is an estimate (GL020 warns up to 1.5× the capacity), but a plan at several
    times the GPU's memory does not start: it runs out of memory in its first step, after its
    time in the queue. Such a plan is refused and nothing is written. Fix: the cheapest change
    listed, or ``cluster.allow_oversize: true`` when you know the run fits (a custom kernel, an
    offload the estimate does not see): then it is the GL020 warning.

    Example: GPT-3 175B with tp 8, pp 1 on 8 A100-80GB: about 300 GiB per GPU."""
    if memory_total_gib <= OVERSIZE * memory_capacity_gib:
        return None
    return (f"estimated {memory_total_gib:.1f} GiB per GPU is {memory_total_gib / memory_capacity_gib:.1f}× "
            f"the {memory_capacity_gib:.0f} GiB of the GPU; nothing written (cluster.allow_oversize: "
            "true writes it anyway)" + (f"; {memory_advice}" if memory_advice else ""))


@rule("GL025", "host-memory-at-load",
      "The CPU memory a node holds while the run loads its weights exceeds the node's.", severity="warning")
def host_memory_at_load(host_load_gib: float, host_memory_gib: float, host_load_how: str) -> str | None:
    """While a run starts, its framework reads weights (and a resumed run its optimizer state)
    into CPU memory first: Megatron's torch format has every rank torch.load() its file to the
    CPU (data-parallel rank 0 the distributed optimizer's whole file too), DeepSpeed's engine
    loads each rank's states onto the CPU, and the Trainer's from_pretrained builds the whole
    model in every process. A node whose ranks together exceed its memory is killed by the
    kernel's OOM killer at start-up, after its time in the queue. Fix: --ckpt-format torch_dist
    (checkpoint.format; it reads each rank's shards into its own tensors), ZeRO-3 or FSDP for the
    Trainer (gen-launch's FSDP files load on one rank per node), more tp or pp, or a node with
    more memory (cluster.host_memory_gib says how much it has; else slurm.mem).

    Example: Llama-3-70B with tp 8 resumed from a torch-format checkpoint without the distributed
    optimizer: 8 ranks × 14 bytes × 8.8B parameters = 920 GiB on a 512 GiB node."""
    if host_load_gib <= host_memory_gib:
        return None
    return (f"loading needs about {host_load_gib:.0f} GiB of CPU memory on a node ({host_load_how}), "
            f"more than its {host_memory_gib:.0f} GiB")


@rule("GL021", "linear-lr-scaling-beyond-8k",
      "The linear LR-scaling rule was shown to hold up to about 8K sequences.", severity="warning")
def linear_scaling_limit(lr_scaling_rule: str, global_batch_size: int) -> str | None:
    """Goyal et al. 2017 scaled the learning rate linearly with the batch up to 8K images, and
    it broke down beyond; with Adam the square-root rule is the usual choice (seed article 003).
    Fix: rule sqrt, or a reference run closer to this batch.

    Example: lr_scaling {rule: linear, reference_global_batch_size: 256} at global batch 16384."""
    if lr_scaling_rule != "linear" or global_batch_size <= 8192:
        return None
    return (f"linear LR scaling to a global batch of {global_batch_size} sequences, beyond the ~8K "
            "where the linear rule was shown to hold; consider rule: sqrt")
