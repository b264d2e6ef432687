"""Documentation generated from its single sources (the schema, the rule registry, the explain
output of the seed sample, the calibration rows, the published layouts, the lint corpus), so the
docs cannot drift: marked sections inside the hand-written pages, and one page per rule in
``docs/rules/``.

``python -m generator.docs`` rewrites them all (and removes the pages of rules that no longer
exist); ``tests/test_docs.py`` fails when any is stale.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from generator import presets
from generator.autoplan.published import cases, rank
from generator.autoplan.report import layout_text
from generator.calculator.resolve import resolve
from generator.estimate.attention import IN_TRAINING
from generator.estimate.calibration import (
    ATTENTION_GRID,
    GENERATION,
    H100,
    attention_errors,
    band,
    fit_fp8_gemm_efficiency,
    fp8_pair,
    generation_efficiency,
    generations,
    leave_one_out,
    long_context_ratio,
    median_abs_error,
    predict,
    readme_brackets,
    uncertainty,
)
from generator.estimate.performance import FP8_GEMM_EFFICIENCY
from generator.executors import executors
from generator.explain import explain_text
from generator.frameworks import FRAMEWORKS, forks
from generator.resume import Check, changes, run_record
from generator.rules import RULES
from generator.rules.codes import CODES
from generator.run import load_spec
from generator.spec.schema import spec_schema

ROOT = Path(__file__).resolve().parent.parent
RULE_PAGES = "docs/rules"


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


def _md(text: str) -> str:
    return text.replace("<", "&lt;").replace("|", "\\|")


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
    lines = ["| code | name | severity | check |", "|---|---|---|---|"]
    lines += [f"| [`{r.code}`](rules/{r.code}.md) | `{r.name}` | {r.severity} | {_md(r.summary)} |"
              for r in RULES.values()]
    return "\n".join(lines)


def _corpus_examples() -> dict[str, list[tuple[str, int, str]]]:
    """{rule code: [(corpus file, line, the expectation's comment)]} from the lint corpus's
    expected findings (tests/lint_corpus/expected.yaml), which the tests hold the linter to."""
    path = ROOT / "tests" / "lint_corpus" / "expected.yaml"
    if not path.exists():  # an installed wheel has no tests; the pages are built from a checkout
        return {}

    examples: dict[str, list[tuple[str, int, str]]] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"(\S+):\s*(\[.*\])\s*(?:#\s*(.*))?$", raw)
        if not match:
            continue
        for code, line in yaml.safe_load(match.group(2)):
            examples.setdefault(code, []).append((match.group(1), line, match.group(3) or ""))
    return examples


def rule_page(code: str, examples: list[tuple[str, int, str]]) -> str:
    r = RULES[code]
    reads = ", ".join(f"`{n}`" for n in r.needs)
    if r.optional:
        reads += " (and, when known, " + ", ".join(f"`{n}`" for n in r.optional) + ")"
    lines = [f"# {r.code} `{r.name}`", "", f"**{r.severity}** · {r.summary.replace('``', '`')}", "",
             r.explanation.replace("``", "`"), "", "## What it reads", "",
             f"{reads}. {_where_it_runs(code, examples)}", ""]
    if examples:
        lines += ["## In the test corpus", "", "Files the linter must report this finding for "
                  "(`tests/lint_corpus/expected.yaml`):", ""]
        for file, line, note in examples:
            note = f": {note}" if note else ""
            lines.append(f"- [`{file}`](../../tests/lint_corpus/{file}) line {line}{note}")
        lines.append("")
    lines += [f"In a launch script, `# gen-launch: noqa {r.code}` on a line suppresses it there. "
              "All checks: [checks](../checks.md).", ""]
    return "\n".join(lines)


def _where_it_runs(code: str, examples: list) -> str:
    """Where a rule runs: every rule lint can check has a file in the lint corpus that triggers it
    (tests/test_rules_contract.py holds the two to each other), so a rule without one is the
    plan's alone; the reading rules (codes.py: rules/reading.py) are lint's alone."""
    if CODES[code] == "reading":
        return "The rule reports on `lint`'s reading of launch files itself."
    if examples:
        return ("The rule runs wherever all the facts it needs are known: on the plan (`generate`, "
                "`explain`, `plan`) and on what `lint` reads from launch files.")
    return ("The rule runs where all the facts it needs are known: on the plan (`generate`, `explain`, "
            "`plan`). `lint` does not report it: launch files do not give its readers these facts together.")


def rule_pages() -> dict[str, str]:
    examples = _corpus_examples()
    return {f"{RULE_PAGES}/{code}.md": rule_page(code, examples.get(code, [])) for code in RULES}


def seed_explain() -> str:
    sample = "samples/seed-pretrain-256.yaml"
    text = explain_text(resolve(load_spec(ROOT / sample, sample)))
    return f"```console\n$ gen-launch explain {sample}\n{text}```"


def resume_example() -> str:
    sample = "samples/llama3-8b-pretrain.yaml"
    sets = ("parallelism.tp=4", "parallelism.cp=1", "cluster.nodes=8", "training.train_tokens=2T")
    given = " ".join(f"--set {s}" for s in sets)
    old, new = run_record(ROOT / sample), run_record(ROOT / sample, sets)
    result = Check(sample, f"{sample} {given}", tuple(changes(old, new)))
    return f"```console\n$ gen-launch resume-check {sample} {sample} {given}\n{result.text()}```"


def calibration_table() -> str:
    lines = ["| run | source | GPUs | published TFLOP/s/GPU | predicted | efficiency used | "
             "throughput error |", "|---|---|---|---|---|---|---|"]
    notes = []
    for gpu in generations():
        rows = leave_one_out(gpu)
        lines += [f"| {r.run.name}{'' if r.run.fitted else ' (checked, not fitted)'} | {r.run.source} | "
                  f"{r.run.gpus} | {r.published_tflops:.0f} | "
                  f"{r.predicted_tflops:.0f} | {r.efficiency:.3f} | {r.error:+.1%} |" for r in rows]
        fitted = [r for r in rows if r.run.fitted]
        checked = [r for r in rows if not r.run.fitted]
        efficiency = presets.gpus()[gpu]["efficiency"]
        if fitted:
            fit = generation_efficiency(gpu)
            same = [name for name, of in GENERATION.items() if of == gpu]
            note = (f"{gpu}{''.join(f', {name}' for name in same)} ({len(fitted)} fitted runs): "
                    f"efficiency {fit:.3f} fitted on all of them (the presets: {efficiency:.2f}); each "
                    f"fitted run predicted with the constant fitted on the others: median error "
                    f"{median_abs_error(fitted):.1%}, largest {band(rows):.0%}")
            if uncertainty(gpu) == band(rows):
                note = f"{note} (the presets' uncertainty band)"
            else:
                note = (f"{note}; all its fitted runs train one model, so the presets report the widest "
                        f"band of the generations fitted on several models, {uncertainty(gpu):.0%}")
            if checked:
                note += (f"; the {len(checked)} runs checked, not fitted: median error "
                         f"{median_abs_error(checked):.1%}, largest {max(abs(r.error) for r in checked):.1%}")
            notes.append(f"{note}.")
        else:
            notes.append(f"{gpu}: no fitted runs; its assumed efficiency {efficiency:.2f} is checked "
                         f"(median error {median_abs_error(rows):.1%}), no band is reported.")
    bf16, fp8 = fp8_pair()
    h100 = generation_efficiency(H100)
    published, predicted = bf16.step_time_s / fp8.step_time_s, predict(bf16, h100) / predict(fp8, h100)
    notes.append(f"FP8: the linear GEMMs reach {fit_fp8_gemm_efficiency():.3f} of the bf16 GEMMs' efficiency "
                 f"on the FP8 peak (the constant: {FP8_GEMM_EFFICIENCY}), fitted on the Llama-3-70B "
                 f"(Fujii et al. 2024) pair's published FP8 speed-up, {published:.2f}× (predicted: "
                 f"{predicted:.2f}×); the FP8 run is therefore not fitted for the efficiency, only checked.")
    errors = {x: (sum(e * e for e in attention_errors(x)), long_context_ratio(x)) for x in ATTENTION_GRID}
    notes.append(f"Attention: flash kernels keep {IN_TRAINING} of their benchmark speed in a step, the grid "
                 f"point with the least squared log error over the {len(attention_errors(IN_TRAINING))} runs "
                 f"with flash attention (each generation's efficiency refitted at each point) plus that of "
                 f"Llama 3 405B's 131k / 8k throughput ratio (published "
                 f"{long_context_ratio(IN_TRAINING)[0]:.3f}); by share, the short runs' squared error "
                 f"and the predicted ratio: "
                 + "; ".join(f"{x:.2f}: {v:.4f} / {r[1]:.3f}" for x, (v, r) in errors.items()) + ".")
    lines += ["", *notes, "", "Hardware TFLOP/s (recompute counted).", "", readme_table()]
    return "\n".join(lines)


def readme_table() -> str:
    lines = ["Megatron-LM's README runs on H100 (checked as brackets: micro batch and interleaving "
             "are not stated; model TFLOP/s per GPU at the preset's efficiency):", "",
             "| run | published | model's slowest (micro, vpp) | model's fastest (micro, vpp) |",
             "|---|---|---|---|"]
    lines += [f"| {b.name} | {b.published_tflops:.0f} | {b.low[0]:.0f} ({b.low[1]}, {b.low[2]}) | "
              f"{b.high[0]:.0f} ({b.high[1]}, {b.high[2]}) |" for b in readme_brackets()]
    return "\n".join(lines)


def published_layouts() -> str:
    lines = ["| configuration | published | rank of its tp × pp | the model's schedule for it | "
             "step s | the model's #1 | #1 step s |", "|---|---|---|---|---|---|---|"]
    for r in map(rank, cases()):
        published = ", ".join(f"{k} {v}" for k, v in r.case.layout.items())
        mine = f"vpp {r.published.vpp}, micro {r.published.micro_batch_size}" if r.published else "-"
        time = f"{r.published.step_time:.2f}" if r.published else "-"
        lines.append(f"| {r.case.name} | {published} | {r.rank or 'infeasible'} of {r.layouts} | "
                     f"{mine} | {time} | {layout_text(r.best)} | {r.best.step_time:.2f} |")
    return "\n".join(lines)


# page -> {section name: what fills it}; a section sits between <!-- NAME:start --> and :end -->
SECTIONS: dict[str, dict[str, Callable[[], str]]] = {
    "docs/spec.md": {"spec-reference": spec_reference},
    "docs/explain.md": {"seed-explain": seed_explain},
    "docs/resume.md": {"resume-example": resume_example},
    "docs/estimates.md": {"calibration": calibration_table},
    "docs/plan.md": {"autoplan-published": published_layouts},
    "docs/checks.md": {"rules": rule_table},
}


def render_sections(page: str, text: str) -> str:
    for name, produce in SECTIONS.get(page, {}).items():
        pattern = re.compile(rf"(<!-- {name}:start -->\n).*?(<!-- {name}:end -->)", re.S)
        if not pattern.search(text):
            raise ValueError(f"{page} has no {name} markers")
        text = pattern.sub(lambda m, p=produce: m.group(1) + p() + "\n" + m.group(2), text)
    return text


SCHEMA = "schemas/spec.schema.json"


def schema_text(root: Path = ROOT) -> str:
    """The spec schema with its framework and megatron.fork values (enum, their descriptions, the
    default fork) written from the records (generator/frameworks.py), and cluster.gpu's from the
    presets (generator/presets/gpus.yaml): a framework, a fork or a GPU is added there, and here it
    reaches the schema."""
    schema = json.loads((root / SCHEMA).read_text(encoding="utf-8"))
    props = schema["properties"]
    gpu = props["cluster"]["properties"]["gpu"]
    gpu["enum"] = list(presets.gpus())
    gpu["oneOf"] = [{"const": name, "description": f"{name} preset (see generator/presets/gpus.yaml)"}
                    for name in presets.gpus()]
    props["framework"]["enum"] = list(FRAMEWORKS)
    props["framework"]["oneOf"] = [{"const": f.name, "description": f.description}
                                   for f in FRAMEWORKS.values()]
    fork = props["megatron"]["properties"]["fork"]
    fork["enum"] = [d.fork for d in forks()]
    fork["oneOf"] = [{"const": d.fork, "description": d.description} for d in forks()]
    fork["default"] = forks()[0].fork
    executor = props["launch"]["properties"]["executor"]
    executor["enum"] = list(executors())
    executor["oneOf"] = [{"const": e.name, "description": e.description} for e in executors().values()]
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def documents(root: Path = ROOT) -> dict[str, str]:
    """Every generated page and every page with generated sections, as it should read (and the
    schema's values that come from the records)."""
    pages = {page: render_sections(page, (root / page).read_text(encoding="utf-8")) for page in SECTIONS}
    return {**pages, **rule_pages(), SCHEMA: schema_text(root)}


def stale(root: Path = ROOT, expected: dict[str, str] | None = None) -> list[str]:
    """The pages that differ from what their sources generate, and rule pages of no rule."""
    expected = documents(root) if expected is None else expected
    out = [page for page, text in expected.items()
           if not (root / page).exists() or (root / page).read_text(encoding="utf-8") != text]
    out += [str(p.relative_to(root)) for p in sorted((root / RULE_PAGES).glob("*.md"))
            if str(p.relative_to(root)) not in expected]
    return out


def write(root: Path = ROOT) -> list[str]:
    expected = documents(root)
    changed = stale(root, expected)
    (root / RULE_PAGES).mkdir(parents=True, exist_ok=True)
    for page in changed:
        if page in expected:
            (root / page).write_text(expected[page], encoding="utf-8")
        else:
            (root / page).unlink()
    return changed


if __name__ == "__main__":
    for page in write(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT):
        print(f"updated {page}")
