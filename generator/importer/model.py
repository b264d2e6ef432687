"""The model section of an imported spec: the shape the arguments give (or plan.json, for a
plain DeepSpeed run whose script does not show it), written as a preset plus what differs from
it when a preset has that shape, else field by field."""

from __future__ import annotations

import dataclasses
from typing import Any

from generator import presets
from generator.errors import UserError
from generator.importer.draft import Draft
from generator.spec.fields import fields_of
from generator.spec.model import MODEL_REQUIRED, Model, model_from

# what the files must give (the vocabulary may be missing: the tokenizer decides it)
REQUIRED = tuple(k for k in MODEL_REQUIRED if k != "vocab_size")
_SHAPE = fields_of(Model, group="shape")
# the shape, then the architecture the arguments give (a preset is matched by shape; these
# follow as overrides); required first: once they are written, a field equal to its default need
# not be
_FIELDS = tuple(sorted(fields_of(Model, group=("shape", "architecture", "moe")),
                       key=lambda k: k not in MODEL_REQUIRED))


def read_model(draft: Draft, plan_model: dict[str, Any]) -> None:
    given = {k: draft.values.pop(f"model.{k}") for k in _FIELDS if f"model.{k}" in draft.values}
    unknown = {k: draft.marks.pop(f"model.{k}") for k in _FIELDS if f"model.{k}" in draft.marks}
    assumed: dict[str, str] = {}  # unknown in the files, the built model's value written
    if plan_model and not any(k in given for k in REQUIRED if k != "seq_length"):
        # (a Trainer's entry point gives the sequence length alone: --max_length, --block_size;
        # a torchtitan config function leaves it to the function, the preset's is written)
        assumed = {k: why for k, why in unknown.items()
                   if given.get(k) is None and plan_model.get(k) is not None}
        given = {**{k: plan_model[k] for k in _FIELDS if plan_model.get(k) is not None},
                 **{k: v for k, v in given.items() if v is not None}}
        unknown = {}
    vocab_known = given.get("vocab_size") or plan_model.get("vocab_size")
    missing = [k for k in REQUIRED if k not in given]
    if missing or unknown:
        for key in missing:
            draft.unknown(f"model.{key}", unknown.get(key, "not in the files"))
        for key, value in given.items():
            draft.set(f"model.{key}", value)
        if not vocab_known:
            draft.unknown("model.vocab_size", "not in the files (the tokenizer decides it)")
        return
    files = model_from({**given, "vocab_size": vocab_known or 1})
    preset = _matching_preset(files, plan_model.get("preset"))
    written: dict[str, Any] = {"preset": preset} if preset else {}
    for key in _FIELDS:
        if key == "vocab_size" and not vocab_known:
            continue
        resolved = _resolved({**written, **({} if preset else {"vocab_size": 1})})
        if resolved is None or getattr(resolved, key) != getattr(files, key):
            written[key] = getattr(files, key)
    for key, value in written.items():
        draft.set(f"model.{key}", dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value)
    for key, why in assumed.items():
        draft.set(f"model.{key}", getattr(files, key))
        draft.marks[f"model.{key}"] = f"{why}; the model's value written"
    if not vocab_known:
        if preset:
            draft.marks["model.preset"] = (f"the shape is {preset}'s; vocab_size "
                                           f"{presets.models()[preset]['vocab_size']} is taken from "
                                           "it (the files do not give it)")
        else:
            draft.unknown("model.vocab_size", "not in the files (the tokenizer decides it)")


def _resolved(given: dict[str, Any]) -> Model | None:
    try:
        return model_from(given)
    except UserError:
        return None


def _matching_preset(files: Model, hint: str | None) -> str | None:
    """A preset with the files' shape (sequence length and vocabulary aside), the one whose
    architecture differs from the files' in the fewest fields (Llama 3 and 3.1 share a shape;
    the RoPE scaling tells them apart); plan.json's first among equals."""
    names = [hint] if hint in presets.models() else []
    names += [n for n in presets.models() if n != hint]
    best: tuple[int, str] | None = None
    for name in names:
        resolved = model_from({"preset": name, "seq_length": files.seq_length,
                               "max_position_embeddings": files.max_position_embeddings})
        if all(getattr(resolved, k) == getattr(files, k) for k in _SHAPE
               if k not in ("vocab_size", "seq_length", "max_position_embeddings")):
            differ = sum(getattr(resolved, k) != getattr(files, k) for k in _FIELDS if k not in _SHAPE)
            if best is None or differ < best[0]:
                best = (differ, name)
    return best[1] if best else None
