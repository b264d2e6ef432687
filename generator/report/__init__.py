"""`gen-launch report`: one self-contained HTML page per run, with its plan at the top, memory
per GPU for every pipeline stage, the run over time, one step's pipeline timeline and, for a
spec with auto fields, why auto-plan chose its layout. data.py lays out the numbers (pure),
charts.py draws them (matplotlib, the optional extra `report`), page.py writes the page."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from generator.autoplan import run_search
from generator.autoplan.report import candidate_json
from generator.autoplan.space import searched
from generator.errors import UserError
from generator.report.data import layouts_data, report_data
from generator.run import build_spec, resolve_run
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
    """(the run's name, {page path under its folder: the page}) for a spec file: report.html, or
    for a sweep <point>/report.html for each point that resolves (generate's folders); UserError
    (located) for bad input."""
    require_matplotlib()
    # deferred: matplotlib, once require_matplotlib has said how to install it
    from generator.report.page import render_page

    doc = load_document(path, display, overrides)
    if doc.data.get("sweep"):
        pages = {f"{point.label}/{PAGE}": render_page(report_data(point.plans), point.spec.name)
                 for point in sweep_points(doc) if point.error is None}
        return str(doc.data["name"]), pages
    spec = build_spec(doc)
    plans = resolve_run(spec)
    layouts = None
    if spec.auto is not None and searched(doc.data):
        result = run_search(doc, keep=KEEP)[2]
        layouts = layouts_data(result, spec.auto.chosen, candidate_json)
    return spec.name, {PAGE: render_page(report_data(plans, layouts), spec.name)}
