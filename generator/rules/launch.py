"""Rules over launch scripts and their configs (the linter's contract): GL004-GL007 batch and
allocation agreement, GL101-GL105 DeepSpeed config, GL202-GL204 Megatron flags, GL301-GL303
Slurm headers. They need facts only a script or a DeepSpeed JSON provides, so on a plan from a
spec most of them have nothing to check."""

from __future__ import annotations

from generator.data import load
from generator.dialects import dialect
from generator.dialects.keyed import keyed_dialect
from generator.dialects.script_parser import ScriptParser
from generator.frameworks import framework_of
from generator.rules.registry import rule
from generator.rules.suggest import ramp_alternative


@rule("GL004", "deepspeed-megatron-disagree",
      "The DeepSpeed JSON and the Megatron (or Trainer) arguments must agree on micro batch, global "
      "batch and ZeRO stage.")
def ds_megatron(ds_micro_batch_size: int | None = None, micro_batch_size: int | None = None,
                ds_train_batch_size: int | None = None, global_batch_size: int | None = None,
                ds_zero_stage: int | None = None, zero_stage: int | None = None,
                trainer: bool | None = None) -> str | None:
    """Nothing in Megatron-DeepSpeed compares them: with a JSON micro batch other than --micro-batch-
    size the pipeline engine pulls the wrong number of micro-batches silently, and
    pretrain_gpt.py enables zero.Init only when --zero-stage is 3. The HF Trainer does compare
    them, and stops ("Please correct the following DeepSpeed config values that mismatch
    TrainingArguments values"). Fix: write each value once (gen-launch generates both from one
    plan), or "auto" in a Trainer's config.

    Example: ds_config.json says train_micro_batch_size_per_gpu 2, the script passes --micro-
    batch-size 4."""
    micro_flag = "--per_device_train_batch_size" if trainer else "--micro-batch-size"
    pairs = (("micro batch", "ds_micro_batch_size", ds_micro_batch_size, micro_flag,
              "micro_batch_size", micro_batch_size),
             ("train_batch_size", "ds_train_batch_size", ds_train_batch_size, "--global-batch-size",
              "global_batch_size", global_batch_size),
             ("zero_optimization.stage", "ds_zero_stage", ds_zero_stage, "--zero-stage", "zero_stage",
              zero_stage))
    for ds_label, ds_fact, ds_value, flag, fact, value in pairs:
        if ds_value is not None and value is not None and ds_value != value:
            return f"DeepSpeed {ds_label} {ds_value} ≠ {flag} {value}", (ds_fact, fact)
    return None


@rule("GL005", "allocation-launcher-mismatch",
      "The Slurm allocation and the processes the launcher starts must agree.")
def allocation(launcher: str, sbatch_nodes: int | None = None, launcher_nodes: int | None = None,
               sbatch_gpus_per_node: int | None = None, procs_per_node: int | None = None) -> str | None:
    """An sbatch header that allocates other nodes or GPUs than the launcher uses either hangs at the
    rendezvous (more nodes expected than allocated), wastes the allocation, or crashes with more
    processes than GPUs. Fix: derive the launcher's counts from the allocation.

    Example: #SBATCH --nodes=4 with torchrun --nnodes 2, or --gpus-per-node=8 with
    --nproc_per_node 4."""
    if sbatch_nodes is not None and launcher_nodes is not None and sbatch_nodes != launcher_nodes:
        return (f"#SBATCH allocates {sbatch_nodes} nodes but {launcher} starts on {launcher_nodes}",
                ("launcher_nodes", "sbatch_nodes"))
    if sbatch_gpus_per_node is not None and procs_per_node is not None and \
            sbatch_gpus_per_node != procs_per_node:
        return (f"#SBATCH allocates {sbatch_gpus_per_node} GPUs per node but {launcher} starts "
                f"{procs_per_node} processes per node", ("procs_per_node", "sbatch_gpus_per_node"))
    return None


@rule("GL006", "rampup-not-divisible",
      "Every batch size of a ramp-up must be a multiple of micro × dp and reach the global batch.")
