"""Small helpers for building specs in tests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from generator.calculator.resolve import resolve
from generator.plan.plan import Plan
from generator.run import load_spec

BASE: dict[str, Any] = {
    "name": "t",
    "framework": "megatron-lm",
    "cluster": {"nodes": 2, "gpus_per_node": 8, "gpu": "h100-80gb"},
    "model": {"num_layers": 8, "hidden_size": 1024, "num_attention_heads": 16,
              "vocab_size": 32000, "seq_length": 2048},
    "parallelism": {"tp": 2, "pp": 2},
    "batch": {"micro_batch_size": 2, "gradient_accumulation_steps": 4},
    "training": {"train_iters": 1000, "lr": 1.0e-4, "warmup": {"iters": 10}},
}


def spec_dict(**overrides: Any) -> dict[str, Any]:
    """BASE with ``section={...}`` overrides merged in (see overlay)."""
    return overlay(copy.deepcopy(BASE), overrides)


def overlay(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``{section: {...}}`` overrides merged in, key by key (a key given None is
    removed, a section given None too); the overrides are copied, never shared."""
    for section, value in copy.deepcopy(overrides).items():
        if isinstance(value, dict) and isinstance(data.get(section), dict):
            for key, item in value.items():
                if item is None:
                    data[section].pop(key, None)
                else:
                    data[section][key] = item
        elif value is None:
            data.pop(section, None)
        else:
            data[section] = value
    return data


def plan_of(tmp_path: Path, data: dict[str, Any], name: str = "spec.yaml") -> Plan:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return resolve(load_spec(path))
