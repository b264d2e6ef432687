"""Hugging Face TrainingArguments (FSDP2 and DeepSpeed-through-accelerate runs) and an accelerate
config -> spec values. Flags the generator renders (templates/trainer_args.sh.j2) map back to
their fields; other words stay in launch.extra_args. Absent flags take the Trainer's defaults."""

from __future__ import annotations

import json

from generator.importer.draft import Draft
from generator.importer.megatron import flag_value, set_adam_betas, shortest_fraction, split_words
from generator.rules import Fact

_VALUES = {"--per_device_train_batch_size": ("batch.micro_batch_size", int),
           "--gradient_accumulation_steps": ("batch.gradient_accumulation_steps", int),
           "--max_steps": ("training.train_iters", int), "--learning_rate": ("training.lr", float),
           "--weight_decay": ("training.weight_decay", float),
           "--adam_epsilon": ("training.adam_eps", float),
           "--max_grad_norm": ("training.gradient_clipping", float),
           "--seed": ("training.seed", int), "--logging_steps": ("training.log_interval", int)}
_SCHEDULERS = {"cosine": "cosine", "cosine_with_min_lr": "cosine", "linear": "linear",
               "constant": "constant", "constant_with_warmup": "constant",
               "warmup_stable_decay": "wsd"}
_OTHERS = {"--warmup_steps": 1, "--lr_scheduler_type": 1, "--lr_scheduler_kwargs": 1,
           "--adam_beta1": 1, "--adam_beta2": 1, "--bf16": 0, "--fp16": 0,
           "--gradient_checkpointing": 0, "--fsdp": 1, "--fsdp_config": 1, "--packing": 0,
           "--padding_free": 0}
_ARITY = {**dict.fromkeys(_VALUES, 1), **_OTHERS}
_CHECKPOINTING = ("activation checkpointing is on; the Trainer checkpoints whole layers, which "
                  "selective and full both render; full assumed (used by the estimates)")
# TrainingArguments' defaults, where they differ from the spec's
_DEFAULTS = {"training.decay": "linear", "training.log_interval": 500, "training.seed": 42,
             "training.weight_decay": 0.0, "training.precision": "fp32", "training.lr": 5e-5}


def read_trainer(words: list[str | None], draft: Draft) -> list[str | None]:
    """Spec values from the Trainer's arguments; returns the words left for extra_args."""
    known, extra = split_words(words, _ARITY)
    for path, value in _DEFAULTS.items():
        draft.set(path, value)
    for flag, (path, kind) in _VALUES.items():
        if (got := flag_value(known, flag, kind)) is not None:
            draft.set(path, got)
    if "--adam_beta1" in known or "--adam_beta2" in known:
        set_adam_betas(draft, flag_value(known, "--adam_beta1", float),
                       flag_value(known, "--adam_beta2", float))
    warmup = flag_value(known, "--warmup_steps")
    draft.set("training.warmup", {"iters": warmup} if warmup else 0)
    kind = (known.get("--lr_scheduler_type") or [None])[0]
    if kind in _SCHEDULERS:
        draft.set("training.decay", _SCHEDULERS[kind])
    _scheduler_kwargs(known, draft)
    for flag in ("--bf16", "--fp16"):
        if flag in known:
            draft.set("training.precision", flag[2:])
    if "--packing" in known:  # TRL's SFTConfig
        draft.set("data.packing", True)
    if "--gradient_checkpointing" in known:
        draft.unknown("training.recompute", _CHECKPOINTING, "full")
    _trainer_fsdp(known, draft)
    return extra


def _scheduler_kwargs(known: dict, draft: Draft) -> None:
    text = (known.get("--lr_scheduler_kwargs") or [None])[0]
    try:
        kwargs = json.loads(text) if text else {}
    except ValueError:
        kwargs = {}
    if not isinstance(kwargs, dict):
        return
    lr = draft.get("training.lr")
    if isinstance(kwargs.get("min_lr"), int | float):
        draft.set("training.min_lr", kwargs["min_lr"])
    elif isinstance(kwargs.get("min_lr_ratio"), int | float) and isinstance(lr, int | float):
        draft.set("training.min_lr", float(f"{kwargs['min_lr_ratio'] * lr:.12g}"))
    steps = draft.get("training.train_iters")
    if isinstance(kwargs.get("num_decay_steps"), int) and steps:
        draft.set("training.wsd_decay", shortest_fraction(kwargs["num_decay_steps"], steps))


def _trainer_fsdp(known: dict, draft: Draft) -> None:
    """--fsdp "full_shard auto_wrap" and --fsdp_config (FSDP2 without accelerate)."""
    if "--fsdp" not in known:
        return
    draft.set("framework", "fsdp")
    mode = known["--fsdp"][0] or ""
    draft.set("parallelism.zero_stage", 2 if "shard_grad_op" in mode else 3)
    try:
        config = json.loads((known.get("--fsdp_config") or ["{}"])[0] or "{}")
    except ValueError:
        config = {}
    if isinstance(config, dict):
        if config.get("activation_checkpointing"):
            draft.unknown("training.recompute", _CHECKPOINTING, "full")
        if config.get("offload_params"):
            draft.set("parallelism.zero_offload", "optimizer_and_params")


def read_accelerate(facts: dict[str, Fact], draft: Draft, nodes: int | None) -> None:
    """Mixed precision and the FSDP2 settings from the accelerate config (the DeepSpeed ones are
    in its JSON)."""
    def value(name: str):
        return facts[name].value if name in facts else None

    mixed = value("accelerate_mixed_precision")
    if mixed in ("bf16", "fp16") and draft.get("training.precision") in (None, "fp32"):
        draft.set("training.precision", mixed)  # accelerate's mixed precision, the Trainer's flags absent
    if value("accelerate_framework") != "fsdp":
        return
    draft.set("framework", "fsdp")
    reshard = value("accelerate_reshard_after_forward")
    draft.set("parallelism.zero_stage", 2 if reshard is False else 3)
    if value("accelerate_offload_params"):
        draft.set("parallelism.zero_offload", "optimizer_and_params")
    if value("accelerate_activation_checkpointing"):
        draft.unknown("training.recompute", _CHECKPOINTING, "full")
    replicate = value("accelerate_dp_replicate_size")
    if isinstance(replicate, int) and replicate > 1 and replicate == nodes:
        draft.set("parallelism.hybrid_shard", True)