def rampup(rampup: tuple, global_batch_size: int, micro_batch_size: int | None = None,
           dp: int | None = None, spec: str | None = None) -> str | None:
    """Megatron's ramp-up calculator (≤ core 0.17) asserts ``expected global batch size interval (G−S)
    to be divisible by global batch size increment (I)``, and each step of the ramp checks
    ``current global batch size ... is not divisible by micro-batch-size ... times data parallel
    size``. Fix: start and increment multiples of micro × dp, the increment a divisor of G − S
    (the nearest such ramp is suggested: batch.rampup in a spec, --rampup-batch-size in a script).

    Example: --rampup-batch-size 16 16 5000000 with micro 1 on dp 64: 16 is not a multiple of
    64 (use --rampup-batch-size 64 64 5000000)."""
    start, increment, samples = rampup
    name = "batch.rampup" if spec else "--rampup-batch-size"
    step = micro_batch_size * dp if micro_batch_size and dp else 1
    if increment <= 0 or (global_batch_size - start) % increment:
        problem = (f"global batch {global_batch_size} − start {start} = {global_batch_size - start} is "
                   f"not divisible by the increment {increment}")
        return f"{name}: {problem}{_ramp_fix(start, increment, samples, global_batch_size, step, spec)}"
    if step > 1:
        for label, value in (("start", start), ("increment", increment)):
            if value % step:
                return (f"{name} {label} {value} is not divisible by micro {micro_batch_size} × dp {dp} = "
                        f"{step}{_ramp_fix(start, increment, samples, global_batch_size, step, spec)}")
    return None


def _ramp_fix(start: int, increment: int, samples: int, global_batch_size: int, step: int,
              spec: str | None) -> str:
    """'; use <the nearest valid ramp>' as the spec or the script writes it ('' when none)."""
    fixed = ramp_alternative(start, max(increment, 1), global_batch_size, step)
    if fixed is None:
        return ""
    if spec:
        return f"; use batch.rampup {{start: {fixed[0]}, increment: {fixed[1]}, samples: {samples}}}"
    return f"; use --rampup-batch-size {fixed[0]} {fixed[1]} {samples}"


@rule("GL007", "rampup-or-schedule-conflict",
      "Ramp-up needs sample-based training (and Megatron ≤ core 0.17); a step schedule excludes "
      "--global-batch-size.")
def rampup_conflict(megatron_flags: dict | None = None, rampup: tuple | None = None,
                    iteration_based: bool | None = None) -> str | None:
    """Megatron: ``expected no batch-size rampup for iteration-based training``; from core 0.18
    --rampup-batch-size is parsed and silently ignored; ``Cannot specify both
    --step-batch-size-schedule and --global-batch-size``. Fix: --train-samples with the ramp, or
    a step schedule without --global-batch-size on current Megatron.

    Example: --rampup-batch-size 32 32 1000000 together with --train-iters 50000."""
    flags = megatron_flags or {}
    if rampup is not None and iteration_based:
        return ("a batch ramp-up needs sample-based training: give training.train_tokens or "
                "train_samples instead of train_iters (Megatron refuses ramp-up with --train-iters)",
                ("rampup", "iteration_based"))
    if "--rampup-batch-size" in flags and "--train-iters" in flags:
        return ("--rampup-batch-size with --train-iters: Megatron accepts a ramp-up only with "
                "sample-based training (--train-samples)", (),
                ("--rampup-batch-size", flags["--rampup-batch-size"]),
                ("--train-iters", flags["--train-iters"]))
    if "--step-batch-size-schedule" in flags and "--global-batch-size" in flags:
        return ("--step-batch-size-schedule cannot be combined with --global-batch-size", (),
                ("--step-batch-size-schedule", flags["--step-batch-size-schedule"]),
                ("--global-batch-size", flags["--global-batch-size"]))
    return None


@rule("GL022", "batch-ramp-unsupported",
      "A changing batch needs Megatron: ramp-up (any version), a step schedule (core 0.18+).")
