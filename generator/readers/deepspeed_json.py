"""DeepSpeed JSON -> facts. Duplicate keys are an error, as in DeepSpeed itself."""

from __future__ import annotations

import json
import re
from typing import Any

from generator.rules import Fact

# fact name -> path inside the config
_FIELDS = {
    "global_batch_size": ("train_batch_size",),
    "micro_batch_size": ("train_micro_batch_size_per_gpu",),
    "gradient_accumulation_steps": ("gradient_accumulation_steps",),
    "zero_stage": ("zero_optimization", "stage"),
    "train_iters": ("scheduler", "params", "total_num_steps"),
    "warmup_iters": ("scheduler", "params", "warmup_num_steps"),
    "cp": ("sequence_parallel_size",),
}


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise ValueError(f"Duplicate keys in DeepSpeed config: {duplicates}")
    return dict(pairs)


def read_deepspeed_json(text: str, file: str) -> dict[str, Fact]:
    config = json.loads(text, object_pairs_hook=_no_duplicates)
    facts: dict[str, Fact] = {}
    for name, path in _FIELDS.items():
        value: Any = config
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None:
            facts[name] = Fact(value, f"{file}:{_line_of(text, path[-1])}")
    for precision in ("bf16", "fp16"):
        if isinstance(config.get(precision), dict) and config[precision].get("enabled"):
            facts["precision"] = Fact(precision, f"{file}:{_line_of(text, precision)}")
    return facts


def _line_of(text: str, key: str) -> int:
    match = re.search(rf'"{re.escape(key)}"\s*:', text)
    return text.count("\n", 0, match.start()) + 1 if match else 1
