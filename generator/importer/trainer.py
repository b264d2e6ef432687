"""Hugging Face TrainingArguments (FSDP2 and DeepSpeed-through-accelerate runs) and an accelerate
config -> spec values. The Trainer's dialect table (generator/dialects/trainer.yaml) maps its
flags back to their fields; other words stay in launch.extra_args. Absent flags take the
Trainer's own defaults (its catalogue)."""

from __future__ import annotations

import json

from generator.dialects import dialect
from generator.frameworks import framework_of
from generator.importer.draft import Draft
from generator.importer.megatron import (
    flag_value,
    framework_defaults,
    read_entries,
    set_adam_betas,
    shortest_fraction,
    split_words,
)
from generator.rules import Fact

_CHECKPOINTING = ("activation checkpointing is on; the Trainer checkpoints whole layers, which "
                  "selective and full both render; full assumed (used by the estimates)")


def read_trainer(words: list[str | None], draft: Draft) -> list[str | None]:
    """Spec values from the Trainer's arguments; returns the words left for extra_args."""
    d = dialect("trainer")
    # the entry point's model name stays as the script gives it (extra_args), where it is
    kept = {e.flag for e in d.entries if e.spec is None and "entry_point" in (e.only or {})}
    known, extra = split_words(words, {e.flag: e.arity for e in d.entries if e.flag not in kept})
    for path, value in framework_defaults(d).items():
        draft.set(path, value)
    read_entries(known, draft, d, extra)
    if "--adam_beta1" in known or "--adam_beta2" in known:
        set_adam_betas(draft, flag_value(known, "--adam_beta1", float),
                       flag_value(known, "--adam_beta2", float))
    warmup = flag_value(known, "--warmup_steps")
    draft.set("training.warmup", {"iters": warmup} if warmup else 0)
    _scheduler_kwargs(known, draft)
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
    framework = value("accelerate_framework")
    if framework is None or not framework_of(framework).fsdp:
        return
    draft.set("framework", framework)
    reshard = value("accelerate_reshard_after_forward")
    draft.set("parallelism.zero_stage", 2 if reshard is False else 3)
    if value("accelerate_offload_params"):
        draft.set("parallelism.zero_offload", "optimizer_and_params")
    if value("accelerate_activation_checkpointing"):
        draft.unknown("training.recompute", _CHECKPOINTING, "full")
    for size in ("tp", "cp"):  # parallelism_config's model-parallel sizes
        if isinstance(value(size), int):
            draft.set(f"parallelism.{size}", value(size))
    replicate = value("dp_replicate")
    if isinstance(replicate, int) and replicate > 1 and replicate == nodes:
        draft.set("parallelism.hybrid_shard", True)
    elif isinstance(replicate, int) and replicate > 1:
        draft.set("parallelism.dp_replicate", replicate)