def ramp_unsupported(batch_ramp_kind: str, framework: str, megatron_version: str,
                     megatron_dialect: str | None = None) -> str | None:
    """DeepSpeed has no batch ramp-up (its engine keeps train_batch_size); Megatron-DeepSpeed
    ramps through --rampup-batch-size only; --step-batch-size-schedule exists from megatron-core
    0.18. Fix: split the run into stages, use the ramp-up form, or a newer Megatron.

    Example: batch.schedule with megatron.version core_v0.16."""
    record = framework_of(framework)
    if record.plain_deepspeed:
        return (f"DeepSpeed has no batch {batch_ramp_kind}; use a Megatron framework or stages of "
                "constant batch")
    if batch_ramp_kind == "schedule" and record.megatron_arguments and not record.megatron_core:
        return f"{record.title} has no step batch-size schedule; use batch.rampup"

    d = dialect(megatron_dialect or "megatron-lm", megatron_version)
    if batch_ramp_kind == "schedule" and not d.can("step_batch_schedule"):
        return (f"--step-batch-size-schedule needs megatron-core 0.18 or later (megatron.version is "
                f"{megatron_version}); use batch.rampup or a newer version")
    return None


@rule("GL023", "step-schedule-invalid",
      "A step batch schedule starts at 0, rises, ends at the global batch, and divides by micro × dp.")
def step_schedule(batch_schedule: tuple, global_batch_size: int | None = None,
                  micro_batch_size: int | None = None, dp: int | None = None) -> str | None:
    """Megatron's step calculator: ``first schedule entry must have threshold 0``, ``schedule
    thresholds must be strictly increasing``, and per update ``current global batch size (..) is
    not divisible by micro_batch_size (..) * data_parallel_size (..)``; gen-launch also requires
    the last batch to be the plan's global batch (the one the schedule, LR and files are built
    for). Fix: thresholds from 0 upwards, batches that are multiples of micro × dp.

    Example: schedule [{tokens: 252M, global_batch_size: 1024}] (no entry at 0)."""
    entries = sorted(batch_schedule)
    if entries[0][0] != 0:
        return f"the first schedule threshold must be 0, got {entries[0][0]:,}"
    thresholds = [t for t, _ in entries]
    if len(set(thresholds)) != len(thresholds):
        return "schedule thresholds must be strictly increasing (a threshold repeats)"
    if global_batch_size is not None and entries[-1][1] != global_batch_size:
        return (f"the last scheduled batch {entries[-1][1]} is not the global batch "
                f"{global_batch_size}")
    if micro_batch_size and dp:
        step = micro_batch_size * dp
        for threshold, size in entries:
            if size % step:
                return (f"scheduled batch {size} (from {threshold:,} tokens) is not divisible by "
                        f"micro {micro_batch_size} × dp {dp} = {step}")
    return None


@rule("GL101", "deepspeed-auto",
      "\"auto\" is resolved only by the HF Trainer and accelerate, and only for some keys.")
def ds_auto(ds_auto: tuple, launcher: str | None = None, framework: str | None = None,
            trainer: bool | None = None) -> str | None:
    """DeepSpeed itself never resolves "auto": batch keys raise TypeError, and in the pydantic sections
    (zero_optimization, bf16, fp16) it silently becomes the default (stage 0, bf16 off). The HF
    Trainer (a script passing ``--deepspeed cfg.json`` with TrainingArguments) and accelerate
    fill in a fixed set of keys (batch sizes, clipping, optimizer and scheduler parameters,
    fp16/bf16 enabled, ZeRO bucket sizes); an "auto" elsewhere (``zero_optimization.stage``)
    reaches DeepSpeed as it is. A config linted alone, with no script naming it, is judged as the
    Trainer's: its "auto" values are what a Trainer config is written with. Fix: write the numbers
    (gen-launch computes them).

    Example: "zero_optimization": {"stage": "auto"} in a config passed to deepspeed.initialize."""
    table = keyed_dialect("deepspeed").table
    dropped, fills = table["auto_dropped_sections"], set(table["trainer_fills"])
    alone = launcher is None and framework is None and trainer is None
    hf = launcher == "accelerate" or bool(trainer) or alone  # alone: "auto" is the Trainer's mark
    for path, source in ds_auto:
        if hf and path in fills:
            continue
        if path.split(".")[0] in dropped:
            by = "; the HF Trainer and accelerate do not fill this key" if hf else ""
            return (f"\"auto\" at {path}: DeepSpeed silently replaces it with the default{by}", (),
                    (path, source))
        if hf:
            return (f"\"auto\" at {path}: the HF Trainer and accelerate do not fill this key; "
                    "DeepSpeed fails on it", (), (path, source))
        return (f"\"auto\" at {path}: only the HF Trainer / accelerate fill it in; DeepSpeed "
                "fails on it", (), (path, source))
    return None


