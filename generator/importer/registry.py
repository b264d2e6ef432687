"""A config registry's command line (torchtitan) -> spec values: the facts its reader gave, each
to the spec field its table entry names (`spec:`), the model preset its config module builds,
and the schedule its LR options describe. What the words leave to the config function is unknown
statically (marked)."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from generator.dialects import table, table_entries
from generator.importer.draft import Draft
from generator.readers.registry_config import SHAPE
from generator.rules import Fact
from generator.spec.model import model_from

_FROM_FUNCTION = "not on the command line: the config function's value (not imported); check it"


def read_registry(framework: str, facts: dict[str, Fact], draft: Draft) -> dict:
    """Sets the spec values; returns the model the config module builds (its preset's fields, as
    a plan.json's model: import's model reader writes it as the preset), {} where unknown."""
    def value(name: str):
        return facts[name].value if name in facts else None

    draft.set(f"{framework}.version", tuple(table(framework)["releases"])[-1])
    for entry in table_entries(framework):
        found = value(entry.fact or entry.value or "")
        if entry.spec is not None and found is not None and entry.spec not in draft.values:
            draft.set(entry.spec, found)
    if draft.get("parallelism.dp_replicate") == 1:  # one replica: the shard group is dp (as derived)
        del draft.values["parallelism.dp_replicate"]
    draft.set("batch.micro_batch_size", value("micro_batch_size"))
    if value("fp8_recipe") is not None:  # the recipe of the config module's FP8 converters
        draft.set("training.fp8_recipe", value("fp8_recipe"))
    for path, name in (("training.train_iters", "train_iters"), ("model.seq_length", "seq_length"),
                       ("training.lr", "lr")):
        if value(name) is None:
            draft.unknown(path, _FROM_FUNCTION)
    _schedule(value, draft)
    preset = value("preset")
    return {**dataclasses.asdict(model_from({"preset": preset})), "preset": preset} if preset else {}


def write_shape(facts: dict[str, Fact], draft: Draft) -> None:
    """The shape the config module's flavor fixes, written out (after the model reader wrote its
    preset): what lint read from the files, stated in the spec."""
    for key in (*SHAPE, "seq_length"):
        if key in facts and facts[key].value is not None:
            draft.set(f"model.{key}", facts[key].value)


def _schedule(value, draft: Draft) -> None:
    """warmup, decay and min_lr from torchtitan's LR scheduler options."""
    if isinstance(value("lr_warmup_iters"), int):
        draft.set("training.warmup", {"iters": value("lr_warmup_iters")})
    ratio, kind = value("titan_decay_ratio"), value("titan_decay_type")
    if ratio is not None:
        fraction = Fraction(str(ratio)).limit_denominator(10_000)
        draft.set("training.decay", "constant" if fraction == 0 else "wsd")
        if fraction:
            draft.set("training.wsd_decay", str(fraction))
    elif kind in ("cosine", "linear"):
        draft.set("training.decay", kind)
    factor, lr = value("min_lr_factor"), draft.get("training.lr")
    if factor is not None and isinstance(lr, float):
        draft.set("training.min_lr", float(f"{float(factor) * lr:.12g}"))
