"""DeepSpeed JSON -> facts (ds_* names), read as DeepSpeed reads a config file: comments and
trailing commas allowed, duplicate keys an error. Every fact carries file:line:col."""

from __future__ import annotations

import bisect
from dataclasses import field

from generator.dialects.keyed import keyed_dialect
from generator.readers.jsonc import JsonError, Node, parse
from generator.rules.registry import Fact
from generator.values import record


@record
class DeepSpeedRead:
    """What reading a DeepSpeed config found: its facts and problems."""

    facts: dict[str, Fact] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)
    looks_like_deepspeed: bool = False
    parsed: bool = False  # the text is valid JSON (of any shape)


class _Positions:
    def __init__(self, text: str, file: str, first_line: int) -> None:
        self.starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
        self.file, self.first_line = file, first_line

    def __call__(self, offset: int) -> str:
        line = bisect.bisect_right(self.starts, offset)
        return f"{self.file}:{line + self.first_line - 1}:{offset - self.starts[line - 1] + 1}"


def read_deepspeed_json(text: str, file: str, first_line: int = 1) -> DeepSpeedRead:
    """Facts of a DeepSpeed config; ``first_line`` places a heredoc body inside its script."""
    out = DeepSpeedRead()
    where = _Positions(text, file, first_line)
    try:
        root = parse(text)
    except JsonError as exc:
        out.problems.append((where(exc.offset), f"not readable as a DeepSpeed config: {exc}"))
        return out
    out.parsed = True
    if not isinstance(root.value, dict):
        out.problems.append((where(root.offset), "a DeepSpeed config is a JSON object"))
        return out
    made_by = root.get("generator")  # gen-launch's own plan.json is not a launch file
    hints = keyed_dialect("deepspeed").table["detection_keys"]  # deepspeed.yaml
    out.looks_like_deepspeed = bool(set(hints) & set(root.value)) and not (
        made_by is not None and isinstance(made_by.value, str) and made_by.value.startswith("gen-launch"))
    facts = out.facts
    for name, path, switch in keyed_dialect("deepspeed").read_paths():  # deepspeed.yaml's keys
        node = root.get(*path)
        if node is None or name in facts:
            continue
        if switch:
            if node.value is True:
                facts[name] = Fact(True, where(node.offset))
        elif isinstance(node.value, int | float | str) and not isinstance(node.value, bool) and \
                node.value != "auto":  # "auto": not known from the file (GL101 judges it)
            facts[name] = Fact(node.value, where(node.offset))
    for section in ("scheduler", "optimizer"):
        node = root.get(section)
        if node is None or not isinstance(node.value, dict):
            continue
        params = node.get("params")
        plain = params.plain() if params is not None and isinstance(params.value, dict) else {}
        kind = node.get("type")
        facts[f"ds_{section}"] = Fact((kind.value if kind else None, plain), where(node.offset))
    facts.update(_key_facts(root, where))
    return out


def _key_facts(root: Node, where) -> dict[str, Fact]:
    known = keyed_dialect("deepspeed").table
    autos, removed, unknown = [], [], []

    def walk(node: Node, path: str) -> None:
        if isinstance(node.value, dict):
            for key, child in node.value.items():
                walk(child, f"{path}.{key}" if path else key)
        elif node.value == "auto":
            autos.append((path, where(node.offset)))

    walk(root, "")
    for key, child in root.value.items():
        if key in known["removed_top_level"]:
            removed.append((key, where(child.key_offset or child.offset)))
    zero = root.get("zero_optimization")
    if zero is not None and isinstance(zero.value, dict):
        for key, child in zero.value.items():
            if key in known["removed_in_zero"]:
                removed.append((f"zero_optimization.{key}", where(child.key_offset or child.offset)))
    for section, allowed in known["strict_sections"].items():
        node = root.get(*section.split("."))
        if node is None or not isinstance(node.value, dict):
            continue
        for key, child in node.value.items():
            if key not in allowed and not (section == "zero_optimization"
                                           and key in known["removed_in_zero"]):
                unknown.append((f"{section}.{key}", where(child.key_offset or child.offset)))
    facts = {}
    for name, items in (("ds_auto", autos), ("ds_removed_keys", removed), ("ds_unknown_keys", unknown)):
        if items:
            facts[name] = Fact(tuple(items), items[0][1])
    return facts