@rule("GL102", "deepspeed-rejected-key",
      "A key DeepSpeed 0.19 rejects: removed, or unknown in a strict section.")
def ds_rejected(ds_removed_keys: tuple = (), ds_unknown_keys: tuple = ()) -> str | None:
    """DeepSpeed 0.19.8 raises DeepSpeedConfigError for removed blocks (elasticity, amp,
    curriculum_learning, ...), and its pydantic sections (zero_optimization, fp16, bf16,
    offload) reject unknown keys (``Extra inputs are not permitted``), so a typo such as
    overlap_com fails. Fix: remove the key, or spell it as DeepSpeed 0.19 does.

    Example: "elasticity": {...} at the top level, or "overlap_com" inside zero_optimization."""
    if ds_removed_keys:
        key, source = ds_removed_keys[0]
        return f"{key} was removed from DeepSpeed (0.19.8 rejects it)", (), (key, source)
    if ds_unknown_keys:
        key, source = ds_unknown_keys[0]
        return f"{key} is not a DeepSpeed key; this section rejects unknown keys", (), (key, source)
    return None


@rule("GL103", "fp16-and-bf16", "fp16 and bf16 cannot both be enabled.")
def fp16_bf16(ds_fp16: bool, ds_bf16: bool) -> str | None:
    """DeepSpeed: ``bfloat16 and fp16 modes cannot be simultaneously enabled``. Fix: enable one of
    them.

    Example: "fp16": {"enabled": true} and "bf16": {"enabled": true}."""
    return "fp16 and bf16 are both enabled; enable one" if ds_fp16 and ds_bf16 else None


@rule("GL105", "deepspeed-scheduler",
      "A DeepSpeed scheduler needs total_num_steps (decaying ones) and a warmup shorter than it.")
def ds_scheduler(ds_scheduler: tuple) -> str | None:
    """WarmupDecayLR and WarmupCosineLR fail at construction without total_num_steps (``missing 1
    required positional argument``); with warmup_num_steps ≥ total_num_steps they only warn and
    never decay. DeepSpeedConfig alone does not build the scheduler, so this shows up late. Fix:
    give total_num_steps (the run's optimizer steps) and a shorter warmup.

    Example: "WarmupCosineLR" with warmup_num_steps but no total_num_steps."""
    kind, params = ds_scheduler
    if kind in ("WarmupDecayLR", "WarmupCosineLR") and "total_num_steps" not in params:
        return f"{kind} needs scheduler.params.total_num_steps"
    total, warmup = params.get("total_num_steps"), params.get("warmup_num_steps")
    if isinstance(total, int) and isinstance(warmup, int) and warmup >= total:
        return f"warmup_num_steps {warmup} is not shorter than total_num_steps {total}"
    return None


@rule("GL202", "query-groups-without-gqa",
      "--num-query-groups is ignored without --group-query-attention.")
def groups_without_gqa(megatron_flags: dict, framework: str) -> str | None:
    """Megatron-LM builds the TransformerConfig with num_query_groups only when --group-query-attention
    is given; otherwise the model silently uses full multi-head attention. Fix: add --group-
    query-attention.

    Example: --num-query-groups 8 without --group-query-attention."""
    if framework_of(framework).megatron_core and "--num-query-groups" in megatron_flags and \
            "--group-query-attention" not in megatron_flags:
        return ("--num-query-groups has no effect without --group-query-attention", (),
                ("--num-query-groups", megatron_flags["--num-query-groups"]))
    return None


