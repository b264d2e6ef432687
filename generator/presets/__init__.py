"""GPU and model presets: data files read once (see gpus.yaml and models.yaml beside this file)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

_DIR = Path(__file__).resolve().parent


@cache
def _load(name: str) -> dict[str, dict[str, Any]]:
    return yaml.safe_load((_DIR / name).read_text(encoding="utf-8"))


def gpus() -> dict[str, dict[str, Any]]:
    return _load("gpus.yaml")


def models() -> dict[str, dict[str, Any]]:
    return _load("models.yaml")
