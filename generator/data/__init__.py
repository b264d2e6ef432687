"""Reference tables read by the rules (data, not code): removed Megatron flags, DeepSpeed keys."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

_DIR = Path(__file__).resolve().parent


@cache
def load(name: str) -> Any:
    return yaml.safe_load((_DIR / name).read_text(encoding="utf-8"))
