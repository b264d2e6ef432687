"""An accelerate config file (accelerate launch --config_file) -> facts: its process and machine
counts, the distributed type (DeepSpeed or FSDP) and mixed precision, each with file:line:col.
Read as YAML data only (safe loader, nothing constructed or run)."""

from __future__ import annotations

from generator.errors import UserError
from generator.rules.registry import Fact
from generator.spec.load import load_yaml

_FIELDS = {"accelerate_num_processes": ("num_processes",),
           "accelerate_num_machines": ("num_machines",),
           "accelerate_distributed_type": ("distributed_type",),
           "accelerate_mixed_precision": ("mixed_precision",),
           "accelerate_fsdp_version": ("fsdp_config", "fsdp_version"),
           "accelerate_reshard_after_forward": ("fsdp_config", "fsdp_reshard_after_forward"),
           "accelerate_offload_params": ("fsdp_config", "fsdp_offload_params"),
           "accelerate_activation_checkpointing": ("fsdp_config", "fsdp_activation_checkpointing"),
           "accelerate_dp_replicate_size": ("parallelism_config", "parallelism_config_dp_replicate_size")}
_FRAMEWORK = {"FSDP": "fsdp", "DEEPSPEED": "deepspeed"}


def read_accelerate_config(text: str, file: str) -> tuple[dict[str, Fact], list[tuple[str, str]]]:
    """(facts, problems)."""
    try:
        doc = load_yaml(text, file)
    except UserError as exc:
        return {}, [(str(exc.location or file), f"not readable as an accelerate config: {exc.message}")]
    if not isinstance(doc.data, dict):
        return {}, [(file, "an accelerate config is a YAML mapping")]
    facts: dict[str, Fact] = {}
    for name, path in _FIELDS.items():
        node = doc.data
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None and not isinstance(node, dict | list):
            facts[name] = Fact(node, str(doc.locate(list(path))))
    kind = facts.get("accelerate_distributed_type")
    if kind is not None and kind.value in _FRAMEWORK:
        facts["accelerate_framework"] = Fact(_FRAMEWORK[kind.value], kind.source)
    return facts, []
