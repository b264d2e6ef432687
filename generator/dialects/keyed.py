"""Config-file dialects (DeepSpeed's ds_config.json, accelerate's config): keys by path, each
with the plan value it carries, walked forward into the file a plan renders and backward by
the readers and `import`. The tables: deepspeed.yaml, accelerate.yaml (their headers)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from generator.resources import read_yaml
from generator.values import value

_DIR = Path(__file__).resolve().parent

_UNSET = object()


@value
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
    generic: bool = False

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.key.split("."))

    def written(self, values: dict[str, Any]) -> tuple[bool, Any]:
        """(whether the key is written for these plan values, the JSON value). A value the plan
        does not provide is a mistake in the table, never a key left out."""
        for name in (self.value, *(self.only or ())):
            if name is not None and name not in values:
                raise KeyError(f"{self.key}: the plan provides no value {name!r}")
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



def build(keys: tuple[Key, ...], values: dict[str, Any]) -> dict[str, Any]:
    """The file's content for these plan values, keys in the table's order."""
    out: dict[str, Any] = {}
    for key in keys:
        wanted, value = key.written(values)
        if not wanted:
            continue
        node = out
        for part in key.path[:-1]:
            node = node.setdefault(part, {})
        node[key.path[-1]] = value
    return out


@value
class KeyedDialect:
    """A config-file dialect (DeepSpeed JSON, accelerate YAML): its keys and how each is built."""

    table: dict[str, Any]  # the whole table (keys, and the lists a reader checks against)
    keys: tuple[Key, ...]

    def build(self, values: dict[str, Any]) -> dict[str, Any]:
        return build(self.keys, values)

    def read_paths(self) -> list[tuple[str, tuple[str, ...], bool]]:
        """[(fact, path, switch)] for every key that yields a fact, older spellings after the
        written one (a switch fact is true when its key is true)."""
        return [(key.fact, key.path, key.const is True) for key in self.keys if key.fact]

    def generic_facts(self) -> dict[str, str]:
        """{the fact a key gives: the generic fact it stands in for} (the keys marked generic)."""
        return {key.fact: key.value for key in self.keys if key.generic and key.fact and key.value}

    def names(self, key: str) -> dict[Any, str]:
        """{value written under ``key``: the plan value it stands for} (a map read backward)."""
        entry = next(k for k in self.keys if k.key == key)
        return {written: value for value, written in (entry.map or {}).items()}


@cache
def keyed_dialect(name: str) -> KeyedDialect:
    """The table NAME.yaml beside this file."""
    table = read_yaml(_DIR / f"{name}.yaml")[name]
    return KeyedDialect(table, tuple(Key(**entry) for entry in table["keys"]))
