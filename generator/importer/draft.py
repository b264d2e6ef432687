"""The spec an import builds: values by dotted path, each value it could not determine marked
with why, written as YAML in the schema's order with the marks as comments."""

from __future__ import annotations

from dataclasses import field
from typing import Any

import yaml

from generator.values import record

MARK = "gen-launch import:"


class RuntimeWord(str):
    """An entry-point word known only at run time, with its shell text (${NAME} references)."""

    shell: str


def spec_word(word: str | None):
    """A word as the spec writes it: a run-time word as {shell: "${NAME}/..."}, others as given."""
    return {"shell": word.shell} if isinstance(word, RuntimeWord) else word


@record
class Draft:
    """The spec values an import could read, and why the others are not known."""

    values: dict[str, Any] = field(default_factory=dict)  # "parallelism.tp" -> 2
    marks: dict[str, str] = field(default_factory=dict)  # path -> why it is not (fully) known
    notes: list[str] = field(default_factory=list)  # what the import noticed (not per field)

    def set(self, path: str, value: Any) -> None:
        self.values[path] = value

    def unknown(self, path: str, why: str, assumed: Any = None) -> None:
        """Not in the files: ``assumed`` is written (None: a null the schema refuses, so the
        spec does not generate until someone fills it in) and the line says why."""
        self.values[path] = assumed
        self.marks[path] = why

    def get(self, path: str, default: Any = None) -> Any:
        return self.values.get(path, default)


def to_yaml(draft: Draft, schema: dict[str, Any], header: list[str]) -> str:
    """The draft as a spec file: sections and keys in the schema's order, marks as comments."""
    lines = [f"# {line}" for line in header]
    for section, sub in schema["properties"].items():
        if sub.get("type") == "object" and "properties" in sub:
            keys = [k for k in sub["properties"] if f"{section}.{k}" in draft.values]
            if not keys:
                continue
            lines.append(f"{section}:")
            for key in keys:
                path = f"{section}.{key}"
                lines += _entry(key, draft.values[path], draft.marks.get(path), "  ")
        elif section in draft.values:
            lines += _entry(section, draft.values[section], draft.marks.get(section), "")
    return "\n".join(lines) + "\n"


def _entry(key: str, value: Any, mark: str | None, indent: str) -> list[str]:
    comment = f"  # {MARK} {mark}" if mark else ""
    if isinstance(value, dict) and value:
        out = [f"{indent}{key}:{comment}"]
        for k, v in value.items():
            out.append(f"{indent}  {_scalar(k)}: {_scalar(v)}")
        return out
    text = _scalar(value)
    if isinstance(value, list) and len(indent) + len(key) + len(text) > 96:
        return [f"{indent}{key}:{comment}"] + [f"{indent}  - {_scalar(v)}" for v in value]
    return [f"{indent}{key}: {text}{comment}"]


def _scalar(value: Any) -> str:
    """A value in YAML flow style that reads back the same (PyYAML quotes '1', 'true', '3e-05',
    and "a,b" inside [...])."""
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 16, allow_unicode=True)
    return text.removesuffix("\n").removesuffix("\n...").strip()
