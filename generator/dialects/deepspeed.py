"""DeepSpeed's dialect (deepspeed.yaml): the ds_config.json keys, walked forward into the
config a plan renders and backward by the JSON reader and `import`."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from generator.resources import read_yaml

_DIR = Path(__file__).resolve().parent
_UNSET = object()


@dataclass(frozen=True)
class Key:
    """One key of ds_config.json (see the header of deepspeed.yaml)."""

    key: str
    value: str | None = None
    when: Any = None
    const: Any = _UNSET
    map: dict[str, Any] | None = None
    only: dict[str, list] | None = None
    fact: str | None = None
    spec: str | None = None
    write: bool = True

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.key.split("."))

    def written(self, values: dict[str, Any]) -> tuple[bool, Any]:
        """(whether the key is written for these plan values, the JSON value)."""
        if not self.write or (self.only and any(values.get(k) not in v for k, v in self.only.items())):
            return False, None
        if self.value is None:
            return self.const is not _UNSET, self.const
        value = values.get(self.value)
        if self.when is not None:
            return value == self.when, self.const
        if self.map is not None:
            return (value in self.map, self.map.get(value)) if isinstance(value, str) else (False, None)
        if self.const is not _UNSET:
            return value not in (None, False), self.const
        return value is not None, value


@cache
def table() -> dict[str, Any]:
    return read_yaml(_DIR / "deepspeed.yaml")["deepspeed"]


@cache
def keys() -> tuple[Key, ...]:
    return tuple(Key(**entry) for entry in table()["keys"])


def read_paths() -> list[tuple[str, tuple[str, ...], bool]]:
    """[(fact, JSON path, switch)] for every key that yields a fact, older spellings after the
    written one (a switch fact is true when its key is true)."""
    return [(key.fact, key.path, key.const is True) for key in keys() if key.fact]


def scheduler_names() -> dict[str, str]:
    """{DeepSpeed scheduler type: the spec's decay}."""
    entry = next(k for k in keys() if k.key == "scheduler.type")
    return {json_name: decay for decay, json_name in (entry.map or {}).items()}


def deepspeed_values(plan) -> dict[str, Any]:
    """The values ds_config.json carries, under the names deepspeed.yaml uses; None where the
    run does not use them (plain DeepSpeed owns the optimizer and scheduler; Megatron-DeepSpeed
    passes its own)."""
    t, p = plan.spec.training, plan.spec.parallelism
    plain = plan.framework == "deepspeed"
    return {
        "global_batch_size": plan.global_batch_size, "micro_batch_size": plan.micro_batch_size,
        "gradient_accumulation_steps": plan.gradient_accumulation_steps,
        "log_interval": t.log_interval, "clip_grad": t.gradient_clipping,
        "offload_optimizer": p.zero_offload != "none",
        "offload_param": p.zero_offload == "optimizer_and_params",
        # ZeRO-3 under the Trainer: save_model writes whole 16-bit weights, not empty shards
        "gather_16bit_weights": plan.uses_trainer and plan.zero_stage == 3,
        "zero_stage": plan.zero_stage, "precision": t.precision,
        "pipeline_stages": plan.pp if plain and plan.pp > 1 else None,
        "sequence_parallel_size": plan.cp if plain and plan.cp > 1 else None,
        "optimizer": plain, "optimizer_lr": plan.lr if plain else None,
        "adam_betas": list(t.adam_betas) if plain else None,
        "adam_eps": t.adam_eps if plain else None, "weight_decay": t.weight_decay if plain else None,
        "torch_adam": plain and plan.gpu.get("vendor") == "cpu",
        "scheduler": t.decay if plain else None,
        "total_num_steps": plan.schedule.train_iters if plain else None,
        "warmup_num_steps": plan.schedule.warmup_iters if plain else None,
        "cos_min_ratio": plan.min_lr_ratio if plain else None,
        "warmup_max_lr": plan.lr if plain else None,
    }


def config(plan) -> dict[str, Any]:
    """The DeepSpeed config of a plan, keys in the table's order."""
    values = deepspeed_values(plan)
    out: dict[str, Any] = {}
    for key in keys():
        wanted, value = key.written(values)
        if not wanted:
            continue
        node = out
        for part in key.path[:-1]:
            node = node.setdefault(part, {})
        node[key.path[-1]] = value
    return out
