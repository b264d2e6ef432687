"""A GPT-NeoX config (``deepy.py train.py configs/*.yml``) -> facts: its model shape, parallel
sizes, batch and ZeRO stage, each with file:line:col. NeoX spells keys with underscores or
dashes and runs Megatron's model on DeepSpeed's engine (pipe_parallel_size 0 means no
pipeline). Read as YAML data only (safe loader)."""

from __future__ import annotations

from generator.readers.yaml_config import read_mapping
from generator.rules.registry import Fact

# NeoX key -> fact
_KEYS = {"model_parallel_size": "tp", "pipe_parallel_size": "pp", "num_layers": "num_layers",
         "hidden_size": "hidden_size", "num_attention_heads": "num_attention_heads",
         "seq_length": "seq_length", "max_position_embeddings": "max_position_embeddings",
         "train_micro_batch_size_per_gpu": "micro_batch_size",
         "gradient_accumulation_steps": "gradient_accumulation_steps",
         "train_batch_size": "global_batch_size"}


def looks_like_neox_config(text: str) -> bool:
    return any(k in text for k in ("pipe_parallel_size", "pipe-parallel-size")) and \
        any(k in text for k in ("num_attention_heads", "num-attention-heads"))


def read_neox_config(text: str, file: str) -> tuple[dict[str, Fact], list[tuple[str, str]]]:
    """(facts, problems)."""
    doc, problems = read_mapping(text, file, "GPT-NeoX config")
    if doc is None:
        return {}, problems
    keys = {str(k).replace("-", "_"): k for k in doc.data}
    # Megatron's model on DeepSpeed's engine; the world comes from deepy.py's hostfile (unknown)
    facts: dict[str, Fact] = {"framework": Fact("megatron-deepspeed", file)}
    for key, fact in _KEYS.items():
        value = doc.data.get(keys.get(key, key))
        if isinstance(value, int) and not isinstance(value, bool):
            facts[fact] = Fact(max(value, 1) if fact == "pp" else value, str(doc.locate([keys[key]])))
    zero = doc.data.get(keys.get("zero_optimization", "zero_optimization"))
    if isinstance(zero, dict) and isinstance(zero.get("stage"), int):
        facts["zero_stage"] = Fact(zero["stage"], str(doc.locate([keys["zero_optimization"], "stage"])))
    for kind in ("bf16", "fp16"):
        section = doc.data.get(keys.get(kind, kind))
        if isinstance(section, dict) and section.get("enabled") is True:
            facts["precision"] = Fact(kind, str(doc.locate([keys[kind]])))
    return facts, []
