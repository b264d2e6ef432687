"""The report page: the chart data (data.py) and its charts (charts.py) through
templates/report.html.j2 into one self-contained HTML file: styles inline, the charts inline SVG,
no script, no font file, no link that leaves the file."""

from __future__ import annotations

from typing import Any

import jinja2
from markupsafe import Markup

from generator.report import charts
from generator.report.data import STEP_PARTS
from generator.resources import data_dir

TEMPLATE = "report.html.j2"


def number(value: Any) -> str:
    """A number as the page prints it: integers with thousands separators, floats as Python
    writes them (the shortest text that reads back as the same float: plan.json's value)."""
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "–"}[value]
    return f"{value:,}" if isinstance(value, int) else str(value + 0.0)  # (+ 0.0: no "-0.0")


def percent(value: float | None) -> str:
    """A fraction of plan.json as a percentage (0.4302 → 43.02 %)."""
    return "–" if value is None else f"{round(value * 100, 10):g} %"


def render_page(data: dict[str, Any], title: str) -> str:
    """The page of a run's chart data; ``title``: the run's name."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
                             autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters.update(number=number, percent=percent)
    staged = len(data["memory"]) > 1
    svg = {"memory": [Markup(charts.memory_chart(m, f"memory-{k}"))
                      for k, m in enumerate(data["memory"])],
           "run": Markup(charts.run_chart(data["run"], "run")),
           "step": [None if s is None else Markup(charts.step_chart(s, f"step-{k}"))
                    for k, s in enumerate(data["step"])],
           "layouts": None if not data["layouts"] else
           Markup(charts.layouts_chart(data["layouts"], "layouts"))}
    prefixes = [f"stages.{k}." if staged else "" for k in range(len(data["memory"]))]
    return env.get_template(TEMPLATE).render(data=data, svg=svg, title=title, prefixes=prefixes,
                                             parts=STEP_PARTS, staged=staged)
