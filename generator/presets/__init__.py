"""GPU and model presets: data files read once (see gpus.yaml and models.yaml beside this file)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from generator.resources import read_yaml

_DIR = Path(__file__).resolve().parent


def gpus() -> dict[str, dict[str, Any]]:
    return read_yaml(_DIR / "gpus.yaml")


def models() -> dict[str, dict[str, Any]]:
    """The model presets by name (entries named ``_…`` are the families' shared fields)."""
    return _models()


@cache
def _models() -> dict[str, dict[str, Any]]:
    return {name: value for name, value in read_yaml(_DIR / "models.yaml").items()
            if not name.startswith("_")}