@rule("GL203", "cuda-device-max-connections",
      "The Megatron dialect requires CUDA_DEVICE_MAX_CONNECTIONS=1 for this layout.",
      severity="warning")
def cuda_connections(tp: int, framework: str, cp: int | None = None,
                     cuda_device_max_connections: str | None = None, gpu_vendor: str | None = None,
                     nvidia_cc: float | None = None, megatron_dialect: str | None = None,
                     sequence_parallel: bool | None = None,
                     deepspeed_flag: bool | None = None, megatron_flags: dict | None = None,
                     megatron_parser: ScriptParser | None = None,
                     ep_comm_overlap: bool | None = None, megatron_fsdp: bool | None = None) -> str | None:
    """Megatron-LM asserts ``Using tensor model parallelism or context parallelism require setting
    the environment variable CUDA_DEVICE_MAX_CONNECTIONS to 1`` with tp > 1 or cp > 1 on GPUs
    below compute capability 10. microsoft/Megatron-DeepSpeed raises only with
    --sequence-parallel, or without --deepspeed (its async tensor-parallel all-reduce is then
    on, unless --no-async-tensor-model-parallel-allreduce turns it off; --sequence-parallel is
    itself turned off at tp 1), on any CUDA GPU; BigScience's fork never checks it. With the
    experts' all-to-all overlap (--overlap-moe-expert-parallel-comm) or FSDP Megatron-LM only
    warns (they want more connections). A warning here: the GPU is often not known from a
    script. Fix: export it.

    Example: --tensor-model-parallel-size 2 on H100 without export
    CUDA_DEVICE_MAX_CONNECTIONS=1."""
    if not framework_of(framework).megatron_arguments or cuda_device_max_connections == "1" or \
            megatron_dialect is None:  # (a config file alone, e.g. GPT-NeoX's, has no environment)
        return None
    if gpu_vendor and gpu_vendor != "nvidia":
        return None
    shown = "not set" if cuda_device_max_connections is None else f"= {cuda_device_max_connections}"
    learned = megatron_parser.capabilities if megatron_parser is not None else {}
    asserted = learned.get("cuda_max_connections") or \
        dialect(megatron_dialect).capabilities.get("cuda_max_connections", "tp-or-cp")
    if asserted == "never":
        return None
    if asserted == "sequence-parallel-or-no-deepspeed":
        async_off = deepspeed_flag or "--no-async-tensor-model-parallel-allreduce" in (megatron_flags or {})
        why = "--sequence-parallel" if sequence_parallel and tp > 1 else \
            None if async_off else "the async tensor-parallel all-reduce (no --deepspeed)"
        if why is None:
            return None
        title = megatron_parser.label if learned else dialect(megatron_dialect).title
        return (f"CUDA_DEVICE_MAX_CONNECTIONS is {shown}; {title} requires "
                f"export CUDA_DEVICE_MAX_CONNECTIONS=1 with {why}", _CONNECTIONS)
    if tp == 1 and (cp or 1) == 1:
        return None
    if nvidia_cc and nvidia_cc >= 10:
        return None
    if ep_comm_overlap or megatron_fsdp or _FSDP_FLAGS & set(megatron_flags or {}):
        return None  # it only warns then: the overlap and FSDP want more connections (validate_args)
    return (f"CUDA_DEVICE_MAX_CONNECTIONS is {shown}; export CUDA_DEVICE_MAX_CONNECTIONS=1 (tp {tp})",
            _CONNECTIONS)


# with these, megatron-core (core_v0.14 and later) warns instead of asserting one connection
_FSDP_FLAGS = {"--use-megatron-fsdp", "--use-torch-fsdp2"}
_CONNECTIONS = ("tp", "framework", "cp", "cuda_device_max_connections", "gpu_vendor", "nvidia_cc",
                "megatron_dialect", "sequence_parallel", "deepspeed_flag")  # GL203's, its flags aside


