"""Auto-plan: a spec may leave tp, pp, cp, ep, vpp, zero_stage, distributed_optimizer,
micro_batch_size and recompute to ``auto`` (or a list); the search (search.py) finds every
layout the calculator's rules allow, estimates memory and step time, and the fastest layout that
fits is used. `gen-launch plan` prints the ranking (report.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

from generator.autoplan import cache
from generator.autoplan.space import domains, narrowed, placeholders, searched
from generator.errors import UserError
from generator.spec.load import Document, load_yaml
from generator.spec.model import build_spec
from generator.spec.overlay import merge
from generator.spec.schema import validate
from generator.values import value

if TYPE_CHECKING:  # the search itself is imported when a spec has fields to search
    from generator.autoplan.search import Candidate, Search


@value
class AutoPlan:
    """How a spec's auto fields were chosen (recorded in plan.json and explain)."""

    fields: tuple[str, ...]  # the dotted paths that were searched
    chosen: dict[str, Any]
    evaluated: int
    fitting: int
    runner_up: dict[str, Any] | None
    why: str

    @property
    def summary(self) -> str:
        chosen = ", ".join(f"{path.split('.')[1]} {str(v).lower() if isinstance(v, bool) else v}"
                           for path, v in self.chosen.items())
        fit = f"{self.fitting:,} {'fits' if self.fitting == 1 else 'fit'}"
        return f"chosen by auto-plan from {self.evaluated:,} candidates ({fit}): {chosen}"


def run_search(doc: Document, keep: int = 10,
               margin: float | None = None) -> tuple[Any, dict[str, Any], Search]:
    """(template spec, {searched path: "auto" or list}, the search) for a spec with auto fields;
    ``margin``: the fraction of the GPU's memory a fitting layout leaves free (None: the
    search's MARGIN, which generate's choice keeps)."""
    # deferred: numpy, only for a spec with fields to search
    from generator.autoplan.search import MARGIN, search

    given = searched(doc.data)
    template = build_spec(Document(doc.file, placeholders(doc.data), doc.root, doc.digest))
    result = search(template, domains(given, template), keep, margin=MARGIN if margin is None else margin)
    result.notes = narrowed(given, template)
    return template, given, result


def choose(doc: Document) -> tuple[Document, AutoPlan]:
    """``doc`` with its auto fields set to the best layout; UserError when nothing fits. A
    choice made before for the same spec and code is read from the cache (cache.py)."""
    name = cache.key(doc.data)
    kept = _cached(cache.load(name), doc)
    if kept is not None:
        return kept
    found, record = _search_and_choose(doc)
    cache.store(name, {"values": record.chosen, "record": {
        "fields": list(record.fields), "chosen": record.chosen, "evaluated": record.evaluated,
        "fitting": record.fitting, "runner_up": record.runner_up, "why": record.why}})
    return found, record


def _cached(entry: Any, doc: Document) -> tuple[Document, AutoPlan] | None:
    """A cache entry as the choice it records; None for one that is not whole (then search)."""
    try:
        values, record = entry["values"], entry["record"]
        if not set(values) >= set(searched(doc.data)):
            return None
        plan = AutoPlan(tuple(record["fields"]), dict(record["chosen"]), int(record["evaluated"]),
                        int(record["fitting"]), record["runner_up"], str(record["why"]))
        return _with(doc, dict(values)), plan
    except (KeyError, TypeError, ValueError, AttributeError, UserError):  # (a value the schema refuses)
        return None


def _search_and_choose(doc: Document) -> tuple[Document, AutoPlan]:
    from generator.autoplan.report import nothing_fits, why_best  # deferred: imports the search (numpy)

    template, given, result = run_search(doc, keep=2)
    if not result.ranked:
        raise UserError(nothing_fits(template, given, result), doc.locate([]))
    best = result.ranked[0]
    values = _chosen(best, given, template)
    runner = result.ranked[1] if len(result.ranked) > 1 else None
    record = AutoPlan(tuple(given), values, result.evaluated, result.fitting,
                      _chosen(runner, given, template) if runner else None,
                      why_best(result.ranked, result.fitting))
    return _with(doc, values), record


def _chosen(candidate: Candidate, given: dict[str, Any], template) -> dict[str, Any]:
    """The searched fields' values (sequence parallelism too, when the spec left it open)."""
    values = candidate.values()
    out = {path: values[path] for path in given}
    fixed = template.doc.data.get("parallelism") or {}
    if "sequence_parallel" not in fixed and "parallelism.tp" in given:
        out["parallelism.sequence_parallel"] = candidate.sequence_parallel
    for key in ("first_stage_layers", "last_stage_layers"):  # an uneven split the search chose
        if key not in fixed and getattr(candidate, key) is not None:
            out[f"parallelism.{key}"] = getattr(candidate, key)
    return out


def _with(doc: Document, values: dict[str, Any]) -> Document:
    """The document with the chosen values in place of auto (located at "<file> (auto-plan)"),
    checked again: merging rebuilds it from the file's YAML."""
    tree: dict = {}
    for dotted, given in values.items():
        section, key = dotted.split(".")
        tree.setdefault(section, {})[key] = given
    chosen = merge(doc, load_yaml(yaml.safe_dump(tree, sort_keys=False), f"{doc.file} (auto-plan)"))
    chosen = Document(doc.file, chosen.data, chosen.root, doc.digest)
    validate(chosen)  # (as a sweep point is) and so counts written 4.0 are integers again
    return chosen
