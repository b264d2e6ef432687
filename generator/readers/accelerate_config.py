"""An accelerate config file (accelerate launch --config_file) -> facts: its process and machine
counts, the distributed type (DeepSpeed or FSDP) and mixed precision, each with file:line:col.
Read as YAML data only (safe loader, nothing constructed or run)."""

from __future__ import annotations

from generator.dialects.keyed import keyed_dialect
from generator.readers.yaml_config import read_mapping
from generator.rules.registry import Fact


def read_accelerate_config(text: str, file: str) -> tuple[dict[str, Fact], list[tuple[str, str]]]:
    """(facts, problems)."""
    doc, problems = read_mapping(text, file, "accelerate config", "an")
    if doc is None:
        return {}, problems
    facts: dict[str, Fact] = {}
    for name, path, _ in keyed_dialect("accelerate").read_paths():  # accelerate.yaml's keys
        node = doc.data
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None and not isinstance(node, dict | list):
            facts[name] = Fact(node, str(doc.locate(list(path))))
    kind = facts.get("accelerate_distributed_type")
    frameworks = keyed_dialect("accelerate").names("distributed_type")
    if kind is not None and kind.value in frameworks:
        facts["accelerate_framework"] = Fact(frameworks[kind.value], kind.source)
    return facts, []
