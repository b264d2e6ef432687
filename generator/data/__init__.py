"""Reference tables read by the rules (data, not code): removed Megatron flags, DeepSpeed keys,
Slurm variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from generator.resources import read_yaml

_DIR = Path(__file__).resolve().parent


def load(name: str) -> Any:
    return read_yaml(_DIR / name)
