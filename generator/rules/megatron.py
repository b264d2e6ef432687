"""Megatron-LM model-shape and parallelism rules (its validate_args and TransformerConfig's
checks, as each rule's docstring cites): GL008-GL010
of the linter's contract, and GL2xx."""

from __future__ import annotations

import contextlib

from generator.dialects import capable, dialect, registry_can, registry_recipes, title_of
from generator.frameworks import framework_of
from generator.rules.flags import fork_flags, script_dialect
from generator.rules.registry import Uncertain, rule
from generator.rules.suggest import divisors, nearest, or_list
from generator.spec.pipeline_layout import LayoutError, PipelineLayout


@rule("GL008", "heads-not-compatible-with-tp",
      "Attention heads must be a multiple of tp; query groups a multiple or a divisor of tp.")
def heads_tp(num_attention_heads: int, tp: int, num_query_groups: int | None = None) -> str | None:
    """megatron-core: ``num_attention_heads (100) must be a multiple of tensor_model_parallel_size
    (8).`` and (≥ 0.16) ``num_query_groups (3) must be a multiple or divisor of
    tensor_model_parallel_size (8).`` (≤ 0.15 required a multiple). Fix: a tp that divides the
    heads.

    Example: --num-attention-heads 100 with --tensor-model-parallel-size 8."""
    if num_attention_heads % tp:
        return (f"num_attention_heads {num_attention_heads} is not divisible by tp {tp}; use tp "
                f"{or_list(nearest(divisors(num_attention_heads), tp))}")
    groups = num_query_groups or num_attention_heads
    if groups % tp == 0 or tp % groups == 0:
        return None
    return (f"num_query_groups {groups} is neither a multiple nor a divisor of tp {tp}; use tp "
            f"{or_list(nearest(divisors(groups), tp))}")


@rule("GL009", "layers-not-divisible-by-pp",
      "Layers must divide evenly over the pipeline stages and their virtual stages.")
def layers_pp(num_layers: int, pp: int, framework: str, vpp: int | None = None,
              first_stage_layers: int | None = None, last_stage_layers: int | None = None,
              pipeline_split_embedding: bool = False, pipeline_split_loss: bool = False,
              megatron_flags: dict | None = None, megatron_dialect: str | None = None,
              pipeline_layout: str | None = None) -> str | None:
    """Megatron-LM: ``Number of layers should be divisible by the pipeline-model-parallel size``
    (megatron-core ≤ 0.9 silently dropped the remainder), and with interleaving ``number of
    layers per pipeline stage must be divisible number of layers per virtual pipeline stage``.
    With ``--decoder-first/last-pipeline-num-layers`` (uneven stages, core ≥ 0.9) the remaining
    layers must divide evenly over the middle stages, and every stage's count by vpp.
    With ``--account-for-embedding-in-pipeline-split`` / ``--account-for-loss-in-pipeline-split``
    the embedding and the loss count as one layer each: num_layers + 1 (+ 1) must divide (and
    they exclude first/last stage counts: Megatron raises ValueError).
    A pipeline layout (--pipeline-model-parallel-layout) places the layers itself (GL235).
    Megatron-DeepSpeed's pipeline engine balances layers itself, so this is megatron-lm only. A
    fork may split the layers its own way (``--pipeline-model-parallel-method block`` with a
    list of stage sizes): a script passing pipeline flags its dialect does not define gets a
    warning, not an error.
    Fix: a pp (and vpp) that divides the layers, first/last stage layer counts, or counting the
    embedding and loss in the split.

    Example: --num-layers 95 with --pipeline-model-parallel-size 16."""
    if not framework_of(framework).megatron_core or pipeline_layout is not None \
            or _given(megatron_flags, megatron_dialect, "pipeline_layout"):
        return None  # a pipeline layout places the layers itself (GL235), one known at run time too
    message = _even_layers(num_layers, pp, vpp or 1, first_stage_layers, last_stage_layers,
                           int(bool(pipeline_split_embedding)) + int(bool(pipeline_split_loss)))
    if message is None:
        return None
    involved = ("num_layers", "pp", "framework", "vpp", "first_stage_layers", "last_stage_layers",
                "pipeline_split_embedding", "pipeline_split_loss")
    forked = fork_flags(megatron_flags, megatron_dialect, "pipeline")
    if forked:
        message = Uncertain(f"{message} (unless the fork splits them otherwise: the script passes "
                            f"{', '.join(forked)}, which {script_dialect(megatron_dialect)} does not define)")
    return message, involved


def _even_layers(num_layers: int, pp: int, vpp: int, first_stage_layers: int | None,
                 last_stage_layers: int | None, counted: int) -> str | None:
    if counted and (first_stage_layers is not None or last_stage_layers is not None):
        return ("first_stage_layers / last_stage_layers and counting the embedding or loss in the "
                "pipeline split exclude each other (Megatron raises ValueError); keep one")
    if first_stage_layers is not None or last_stage_layers is not None:
        return _uneven(num_layers, pp, vpp, first_stage_layers, last_stage_layers)
    split = num_layers + counted
    named = f"num_layers {num_layers}" + (f" + {counted} (embedding, loss)" if counted else "")
    if split % pp:
        return (f"{named} is not divisible by pp {pp}; use pp {or_list(nearest(divisors(split), pp))}, "
                "first_stage_layers and last_stage_layers, or count the embedding and loss in the split")
    per_stage = split // pp
    if per_stage % vpp == 0:
        return None
    return (f"{named} / pp {pp} = {per_stage} layers per stage is not divisible "
            f"by vpp {vpp}; use vpp in {[d for d in divisors(per_stage) if d > 1] or [1]}")


