"""`gen-launch report`: one self-contained HTML page per run, with its plan at the top, memory
per GPU for every pipeline stage, the run over time, one step's pipeline timeline and, for a
spec with auto fields, why auto-plan chose its layout. data.py lays out the numbers (pure),
charts.py draws them (matplotlib, the optional extra `report`), page.py writes the page."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from generator.autoplan import run_search
from generator.autoplan.report import candidate_json
from generator.autoplan.space import searched
from generator.errors import UserError
from generator.report.data import layouts_data, report_data
from generator.run import build_spec, resolve_run
from generator.spec.load import Document
from generator.spec.model import load_document
from generator.sweep import sweep_points

EXTRA = "pip install 'gen-launch[report]'"
KEEP = 20  # ranked layouts drawn for an auto spec
PAGE = "report.html"


def require_matplotlib() -> None:
    """UserError naming the extra when matplotlib is not installed."""
    if importlib.util.find_spec("matplotlib") is None:
        raise UserError(f"gen-launch report draws its charts with matplotlib, which is not installed; "
                        f"install the report extra: {EXTRA}")


def report_pages(path: Path, display: str, overrides: tuple[str, ...] = ()) -> tuple[str, dict[str, str]]:
    """(the run's name, {page path under its folder: the page}) for a spec file; UserError
    (located) for bad input."""
    require_matplotlib()
    # deferred: matplotlib, once require_matplotlib has said how to install it
    from generator.report.page import render_page

    name, pages = chart_data(load_document(path, display, overrides))
    return name, {relative: render_page(data, title) for relative, (title, data) in pages.items()}


def chart_data(doc: Document) -> tuple[str, dict[str, tuple[str, dict[str, Any]]]]:
    """(the run's name, {page path: (its title, its chart data)}): report.html, or for a sweep
    <point>/report.html for each point that resolves (generate's folders)."""
    if doc.data.get("sweep"):
        return str(doc.data["name"]), {f"{point.label}/{PAGE}": (point.spec.name, report_data(point.plans))
                                       for point in sweep_points(doc) if point.error is None}
    spec = build_spec(doc)
    plans = resolve_run(spec)
    layouts = None
    if spec.auto is not None and searched(doc.data):
        result = run_search(doc, keep=KEEP)[2]
        layouts = layouts_data(result, spec.auto.chosen, candidate_json)
    return spec.name, {PAGE: (spec.name, report_data(plans, layouts))}
