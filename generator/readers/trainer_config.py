"""A Trainer run's YAML config (LLaMA-Factory's ``llamafactory-cli train CONFIG.yaml``): its
TrainingArguments keys are the Trainer's flags without ``--`` (trainer.yaml's table), and its
``deepspeed`` key names the DeepSpeed config. Read as YAML data only (safe loader)."""

from __future__ import annotations

from generator.dialects import dialect
from generator.readers.yaml_config import read_mapping
from generator.rules.registry import Fact


def read_trainer_config(text: str, file: str) -> tuple[dict[str, Fact], list[tuple[str, str]],
                                                       tuple[str, str] | None]:
    """(facts, problems, (DeepSpeed config path, where it is named) or None)."""
    doc, problems = read_mapping(text, file, "Trainer config")
    if doc is None:
        return {}, problems, None
    facts: dict[str, Fact] = {}
    if not any(entry.flag[2:] in doc.data for entry in dialect("trainer").entries):
        return {}, [], None  # not a Trainer config (no TrainingArguments key)
    for entry in dialect("trainer").entries:
        key = entry.flag[2:]
        value = doc.data.get(key)
        if value is None or isinstance(value, dict | list):
            continue
        where = str(doc.locate([key]))
        if entry.value == "precision" and not entry.implied:
            if value is True:
                facts["precision"] = Fact(entry.when, where)
        elif entry.type == "int" and isinstance(value, int) and not isinstance(value, bool):
            facts[entry.fact or entry.value] = Fact(value, where)
    facts.setdefault("precision", Fact("fp32", file))
    facts["trainer"] = Fact(True, file)
    config = doc.data.get("deepspeed")
    ref = (config, str(doc.locate(["deepspeed"]))) if isinstance(config, str) and config else None
    if ref is not None:
        facts["framework"] = Fact("deepspeed", ref[1])
    return facts, [], ref
