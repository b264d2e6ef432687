"""A GPT-NeoX config (``deepy.py train.py configs/*.yml``) -> facts: its model shape, parallel
sizes, batch and ZeRO stage, each with file:line:col. NeoX spells keys with underscores or
dashes and runs Megatron's model on DeepSpeed's engine (pipe_parallel_size 0 means no
pipeline). Read as YAML data only (safe loader)."""

from __future__ import annotations

from functools import cache

from generator.dialects.keyed import keyed_dialect
from generator.readers.yaml_config import read_mapping
from generator.rules.registry import Fact

# NeoX's own key -> fact (its DeepSpeed keys: deepspeed.yaml's generic ones, _keys)
_NEOX_KEYS = {"model_parallel_size": "tp", "pipe_parallel_size": "pp", "num_layers": "num_layers",
              "hidden_size": "hidden_size", "num_attention_heads": "num_attention_heads",
              "seq_length": "seq_length", "max_position_embeddings": "max_position_embeddings"}


@cache
def _keys() -> dict[tuple[str, ...], str]:
    """A config's key path -> fact: NeoX's own, and the DeepSpeed keys it passes to its engine as
    deepspeed.yaml spells them (train_batch_size, zero_optimization.stage, ...)."""
    deepspeed = {key.path: key.value for key in keyed_dialect("deepspeed").keys if key.generic}
    return {**{(k,): fact for k, fact in _NEOX_KEYS.items()}, **deepspeed}


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
    for path, fact in _keys().items():
        spelt = [keys.get(path[0], path[0]), *path[1:]]
        node = doc.data
        for part in spelt:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, int) and not isinstance(node, bool):
            facts[fact] = Fact(max(node, 1) if fact == "pp" else node, str(doc.locate(spelt)))
    for kind in ("bf16", "fp16"):
        section = doc.data.get(keys.get(kind, kind))
        if isinstance(section, dict) and section.get("enabled") is True:
            facts["precision"] = Fact(kind, str(doc.locate([keys[kind]])))
    return facts, []
