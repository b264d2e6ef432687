"""Where the data folders live: inside the wheel (``generator/templates``) or beside the package
in a source checkout or editable install (``templates/``), where hatchling does not map them."""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """The folder ``name`` (``templates`` or ``schemas``); FileNotFoundError if neither exists."""
    for candidate in (_PACKAGE_DIR / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"gen-launch data folder {name!r} not found beside {_PACKAGE_DIR}")


@cache
def read_yaml(path: Path):
    """A data file shipped in the package (presets, rule tables), read once, with libyaml's safe
    loader where PyYAML has it (the same documents, ten times faster than the pure-Python one)."""
    import yaml

    return yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
