"""Sweeps: one spec, many runs. Each point of a grid (or each listed override set) becomes its
own spec (named <name>-<label>), plan and folder; an index lists the derived values of all."""

from __future__ import annotations

import itertools
import json
import math

from generator.calculator.resolve import PlanError
from generator.errors import UserError
from generator.run import build_spec, resolve_run
from generator.spec.load import Document
from generator.spec.model import Spec
from generator.spec.overlay import with_values
from generator.spec.schema import validate
from generator.values import record


@record
class Point:
    """One point of a sweep: its values and the spec and plans it resolves to (or why not)."""

    label: str
    values: dict[str, object]
    spec: Spec | None = None
    plans: list | None = None
    error: str | None = None


MAX_POINTS = 10_000  # a sweep's points: each is resolved and rendered, and has its own folder


def _label(values: dict[str, object]) -> str:
    text = "-".join(f"{path.rsplit('.', 1)[-1]}{value}" for path, value in values.items())
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)


def unique_labels(combos: list[dict[str, object]]) -> list[str]:
    """Each point's label; a label already taken gets the point's number (-<n>), in one pass."""
    taken: set[str] = set()
    labels = []
    for number, values in enumerate(combos, start=1):
        label = _label(values)
        label = label if label not in taken else f"{label}-{number}"
        taken.add(label)
        labels.append(label)
    return labels


def _bounded(doc: Document, sweep: dict) -> None:
    """Refuse a sweep of more than MAX_POINTS points before making them, naming the count and
    what multiplies to it."""
    if "grid" in sweep:
        sizes = {path: len(values) for path, values in sweep["grid"].items()}
        count = math.prod(sizes.values())
        what = " × ".join(f"{path} ({n})" for path, n in sizes.items())
        where = doc.locate(["sweep", "grid"])
    else:
        count, what, where = len(sweep["points"]), "the points listed", doc.locate(["sweep", "points"])
    if count > MAX_POINTS:
        raise UserError(f"the sweep has {count:,} points ({what}), more than the {MAX_POINTS:,} "
                        "gen-launch makes; sweep fewer values or split it into several specs", where)


def sweep_points(doc: Document) -> list[Point]:
    """The points of a document's sweep (empty when it has none), resolved where valid."""
    sweep = doc.data.get("sweep") if isinstance(doc.data, dict) else None
    if not sweep:
        return []
    _bounded(doc, sweep)
    if "grid" in sweep:
        keys = list(sweep["grid"])
        combos = [dict(zip(keys, values, strict=True))
                  for values in itertools.product(*(sweep["grid"][k] for k in keys))]
    else:
        combos = [dict(point) for point in sweep["points"]]
    points: list[Point] = []
    for label, values in zip(unique_labels(combos), combos, strict=True):
        point = Point(label, values)
        try:
            point_doc = with_values(doc, {**values, "name": f"{doc.data['name']}-{point.label}"},
                                    f"sweep point {point.label}")
            validate(point_doc)
            point.spec = build_spec(point_doc)
            point.plans = resolve_run(point.spec)
        except (UserError, PlanError) as exc:
            point.error = str(exc).replace("\n", "; ")
        points.append(point)
    if all(p.error for p in points):
        raise UserError(f"no point of the sweep is valid; the first: {points[0].error}",
                        doc.locate(["sweep"]))
    return points


def index(points: list[Point]) -> tuple[str, str]:
    """(index.md, index.json): the derived values of every point."""
    rows = []
    for p in points:
        row: dict[str, object] = {"point": p.label, **{k: v for k, v in p.values.items()}}
        if p.error:
            row["error"] = p.error
        else:
            plan = p.plans[-1]
            estimate = plan.estimate()
            perf = estimate.performance
            row.update(world=plan.world_size, tp=plan.tp, pp=plan.pp, cp=plan.cp, dp=plan.dp,
                       micro=plan.micro_batch_size, accumulation=plan.gradient_accumulation_steps,
                       global_batch=plan.global_batch_size, tokens_per_step=plan.tokens_per_step,
                       memory_gib=round(estimate.memory.total / (1 << 30), 1), fits=estimate.memory.fits,
                       step_time_s=None if perf is None else round(perf.step_time_s, 2),
                       mfu=None if perf is None else round(perf.mfu, 3))
        rows.append(row)
    columns = ["point", "world", "tp", "pp", "cp", "dp", "micro", "accumulation", "global_batch",
               "tokens_per_step", "memory_gib", "fits", "step_time_s", "mfu"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        if "error" in row:
            error = str(row["error"]).replace("|", "/")
            lines.append(f"| {row['point']} | invalid: {error} |" + " |" * (len(columns) - 2))
        else:
            lines.append("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")
    return "\n".join(lines) + "\n", json.dumps(rows, indent=2, ensure_ascii=False) + "\n"


