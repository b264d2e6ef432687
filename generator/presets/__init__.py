"""GPU and model presets: data files read once (see gpus.yaml and models.yaml beside this file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from generator.resources import read_yaml

_DIR = Path(__file__).resolve().parent


def gpus() -> dict[str, dict[str, Any]]:
    return read_yaml(_DIR / "gpus.yaml")


def models() -> dict[str, dict[str, Any]]:
    return read_yaml(_DIR / "models.yaml")