@rule("GL301", "sbatch-launch-style", "The sbatch header must fit the launch style.")
def sbatch_style(launcher: str, srun_line: bool | None = None,
                 sbatch_ntasks_per_node: int | None = None, srun_ntasks_per_node: int | None = None,
                 sbatch_nodes: int | None = None, sbatch_ntasks: int | None = None) -> str | None:
    """torchrun and the DeepSpeed launcher start all processes of a node themselves, so srun must run
    one of them per node: with more tasks per node every task starts a full set of ranks.
    --ntasks must equal nodes × ntasks-per-node when both are given. Fix: --ntasks-per-node=1
    for torchrun and the DeepSpeed launcher; matching counts.

    Example: #SBATCH --ntasks-per-node=8 with srun torchrun --nproc_per_node 8."""
    tasks = srun_ntasks_per_node or sbatch_ntasks_per_node
    if launcher in ("torchrun", "deepspeed") and srun_line and tasks and tasks > 1:
        return (f"{tasks} tasks per node each start {launcher}, which starts every process of the "
                "node itself; use --ntasks-per-node=1",
                ("srun_ntasks_per_node" if srun_ntasks_per_node else "sbatch_ntasks_per_node", "launcher"))
    if sbatch_nodes and sbatch_ntasks and sbatch_ntasks_per_node and \
            sbatch_ntasks != sbatch_nodes * sbatch_ntasks_per_node:
        return (f"--ntasks {sbatch_ntasks} ≠ --nodes {sbatch_nodes} × --ntasks-per-node "
                f"{sbatch_ntasks_per_node}")
    return None


@rule("GL302", "sbatch-after-command", "#SBATCH lines after the first command are ignored.")
def sbatch_late(sbatch_late_lines: tuple) -> str | None:
    """sbatch stops reading directives at the first command; everything after is a comment, so the job
    silently runs with defaults. Fix: move the #SBATCH lines to the top.

    Example: echo start, then #SBATCH --time=01:00:00."""
    return (f"{len(sbatch_late_lines)} #SBATCH line(s) after the first command are ignored by Slurm"
            if sbatch_late_lines else None)


@rule("GL303", "slurm-variable-not-provided",
      "The script reads a Slurm variable that its header does not make Slurm set.")
def slurm_variable(slurm_variables: dict, sbatch_options: tuple = ()) -> str | None:
    """E.g. SLURM_NTASKS without --ntasks, SLURM_GPUS_ON_NODE without a GPU request,
    SLURM_GPUS_PER_NODE without --gpus-per-node (it stays empty with --gres). Unset, they expand
    to nothing (or abort under set -u). Fix: request the resource, or use another variable.

    Example: echo $SLURM_NTASKS with only --nodes in the header (--ntasks or --ntasks-per-node
    would set it)."""
    for variable, needs in load("slurm_variables.yaml").items():
        if variable in slurm_variables and not set(needs) & set(sbatch_options or ()):
            return (f"${variable} is not set by Slurm without {' or '.join(needs)} in the header",
                    (), (variable, slurm_variables[variable]))
    return None


@rule("GL306", "nccl-settings-on-ascend", "NCCL settings do nothing on Ascend NPUs, which use HCCL.",
      severity="warning")
def nccl_on_ascend(exports: tuple, ascend: bool) -> str | None:
    """Collectives on Ascend NPUs go through HCCL; NCCL_* variables are never read there (the
    HCCL_* ones are: HCCL_CONNECT_TIMEOUT, HCCL_IF_IP, HCCL_SOCKET_IFNAME, ...). A script counts
    as an Ascend one when it exports HCCL_* or ASCEND_* variables. Fix: the HCCL equivalent, or
    remove them.

    Example: export NCCL_IB_TIMEOUT=22 in a job on ascend-910b."""
    nccl = [name for name, _ in exports if name.startswith("NCCL_")]
    if not ascend or not nccl:
        return None
    return (f"{', '.join(nccl)} {'is' if len(nccl) == 1 else 'are'} not read on Ascend NPUs, "
            "which use HCCL; set the HCCL_* equivalent or remove them")
