"""A DeepSpeed JSON's facts -> spec values: batch, ZeRO, precision, clipping, and (plain
DeepSpeed, where the JSON holds them) the optimizer and the LR schedule."""

from __future__ import annotations

from generator.dialects.keyed import keyed_dialect
from generator.importer.draft import Draft
from generator.rules import Fact

_OFFLOAD = {(False, False): "none", (True, False): "optimizer", (True, True): "optimizer_and_params"}


def _number(facts: dict[str, Fact], name: str):
    fact = facts.get(name)
    value = fact.value if fact else None
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def read_deepspeed(facts: dict[str, Fact], draft: Draft, owns_optimizer: bool) -> None:
    """Values the Megatron arguments already gave are kept (they win, as in Megatron-DeepSpeed,
    where the JSON's batch must equal them; lint reports when it does not)."""

    def fill(path: str, name: str) -> None:
        if path in draft.values:
            return
        if name in facts and facts[name].value == "auto":
            draft.unknown(path, f'"auto" in the JSON at {facts[name].source} (filled in at run '
                          "time by the Hugging Face integration)")
        elif (value := _number(facts, name)) is not None:
            draft.set(path, value)

    # the dialect table's keys that carry a spec field (deepspeed.yaml); the global batch, when
    # given, decides the accumulation (DeepSpeed derives it)
    for key in keyed_dialect("deepspeed").keys:
        derived = key.spec == "batch.gradient_accumulation_steps" and \
            draft.get("batch.global_batch_size") is not None
        if key.spec and key.fact and key.write and not derived:
            fill(key.spec, key.fact)
    offload = ("ds_offload_optimizer" in facts and facts["ds_offload_optimizer"].value != "none",
               "ds_offload_param" in facts and facts["ds_offload_param"].value != "none")
    draft.set("parallelism.zero_offload", _OFFLOAD.get(offload, "optimizer_and_params"))
    if "ds_bf16" in facts:
        draft.set("training.precision", "bf16")
    elif "ds_fp16" in facts:
        draft.set("training.precision", "fp16")
    elif "training.precision" not in draft.values:
        draft.set("training.precision", "fp32")
    if owns_optimizer:  # DeepSpeed's default: no clipping
        draft.set("training.gradient_clipping", _number(facts, "ds_gradient_clipping") or 0.0)
        fill("training.log_interval", "ds_steps_per_print")
        _optimizer(facts, draft)
        _scheduler(facts, draft)


def _optimizer(facts: dict[str, Fact], draft: Draft) -> None:
    kind, params = facts["ds_optimizer"].value if "ds_optimizer" in facts else (None, {})
    if kind is None:
        draft.unknown("training.lr", "the DeepSpeed JSON has no optimizer (the script builds its own)")
        return
    if str(kind).lower() not in ("adam", "adamw"):
        draft.notes.append(f"optimizer {kind}: the spec renders AdamW")
    for key, path in (("lr", "training.lr"), ("eps", "training.adam_eps"),
                      ("weight_decay", "training.weight_decay")):
        if isinstance(params.get(key), int | float):
            draft.set(path, params[key])
    betas = params.get("betas")
    if isinstance(betas, list) and len(betas) == 2:
        draft.set("training.adam_betas", betas)
    if "training.lr" not in draft.values:
        draft.unknown("training.lr", f"the optimizer's lr is {params.get('lr')!r}")


def _scheduler(facts: dict[str, Fact], draft: Draft) -> None:
    kind, params = facts["ds_scheduler"].value if "ds_scheduler" in facts else (None, {})
    decays = keyed_dialect("deepspeed").names("scheduler.type")  # {DeepSpeed's type: decay}
    if kind not in decays:
        what = f"scheduler {kind!r} is not one the spec renders ({', '.join(decays)})" if kind \
            else "no scheduler in the DeepSpeed JSON"
        draft.unknown("training.train_iters", f"{what}; the run length is set by the training script")
        draft.unknown("training.decay", f"{what}; constant assumed", "constant")
        return
    draft.set("training.decay", decays[kind])
    steps, warmup = params.get("total_num_steps"), params.get("warmup_num_steps", 0)
    if isinstance(steps, int):
        draft.set("training.train_iters", steps)
    else:
        draft.unknown("training.train_iters", f"{kind} has no total_num_steps (WarmupLR never ends); "
                      "the run length is set by the training script")
    if isinstance(warmup, int):
        draft.set("training.warmup", {"iters": warmup} if warmup else 0)
    lr = draft.get("training.lr")
    if "training.lr" not in draft.marks and not isinstance(lr, int | float):
        draft.set("training.lr", params.get("warmup_max_lr"))
        lr = draft.get("training.lr")
    ratio = params.get("cos_min_ratio")
    if kind == "WarmupCosineLR" and isinstance(ratio, int | float) and isinstance(lr, int | float):
        # the JSON holds min_lr / lr; 12 significant digits undo the division's rounding
        draft.set("training.min_lr", float(f"{ratio * lr:.12g}"))