def _uneven(layers: int, pp: int, vpp: int, first: int | None, last: int | None) -> str | None:
    given = [x for x in (first, last) if x is not None]
    middle_stages = pp - len(given)
    middle = layers - sum(given)
    pairs = [(label, x) for label, x in (("first", first), ("last", last)) if x is not None]
    if middle_stages < 0 or middle < 0 or bool(middle_stages) != bool(middle) or \
            (middle_stages and middle % middle_stages):
        return (f"num_layers {layers}{''.join(f' − {lb} {x}' for lb, x in pairs)} = {middle} "
                f"layers do not divide over the "
                f"{max(middle_stages, 0)} other stage(s) of pp {pp}")
    counts = given + ([middle // middle_stages] if middle_stages else [])
    if any(c % vpp for c in counts):
        named = ", ".join(f"{lb} {x}" for lb, x in pairs)
        return f"stage layer counts {counts} (pp {pp}, {named}) are not all divisible by vpp {vpp}"
    return None


def uneven_split(layers: int, pp: int, vpp: int = 1) -> int | None:
    """The layers of the first and of the last stage when pp does not divide the layers: the
    most that leaves the rest dividing evenly over the middle stages and no more than a middle
    stage holds (Llama 3 405B: 126 layers on 16 stages = 7 + 14 × 8 + 7); None if there is none."""
    if pp < 3:
        return None
    for k in range(layers // pp, 0, -1):
        middle, rest = divmod(layers - 2 * k, pp - 2)
        if rest == 0 and k <= middle and k % vpp == 0 and middle % vpp == 0:
            return k
    return None


def _given(flags: dict | None, megatron_dialect: str | None, value: str) -> list[str]:
    """The flags of ``flags`` (a script's, by flag) that carry the plan value ``value`` in the
    dialect (its table's spellings)."""
    if not flags or megatron_dialect is None:
        return []
    return [f for f in dialect(megatron_dialect).flags_of(value) if f in flags]


@rule("GL214", "uneven-pipeline-without-megatron-lm",
      "First and last stage layer counts (uneven pipelines) are Megatron-LM options.")
def uneven_framework(framework: str, first_stage_layers: int | None = None,
                     last_stage_layers: int | None = None, megatron_dialect: str | None = None) -> str | None:
    """``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers`` exist in
    Megatron-LM (megatron-core ≥ 0.9; the dialect's ``uneven_pipeline`` capability); DeepSpeed's
    pipeline engine partitions the layers itself. Fix: leave first_stage_layers and
    last_stage_layers out, or framework megatron-lm.

    Example: first_stage_layers 7 with framework megatron-deepspeed."""
    if first_stage_layers is None and last_stage_layers is None or \
            capable(megatron_dialect, "uneven_pipeline"):
        return None
    return (f"first_stage_layers / last_stage_layers are not supported by "
            f"{title_of(framework, megatron_dialect)}; DeepSpeed's pipeline engine balances the "
            "layers itself")


@rule("GL010", "sequence-parallel-without-tp", "Sequence parallelism does nothing at tp 1.",
      severity="warning")
def sp_needs_tp(sequence_parallel: bool, tp: int) -> str | None:
    """Megatron-LM's CLI disables it with ``Disabling sequence parallelism because tensor model
    parallelism is disabled``; megatron-core's ModelParallelConfig raises ``Cannot use sequence
    parallelism without tensor parallelism``. Fix: drop it, or use tp > 1.

    Example: --sequence-parallel with --tensor-model-parallel-size 1."""
    if not sequence_parallel or tp > 1:
        return None
    return "sequence_parallel has no effect at tp 1 (Megatron turns it off); remove it or use tp > 1"


@rule("GL205", "max-position-below-seq", "max_position_embeddings must be at least seq_length.")
def max_pos(max_position_embeddings: int, seq_length: int) -> str | None:
    """Megatron: ``max_position_embeddings (P) must be greater than or equal to seq_length (S).`` Fix:
    max_position_embeddings ≥ seq_length.

    Example: --max-position-embeddings 2048 with --seq-length 4096."""
    if max_position_embeddings >= seq_length:
        return None
    return (f"max_position_embeddings {max_position_embeddings} is less than seq_length "
            f"{seq_length}; set max_position_embeddings to at least {seq_length}")


@rule("GL206", "hidden-not-divisible-by-heads", "hidden_size must be a multiple of the heads.")
def hidden_heads(hidden_size: int, num_attention_heads: int, kv_channels: int | None = None) -> str | None:
    """Megatron-LM asserts ``hidden_size % num_attention_heads == 0`` (bare assert) when --kv-channels
    is not given; megatron-core alone silently floors the head dimension. With --kv-channels the
    head dimension is that value and the hidden size need not divide (Minitron-8B: hidden 4096, 48
    heads of 128). Fix: a hidden size that is a multiple of the heads, or --kv-channels.

    Example: --hidden-size 12280 with 96 heads."""
    if kv_channels is not None or hidden_size % num_attention_heads == 0:
        return None
    return (f"hidden_size {hidden_size} is not divisible by num_attention_heads "
            f"{num_attention_heads}; the head dimension would be {hidden_size / num_attention_heads:.2f}")


@rule("GL207", "heads-not-divisible-by-groups", "Attention heads must be a multiple of query groups.")
def heads_groups(num_attention_heads: int, num_query_groups: int) -> str | None:
    """Grouped-query attention shares each key/value head among heads / groups query heads. Fix: a
    number of query groups that divides the heads.

    Example: 32 heads with 6 query groups."""
    if num_attention_heads % num_query_groups == 0:
        return None
    return (f"num_attention_heads {num_attention_heads} is not divisible by num_query_groups "
            f"{num_query_groups}; use groups in {divisors(num_attention_heads)}")


@rule("GL208", "zero-stage-with-megatron-lm", "zero_stage is a DeepSpeed setting.")
def zero_with_megatron(zero_stage: int, framework: str, megatron_fsdp: bool | None = None) -> str | None:
    """Megatron-LM has no ZeRO stages; its equivalent of ZeRO-1 is the distributed optimizer, and
    Megatron-FSDP (megatron_fsdp) shards as the stage says (--data-parallel-sharding-strategy).
    Fix: distributed_optimizer: true instead, or megatron_fsdp: true.

    Example: zero_stage: 3 with framework megatron-lm."""
    if framework_of(framework).sharding != "distributed_optimizer" or zero_stage == 0 or megatron_fsdp:
        return None
    return (f"zero_stage {zero_stage} has no effect with megatron-lm; remove it and set "
            "distributed_optimizer: true for ZeRO-1-style sharding, or megatron_fsdp: true to shard "
            "as the stage says (Megatron-FSDP)")


@rule("GL238", "megatron-fsdp",
      "Megatron-FSDP checkpoints in fsdp_dtensor and needs more than one CUDA connection.")
def megatron_fsdp_settings(megatron_fsdp: bool, ckpt_format: str | None = None,
                           cuda_device_max_connections: str | None = None) -> str | None:
    """Megatron-LM's validate_args with --use-megatron-fsdp asserts ``--ckpt-format fsdp_dtensor``
    (Megatron FSDP only supports fsdp_dtensor checkpoint format) and that
    CUDA_DEVICE_MAX_CONNECTIONS is not 1 (FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset).
    Fix: checkpoint.format fsdp_dtensor (or leave it: gen-launch writes it), and do not export
    CUDA_DEVICE_MAX_CONNECTIONS=1.

    Example: megatron_fsdp with checkpoint.format torch_dist."""
    if not megatron_fsdp:
        return None
    if ckpt_format is not None and ckpt_format != "fsdp_dtensor":
        return (f"Megatron-FSDP checkpoints only in the fsdp_dtensor format, not {ckpt_format}; set "
                "checkpoint.format fsdp_dtensor or remove it", ("ckpt_format", "megatron_fsdp"))
    if cuda_device_max_connections == "1":
        return ("Megatron-FSDP refuses CUDA_DEVICE_MAX_CONNECTIONS=1; do not export it",
                ("cuda_device_max_connections", "megatron_fsdp"))
    return None


@rule("GL209", "distributed-optimizer-with-deepspeed",
      "The Megatron distributed optimizer is megatron-lm only.")
def dist_opt_with_deepspeed(distributed_optimizer: bool, framework: str) -> str | None:
    """With DeepSpeed the optimizer state is sharded by ZeRO (zero_stage). Fix: zero_stage 1 instead.

    Example: distributed_optimizer: true with framework deepspeed."""
    if not distributed_optimizer or framework_of(framework).sharding == "distributed_optimizer":
        return None
    return (f"distributed_optimizer is a megatron-lm option, not {framework}; use zero_stage 1 "
            "instead")


@rule("GL210", "vpp-without-megatron-lm",
      "Virtual pipeline stages (interleaving) exist only in Megatron-LM's schedules.")
def vpp_framework(vpp: int, framework: str, megatron_dialect: str | None = None) -> str | None:
    """DeepSpeed's pipeline engine (used by megatron-deepspeed and deepspeed) has no interleaved
    schedule (the dialect's ``vpp`` capability); torchtitan's interleaved ones do (its table's).
    Fix: vpp 1, or framework megatron-lm or torchtitan.

    Example: vpp 2 with framework megatron-deepspeed."""
    if vpp == 1 or capable(megatron_dialect, "vpp") or registry_can(framework, "vpp"):
        return None
    return f"vpp {vpp} is not supported by {title_of(framework, megatron_dialect)}; set vpp to 1"


@rule("GL211", "moe-top-k", "moe_top_k needs experts and may not exceed their number.")
def moe_top_k(moe_top_k: int, num_experts: int | None = None) -> str | None:
    """Each token is routed to top-k of num_experts experts. Fix: moe_top_k ≤ num_experts, with
    num_experts set.

    Example: moe_top_k 3 with 2 experts."""
    if num_experts is None:
        return f"moe_top_k {moe_top_k} needs model.num_experts; remove it for a dense model"
    if moe_top_k <= num_experts:
        return None
    return f"moe_top_k {moe_top_k} exceeds num_experts {num_experts}"


@rule("GL212", "min-lr-above-lr", "min_lr may not exceed lr.")
def min_lr_above_lr(min_lr: float, lr: float) -> str | None:
    """Megatron's scheduler asserts ``min_lr <= lr``. Fix: min_lr below lr.

    Example: min_lr 1e-3 with lr 1e-4."""
    if min_lr <= lr:
        return None
    return f"min_lr {min_lr} is greater than lr {lr}; use a min_lr below lr (often lr / 10)"


@rule("GL213", "alibi-needs-megatron-deepspeed",
      "ALiBi position embeddings exist only in the Megatron-DeepSpeed (BigScience) code.")
def alibi(position_embedding: str, framework: str) -> str | None:
    """megatron-core offers learned_absolute, rope and none; of the Megatron-DeepSpeed forks only
    BigScience's has ALiBi (GL218 refuses it for microsoft's). Fix: rope, or framework
    megatron-deepspeed with megatron.fork bigscience.

    Example: position_embedding alibi with framework megatron-lm."""
    if position_embedding != "alibi" or not framework_of(framework).megatron_core:
        return None
    return ("position_embedding alibi is not available in megatron-lm; use rope, or megatron-deepspeed "
            "with megatron.fork bigscience")


@rule("GL215", "fp8-unsupported",
      "FP8 training needs Megatron-LM (Transformer Engine) and a GPU with FP8 tensor cores.")
def fp8_support(precision: str, framework: str, gpu: str | None = None,
                gpu_has_fp8: bool | None = None, megatron_dialect: str | None = None) -> str | None:
    """``--fp8-format`` runs the linear layers through Transformer Engine's FP8 GEMMs: Hopper
    (H100, H200), Blackwell (B200, GB200), AMD MI300X/MI325X and Gaudi 3 have FP8 tensor cores;
    A100 and the Ascend 910B do not. Megatron-DeepSpeed and plain DeepSpeed JSON have no FP8
    setting (the dialect's ``fp8`` capability). Fix: precision bf16, or a GPU with FP8 and
    framework megatron-lm.

    Example: precision fp8 on a100-80gb."""
    if precision != "fp8":
        return None
    if gpu_has_fp8 is False:
        return (f"precision fp8 needs FP8 tensor cores, which {gpu} does not have; use bf16, or a "
                "GPU with FP8 (h100-80gb, h200-141gb, b200, gb200, mi300x, mi325x, gaudi3)",
                ("precision", "gpu"))
    if not capable(megatron_dialect, "fp8") and not registry_can(framework, "fp8"):
        return (f"precision fp8 (Transformer Engine) is a Megatron-LM feature, not "
                f"{title_of(framework, megatron_dialect)}'s; use bf16", ("precision", "framework"))
    return None


@rule("GL216", "packing-without-megatron",
      "data.packing renders Megatron's flags, or TRL's for Trainer runs; not for a plain DeepSpeed script.",
      severity="warning")
def packing_framework(packing: bool, framework: str, launcher: str | None = None) -> str | None:
    """Packing is rendered as Megatron's --reset-position-ids, --reset-attention-mask and
    --eod-mask-loss, and for Trainer runs (FSDP2, DeepSpeed through accelerate) as TRL SFTConfig's
    --packing with --padding_free; a plain DeepSpeed training script packs in its own data
    pipeline. Fix: pack there, or use a Megatron framework or the accelerate launcher.

    Example: data.packing true with framework deepspeed and launcher torchrun."""
    if not packing or not framework_of(framework).own_script(launcher):
        return None
    return ("data.packing renders nothing for plain DeepSpeed: pack in the training script's data "
            "pipeline (documents must not attend to each other)", ("packing", "framework"))


@rule("GL217", "position-reset-without-attention-mask",
      "Resetting position ids does not stop packed documents from attending to each other.",
      severity="warning")
def reset_without_mask(reset_position_ids: bool, reset_attention_mask: bool) -> str | None:
    """``--reset-position-ids`` restarts the positions at each end of document, but attention still
    crosses document boundaries unless ``--reset-attention-mask`` blocks it (with
    ``--eod-mask-loss`` the end-of-document token is not a target). Fix: add
    --reset-attention-mask (and --eod-mask-loss).

    Example: --reset-position-ids without --reset-attention-mask."""
    if not reset_position_ids or reset_attention_mask:
        return None
    return ("--reset-position-ids without --reset-attention-mask: packed documents still attend to "
            "each other; add --reset-attention-mask and --eod-mask-loss")


@rule("GL204", "schedule-contradiction",
      "Run length and LR schedule flags must not contradict each other; warmup shorter than the run.")
def schedule_contradiction(warmup_iters: int | None = None, train_iters: int | None = None,
                           megatron_flags: dict | None = None) -> str | None:
    """Megatron: ``expected iteration-based training`` / ``expected sample-based training`` when the
    families mix, ``can only specify one of lr-warmup-fraction and lr-warmup-iters``, and the
    scheduler asserts warmup_steps < decay_steps (DeepSpeed's WarmupDecayLR only warns, then
    never decays). Fix: one family of flags, and a warmup of 1-5% of the run.

    Example: --train-iters with --lr-decay-samples, or a warmup of 1,000 steps in a 1,000-step
    run."""
    flags = megatron_flags or {}

    def at(flag: str) -> tuple[str, str]:
        return flag, flags[flag]

    if "--train-iters" in flags and "--train-samples" in flags:
        return ("--train-iters and --train-samples are both given; keep one", (),
                at("--train-samples"), at("--train-iters"))
    warmup_counts = sorted({"--lr-warmup-iters", "--lr-warmup-samples"} & set(flags))
    if "--lr-warmup-fraction" in flags and warmup_counts:
        return ("--lr-warmup-fraction excludes --lr-warmup-iters and --lr-warmup-samples", (),
                at(warmup_counts[0]), at("--lr-warmup-fraction"))
    samples = sorted({"--lr-decay-samples", "--lr-warmup-samples"} & set(flags))
    iterations = sorted({"--lr-decay-iters", "--lr-warmup-iters"} & set(flags))
    if "--train-iters" in flags and samples:
        return (f"--train-iters with {samples[0]}: Megatron expects iteration-based flags", (),
                at(samples[0]), at("--train-iters"))
    if "--train-samples" in flags and iterations:
        return (f"--train-samples with {iterations[0]}: Megatron expects sample-based flags", (),
                at(iterations[0]), at("--train-samples"))
    if warmup_iters is not None and train_iters is not None and warmup_iters >= train_iters:
        return (f"warmup of {warmup_iters} iterations is not shorter than the run of {train_iters} "
                "iterations; use a warmup of 1-5% of the run")
    return None


@rule("GL224", "precision-aware-optimizer-requirements",
      "bf16 optimizer states or main gradients need Megatron-LM's distributed optimizer.")
def precision_aware_optimizer(optimizer_states: str, main_grads: str, framework: str,
                              distributed_optimizer: bool | None = None) -> str | None:
    """training.optimizer_states / main_grads bf16 are Megatron-LM's precision-aware optimizer
    (--use-precision-aware-optimizer with --exp-avg-dtype, --exp-avg-sq-dtype, --main-grads-dtype;
    Transformer Engine's FusedAdam), which megatron-core accepts only with the distributed
    optimizer (OptimizerConfig: "--use-precision-aware-optimizer only supported with distributed
    optimizer"); DeepSpeed and FSDP keep fp32 optimizer state here. Fix: set
    parallelism.distributed_optimizer: true, or keep them fp32.

    Example: training.optimizer_states bf16 without the distributed optimizer."""
    given = [f"{name} bf16" for name, value in (("training.optimizer_states", optimizer_states),
                                                 ("training.main_grads", main_grads)) if value == "bf16"]
    if not given:
        return None
    if not framework_of(framework).megatron_core:
        return (f"{' and '.join(given)}: Megatron-LM's precision-aware optimizer, not {framework}'s; "
                "keep them fp32")
    if distributed_optimizer:
        return None
    return (f"{' and '.join(given)} need the distributed optimizer (megatron-core: precision-aware optimizer "
            "only supported with distributed optimizer); set parallelism.distributed_optimizer: true")


@rule("GL225", "tp-comm-overlap-requirements",
      "--tp-comm-overlap needs tp > 1, sequence parallelism and NVIDIA GPUs (Transformer Engine).")
def tp_comm_overlap_requirements(tp_comm_overlap: bool, tp: int | None = None,
                                 sequence_parallel: bool | None = None,
                                 gpu_vendor: str | None = None, framework: str | None = None) -> str | None:
    """parallelism.tp_comm_overlap (--tp-comm-overlap) pipelines the sequence-parallel
    all-gathers and reduce-scatters with the GEMMs through Transformer Engine's userbuffers.
    Megatron-LM's validate_args refuses it without sequence parallelism ("Tensor parallel
    communication/GEMM overlap can happen only when sequence parallelism is enabled"), and it
    turns sequence parallelism off itself when tp is 1, so tp 1 fails too; the userbuffers are
    CUDA (NVIDIA GPUs only). torchtitan's async TP (the same setting there, GL241) does not ask for
    sequence parallelism. Fix: tp > 1 with parallelism.sequence_parallel: true, or leave the
    overlap off.

    Example: --tp-comm-overlap with --tensor-model-parallel-size 8 and no --sequence-parallel."""
    if not tp_comm_overlap:
        return None
    if tp is not None and tp < 2:
        return ("tp_comm_overlap with tp 1: there is no tensor-parallel communication to overlap, and "
                "Megatron-LM turns sequence parallelism off with tp 1, so validate_args refuses it; "
                "leave the overlap off or set tp > 1", ("tp_comm_overlap", "tp"))
    if not sequence_parallel and (framework is None or framework_of(framework).megatron_core):
        return ("tp_comm_overlap needs sequence parallelism (Megatron-LM: tensor parallel "
                "communication/GEMM overlap can happen only when sequence parallelism is enabled); "
                "set parallelism.sequence_parallel: true (--sequence-parallel)",
                ("tp_comm_overlap", "sequence_parallel"))
    if gpu_vendor is not None and gpu_vendor != "nvidia":
        return (f"tp_comm_overlap on {gpu_vendor} GPUs: Transformer Engine's userbuffers run on "
                "NVIDIA GPUs only; leave the overlap off", ("tp_comm_overlap", "gpu_vendor"))
    return None


@rule("GL226", "fp8-recipe-requirements",
      "FP8 recipe blockwise needs megatron-core 0.14, mxfp8 a Blackwell GPU.")
def fp8_recipe_requirements(fp8_recipe: str, megatron_version: str | None = None,
                            megatron_dialect: str | None = None, nvidia_cc: float | None = None,
                            gpu: str | None = None, precision: str | None = None,
                            framework: str | None = None) -> str | None:
    """training.fp8_recipe (--fp8-recipe) picks how Transformer Engine scales the FP8 tensors
    (Megatron reads it only with --fp8-format: a run in another precision ignores it).
    blockwise is a choice of megatron-core 0.14 and later (earlier parsers refuse it); mxfp8
    scales 32-element blocks in the tensor cores of Blackwell (compute capability 10) and later,
    which Transformer Engine refuses on Hopper. torchtitan's recipes are torchao's converters, its
    table's (rowwise, mxfp8); rowwise is none of Transformer Engine's. Fix: a newer
    megatron.version, delayed / tensorwise (or blockwise) on Hopper, a recipe of the framework's.

    Example: fp8_recipe mxfp8 on h100-80gb."""
    if precision is not None and precision != "fp8":
        return None
    own = registry_recipes(framework) if framework is not None else None
    if own is not None and fp8_recipe not in own:
        return (f"fp8_recipe {fp8_recipe} is not one of {framework}'s ({', '.join(own)}); set "
                f"training.fp8_recipe to one", ("fp8_recipe", "framework"))
    if own is None and fp8_recipe == "rowwise" and megatron_dialect is not None:
        return ("fp8_recipe rowwise is torchtitan's (torchao); Transformer Engine scales delayed, "
                "tensorwise, blockwise or mxfp8", ("fp8_recipe", "framework"))
    if fp8_recipe == "blockwise" and megatron_dialect is not None and \
            not dialect(megatron_dialect, megatron_version).can("fp8_blockwise"):
        return (f"fp8_recipe blockwise needs megatron-core 0.14 or later (megatron.version is "
                f"{megatron_version}); use a newer version or tensorwise", ("fp8_recipe", "megatron_version"))
    if fp8_recipe == "mxfp8" and nvidia_cc is not None and nvidia_cc < 10:
        return (f"fp8_recipe mxfp8 needs Blackwell's block-scaled FP8 tensor cores (compute capability "
                f"10), which {gpu or 'this GPU'} ({nvidia_cc:.1f}) does not have; use delayed, tensorwise or "
                "blockwise", ("fp8_recipe", "nvidia_cc"))
    return None


@rule("GL229", "expert-bias-needs-sigmoid",
      "Aux-loss-free expert bias needs sigmoid router scores.")
def expert_bias_scores(moe_router_expert_bias: bool,
                       moe_router_score_function: str | None = None) -> str | None:
    """megatron-core's TransformerConfig raises ``Expert bias for aux-loss-free routing only
    supports 'sigmoid' and 'sqrtsoftplus' score functions`` at start-up: the bias shifts the
    choice among independent scores, which a softmax over the experts does not give. Fix:
    moe_router_score_function sigmoid (--moe-router-score-function sigmoid, as DeepSeek-V3), or
    no expert bias.

    Example: --moe-router-enable-expert-bias with the default softmax scores."""
    if not moe_router_expert_bias or moe_router_score_function in (None, "sigmoid", "sqrtsoftplus"):
        return None
    return (f"moe_router_expert_bias needs sigmoid router scores, not {moe_router_score_function}; set "
            "moe_router_score_function: sigmoid (--moe-router-score-function sigmoid) or drop the expert "
            "bias",
            ("moe_router_expert_bias", "moe_router_score_function"))


@rule("GL230", "group-limited-routing",
      "Group-limited routing needs groups that divide the experts and hold the top-k.")
def group_limited_routing(moe_router_group_topk: int, moe_router_num_groups: int | None = None,
                          num_experts: int | None = None, moe_top_k: int | None = None) -> str | None:
    """megatron-core's TransformerConfig: ``When using group limited routing,
    moe_router_num_groups must be specified``, ``num_moe_experts should be divisible by
    moe_router_num_groups`` and ``moe_router_group_topk should be smaller than
    moe_router_num_groups``; and the router picks its top-k experts among the chosen groups'
    experts, so k may not exceed group_topk × experts per group (torch.topk fails in the first
    step). Fix: DeepSeek-V3's 8 groups of 32 experts, 4 per token, top 8.

    Example: --moe-router-group-topk 4 without --moe-router-num-groups."""
    if moe_router_num_groups is None:
        return (f"moe_router_group_topk {moe_router_group_topk} needs moe_router_num_groups "
                "(--moe-router-num-groups)", ("moe_router_group_topk",))
    if num_experts is not None and num_experts % moe_router_num_groups:
        return (f"num_experts {num_experts} is not divisible by moe_router_num_groups "
                f"{moe_router_num_groups}; "
                f"use groups in {divisors(num_experts)}", ("moe_router_num_groups", "num_experts"))
    if moe_router_group_topk > moe_router_num_groups:
        return (f"moe_router_group_topk {moe_router_group_topk} exceeds moe_router_num_groups "
                f"{moe_router_num_groups}", ("moe_router_group_topk", "moe_router_num_groups"))
    if num_experts is not None and moe_top_k is not None and \
            moe_top_k > moe_router_group_topk * (num_experts // moe_router_num_groups):
        held = moe_router_group_topk * (num_experts // moe_router_num_groups)
        return (f"moe_top_k {moe_top_k} exceeds the {held} experts of the {moe_router_group_topk} groups "
                f"each token may use ({num_experts} experts in {moe_router_num_groups} groups)",
                ("moe_top_k", "moe_router_group_topk"))
    return None


@rule("GL231", "latent-attention-with-query-groups",
      "Multi-latent attention has no grouped-query attention.")
def latent_attention_groups(multi_latent_attention: bool, num_attention_heads: int | None = None,
                            num_query_groups: int | None = None,
                            group_query_attention: bool = False) -> str | None:
    """Megatron-LM's validate_args: ``Group query attention is mutually exclusive with multi latent
    attention`` (every head has its own key and value, up-projected from the shared latent).
    Fix: num_query_groups equal to the heads (no --group-query-attention / --num-query-groups).

    Example: --multi-latent-attention with --group-query-attention --num-query-groups 8."""
    if not multi_latent_attention:
        return None
    grouped = num_query_groups is not None and num_attention_heads is not None and \
        num_query_groups != num_attention_heads
    if not (grouped or group_query_attention):
        return None
    return ("multi-latent attention excludes grouped-query attention; leave num_query_groups at the "
            "heads (no --group-query-attention)", ("multi_latent_attention", "num_query_groups"))


@rule("GL232", "mtp-position-embedding",
      "Multi-token prediction needs positions it can shift: learned, rope or none.")
def mtp_positions(mtp_num_layers: int, position_embedding: str | None = None,
                  megatron_flag_values: dict | None = None,
                  megatron_dialect: str | None = None) -> str | None:
    """Megatron-LM's validate_args: ``Multi-Token Prediction (MTP) is not supported with 'yarn'
    position embedding type`` (it shifts position ids; supported: learned_absolute, rope, mrope,
    none). YaRN outside multi-latent attention is the yarn type (rope with rope_scaling type
    yarn); MLA's YaRN (--rope-type yarn) is rope and works. Fix: no MTP layers, or rope
    positions.

    Example: --mtp-num-layers 1 with --position-embedding-type yarn."""
    if position_embedding is None and megatron_dialect is not None:  # a script's, as its flag gives it
        given = _given(megatron_flag_values, megatron_dialect, "position_embedding")
        position_embedding = (megatron_flag_values[given[0]] or (None,))[0] if given else None
    if not mtp_num_layers or position_embedding in (None, "learned_absolute", "rope", "mrope", "none"):
        return None
    return (f"mtp_num_layers {mtp_num_layers} with {position_embedding} positions: Megatron's MTP supports "
            "learned_absolute, rope, mrope and none; drop the MTP layers or the YaRN position type",
            ("mtp_num_layers", "position_embedding"))


@rule("GL233", "expert-bias-with-expert-tp",
      "Biased experts need expert tensor parallelism 1.")
def biased_experts_etp(num_experts: int, etp: int, framework: str,
                       linear_bias: bool | None = None) -> str | None:
    """megatron-core's TransformerConfig asserts ``Bias in Moe is only supported when ETP==1``:
    with linear biases (Megatron's default; gpt-oss) the experts cannot be split over tensor
    parallelism. Fix: parallelism.etp 1 (--expert-tensor-parallel-size 1), or
    linear_bias: false (--disable-bias-linear).

    Example: --num-experts 8 --expert-tensor-parallel-size 2 without --disable-bias-linear."""
    if not framework_of(framework).megatron_core or not linear_bias or etp == 1:
        return None
    return (f"experts with linear biases need expert tensor parallelism 1, not etp {etp}; set "
            "parallelism.etp: 1 (--expert-tensor-parallel-size 1) or linear_bias: false",
            ("etp", "linear_bias"))


@rule("GL234", "top1-needs-pre-softmax",
      "Top-1 softmax routing needs the softmax before the top-k.")
def top1_pre_softmax(moe_top_k: int, framework: str, moe_router_pre_softmax: bool | None = None,
                     moe_router_score_function: str | None = None,
                     moe_load_balancing: str | None = None) -> str | None:
    """megatron-core's TransformerConfig: ``Please use --moe-router-pre-softmax when topk is 1``
    (a softmax over the one chosen score is 1 and its gradient zero). Fix:
    moe_router_pre_softmax true (its default at top-1), top-k above 1, sigmoid scores or
    sinkhorn balancing.

    Example: --moe-router-topk 1 without --moe-router-pre-softmax."""
    if not framework_of(framework).megatron_core or moe_top_k != 1 or moe_router_pre_softmax is not False \
            or moe_router_score_function != "softmax" or moe_load_balancing in (None, "sinkhorn"):
        return None
    return ("top-1 softmax routing needs the softmax before the top-k (moe_router_pre_softmax: true, "
            "--moe-router-pre-softmax)", ("moe_top_k", "moe_router_pre_softmax"))


@rule("GL235", "pipeline-layout",
      "A pipeline layout must place every layer once over pp × vpp stages, alone.")
def pipeline_layout_fits(pp: int, num_layers: int, pipeline_layout: str,
                         mtp_num_layers: int | None = None, vpp_given: int | None = None,
                         vpp: int | None = None, first_stage_layers: int | None = None,
                         last_stage_layers: int | None = None, pipeline_split_embedding: bool | None = None,
                         pipeline_split_loss: bool | None = None) -> str | None:
    """Megatron-LM (core_v0.14 and later) takes --pipeline-model-parallel-layout for layer counts
    no pp × vpp divides, and refuses it at start-up unless its stages are a multiple of pp
    (validate_args), it starts with the embedding and ends with the loss, places the model's
    transformer layers and MTP layers exactly, the MTP layers after the transformer layers and
    in the last virtual stage of their rank (PipelineParallelLayerLayout), and no other way of
    splitting is given: first/last stage layers, counting the embedding or loss in the split
    (TransformerConfig: ValueError), a virtual pipeline size it does not give (validate_args: no
    more than one of the virtual stage arguments). Fix: the layout's stages (DeepSeek-V3 on pp 8
    × vpp 4: ``Et*3|(tt|)*29,m|L``), or one way of splitting.

    Example: --pipeline-model-parallel-layout "Et*3|(tt|)*29,m|L" with --num-layers 60."""
    text = pipeline_layout
    try:
        layout = PipelineLayout.parse(text)
    except LayoutError as exc:
        return f"pipeline layout {text!r}: {exc}", ("pipeline_layout", "pp")
    others = [name for name, given in (("first_stage_layers", first_stage_layers),
                                       ("last_stage_layers", last_stage_layers),
                                       ("account_for_embedding_in_pipeline_split", pipeline_split_embedding),
                                       ("account_for_loss_in_pipeline_split", pipeline_split_loss)) if given]
    if others:
        return (f"a pipeline layout excludes {' and '.join(others)} (Megatron raises ValueError); keep one "
                "way of splitting", ("pipeline_layout", "first_stage_layers", "last_stage_layers"))
    problem = layout.problem(pp, num_layers, mtp_num_layers or 0)
    if problem is not None:
        return f"pipeline layout {text!r} on pp {pp}: {problem}", ("pipeline_layout", "pp", "num_layers")
    # the spec's vpp (the plan's vpp fact is the layout's), or the script's virtual stages
    given = vpp if vpp_given is None else vpp_given
    if given not in (None, 1) and given != layout.vpp(pp):
        return (f"vpp {given} beside a pipeline layout of {len(layout.stages)} stages on pp {pp} (vpp "
                f"{layout.vpp(pp)}): the layout gives the virtual stages; leave vpp out",
                ("pipeline_layout", "vpp_given", "vpp"))
    return None


@rule("GL236", "recompute-modules",
      "Module-level recompute needs selective recompute and the modules it names.")
def recompute_modules(recompute_modules: tuple, recompute: str | None = None,
                      moe_grouped_gemm: bool | None = None,
                      multi_latent_attention: bool | None = None) -> str | None:
    """megatron-core recomputes the modules of --recompute-modules with selective granularity
    only, and refuses at start-up ``moe_act in recompute_modules is only supported with
    moe_grouped_gemm`` and ``mla_up_proj in recompute_modules is only supported with
    multi_latent_attention`` (ValueError). Fix: recompute: selective with modules the model has
    (DeepSeek-V3: moe_act, layernorm, mla_up_proj with grouped GEMM).

    Example: --recompute-modules moe_act without --moe-grouped-gemm."""
    modules = set(recompute_modules)
    if recompute in ("none", "full"):  # (auto-plan's choice is made before the rules see it)
        return (f"recompute_modules {', '.join(recompute_modules)} take effect with selective recompute, not "
                f"{recompute}; set training.recompute: selective", ("recompute_modules", "recompute"))
    if "moe_act" in modules and moe_grouped_gemm is False:
        return ("recompute_modules moe_act needs the grouped GEMM (model.moe_grouped_gemm: true, "
                "--moe-grouped-gemm)", ("recompute_modules", "moe_grouped_gemm"))
    if "mla_up_proj" in modules and multi_latent_attention is False:
        return ("recompute_modules mla_up_proj needs multi-latent attention (--multi-latent-attention)",
                ("recompute_modules", "multi_latent_attention"))
    return None


@rule("GL237", "ep-comm-overlap-requirements",
      "Expert-parallel all-to-all overlap needs ep > 1, alltoall or flex, bf16, no full recompute.")
def ep_overlap(ep_comm_overlap: bool, ep: int | None = None, moe_token_dispatcher: str | None = None,
               recompute: str | None = None, recompute_modules: tuple | None = None,
               precision: str | None = None, mtp_num_layers: int | None = None, pp: int | None = None,
               vpp: int | None = None, pipeline_layout: str | None = None) -> str | None:
    """megatron-core's TransformerConfig asserts for --overlap-moe-expert-parallel-comm: expert
    model parallelism (ep > 1), the alltoall or flex dispatcher, no full recompute and no moe in
    the recompute modules, a bf16 or fp16 model, at most one MTP layer, and with pp > 1 a virtual
    pipeline (the overlap splits 1F1B's micro-batches). Fix: the setting named, or no overlap.

    Example: --overlap-moe-expert-parallel-comm with --expert-model-parallel-size 1."""
    if not ep_comm_overlap:
        return None
    dispatcher = moe_token_dispatcher or ("alltoall" if (ep or 1) > 1 else "allgather")
    if pipeline_layout is not None and pp:  # a layout gives the virtual stages
        with contextlib.suppress(LayoutError):
            vpp = PipelineLayout.parse(pipeline_layout).vpp(pp)
    problems = [
        ("ep", ep is not None and ep <= 1, f"ep {ep}: there is no expert-parallel all-to-all to hide"),
        ("moe_token_dispatcher", dispatcher not in ("alltoall", "flex"),
         f"the {dispatcher} dispatcher (alltoall or flex only)"),
        ("recompute", recompute == "full", "full recompute"),
        ("recompute_modules", "moe" in (recompute_modules or ()), "moe in recompute_modules"),
        ("precision", precision is not None and precision not in ("bf16", "fp16", "fp8"),
         f"precision {precision} (a bf16 or fp16 model only)"),
        ("mtp_num_layers", (mtp_num_layers or 0) > 1, f"{mtp_num_layers} MTP layers (at most one)"),
        ("vpp", (pp or 1) > 1 and (vpp or 1) == 1, f"pp {pp} without virtual stages (set vpp)"),
    ]
    found = [(name, why) for name, bad, why in problems if bad]
    if not found:
        return None
    return (f"ep_comm_overlap (--overlap-moe-expert-parallel-comm) does not run with "
            f"{'; '.join(why for _, why in found)}", ("ep_comm_overlap", *(name for name, _ in found)))
