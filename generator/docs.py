"""README sections generated from their single sources (the schema, the rule registry, the
explain output of the seed sample), so the documentation cannot drift.

``python -m generator.docs README.md`` rewrites the marked sections; a test checks them.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from generator.spec.schema import spec_schema


def _type(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:  # e.g. integer | `auto` | list of integer
        return " \\| ".join(f"`{alt['const']}`" if "const" in alt else _type(alt)
                             for alt in schema["anyOf"])
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if "oneOf" in schema:
        kinds = []
        for alt in schema["oneOf"]:
            if alt.get("type") == "object":
                kinds.append("{" + ", ".join(alt["properties"]) + "}")
            elif alt.get("type") == "string" and "pattern" in alt:
                kinds.append("string" if "%" not in alt["pattern"] else "percent")
            else:
                kinds.append(str(alt.get("type")))
        return " \\| ".join(dict.fromkeys(kinds))
    kind = schema.get("type", "")
    if isinstance(kind, list):
        return " \\| ".join(kind)
    if kind == "array":
        return f"list of {schema['items'].get('type', 'value')}"
    return kind


def _default(schema: dict[str, Any]) -> str:
    if "default" not in schema or schema["default"] in ({}, None) and schema.get("type") == "object":
        return ""
    return f"`{json.dumps(schema['default'])}`"


def spec_reference() -> str:
    schema = spec_schema()
    required = set(schema["required"])
    lines = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for key, sub in schema["properties"].items():
        mark = " (required)" if key in required else ""
        if sub.get("type") == "object" and "properties" in sub:
            lines.append(f"| **`{key}`**{mark} | section | | {_md(sub['description'])} |")
            for name, field in sub["properties"].items():
                req = " (required)" if name in sub.get("required", []) else ""
                lines.append(f"| `{key}.{name}`{req} | {_type(field)} | {_default(field)} | "
                             f"{_md(field['description'])} |")
        else:
            lines.append(f"| `{key}`{mark} | {_type(sub)} | {_default(sub)} | {_md(sub['description'])} |")
    return "\n".join(lines)


def rule_table() -> str:
    from generator.rules import RULES

    lines = ["| code | name | check |", "|---|---|---|"]
    lines += [f"| `{r.code}` | `{r.name}` | {r.summary} |" for r in RULES.values()]
    return "\n".join(lines)


def seed_explain() -> str:
    from generator.explain import explain_text
    from generator.plan.plan import resolve
    from generator.spec.model import load_spec

    root = Path(__file__).resolve().parent.parent
    sample = "samples/seed-pretrain-256.yaml"
    text = explain_text(resolve(load_spec(root / sample, sample)))
    return f"```console\n$ gen-launch explain {sample}\n{text}```"


def _md(text: str) -> str:
    return text.replace("<", "&lt;").replace("|", "\\|")


def sc21_table() -> str:
    from generator import presets
    from generator.estimate.calibration import median_abs_error, sc21_rows

    rows = sc21_rows(presets.gpus()["a100-80gb"])
    lines = ["| parameters | GPUs | published TFLOP/s/GPU | predicted | error |", "|---|---|---|---|---|"]
    lines += [f"| {r.params_b:g}B | {r.gpus} | {r.published_tflops:g} | {r.predicted_tflops:.1f} | "
              f"{r.error:+.1%} |" for r in rows]
    lines.append(f"\nMedian absolute error {median_abs_error(rows):.1%} (one efficiency constant, "
                 f"{presets.gpus()['a100-80gb']['efficiency']:.2f} of the A100's 312 TFLOP/s, for "
                 "all rows).")
    return "\n".join(lines)


def published_layouts() -> str:
    from generator.autoplan.published import cases, rank
    from generator.autoplan.report import layout_text

    lines = ["| configuration | published | rank of its tp × pp | the model's schedule for it | "
             "step s | the model's #1 | #1 step s |", "|---|---|---|---|---|---|---|"]
    for r in map(rank, cases()):
        published = ", ".join(f"{k} {v}" for k, v in r.case.layout.items())
        mine = f"vpp {r.published.vpp}, micro {r.published.micro_batch_size}" if r.published else "-"
        time = f"{r.published.step_time:.2f}" if r.published else "-"
        lines.append(f"| {r.case.name} | {published} | {r.rank or 'infeasible'} of {r.layouts} | "
                     f"{mine} | {time} | {layout_text(r.best)} | {r.best.step_time:.2f} |")
    return "\n".join(lines)


SECTIONS = {"spec-reference": spec_reference, "rules": rule_table, "seed-explain": seed_explain,
            "sc21-throughput": sc21_table, "autoplan-published": published_layouts}


def render_sections(text: str) -> str:
    for name, produce in SECTIONS.items():
        pattern = re.compile(rf"(<!-- {name}:start -->\n).*?(<!-- {name}:end -->)", re.S)
        if not pattern.search(text):
            raise ValueError(f"README has no {name} markers")
        text = pattern.sub(lambda m, p=produce: m.group(1) + p() + "\n" + m.group(2), text)
    return text


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "README.md")
    path.write_text(render_sections(path.read_text(encoding="utf-8")), encoding="utf-8")
