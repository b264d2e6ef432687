"""The report's charts, drawn by matplotlib from the chart data (data.py) as SVG text to inline in
the page: text stays text (the browser's own sans-serif, no font file), ids are salted per chart
(several SVGs share one page), nothing refers outside the SVG."""

from __future__ import annotations

import io
import re
from typing import Any

import matplotlib

matplotlib.use("svg")  # no display, no GUI toolkit

import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
import numpy  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from generator.report import pipeline  # noqa: E402
from generator.report.data import MEMORY_PARTS, STEP_PARTS  # noqa: E402

WIDTH = 9.0  # inches (the page's column at 100 dpi)
MEMORY_COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1")
STEP_COLOURS = ("#4e79a7", "#a0cbe8", "#f1a9a0", "#b07aa1", "#d4a6c8", "#9c755f", "#ff9da7", "#bab0ac",
                "#edc948", "#59a14f")  # data.STEP_PARTS
# the timeline's cells: idle (bubble), forward and backward of even and odd micro-batches, then
# each exposed communication and the optimizer step after the pipeline (in the breakdown's colours)
TIMELINE = ("#f1a9a0", "#4e79a7", "#7fa7cf", "#f28e2b", "#f7b877", *STEP_COLOURS[3:])
BINS = 1200
LABELLED_OPS = 40  # operations of a stage labelled with their micro-batch, at most


def _svg(fig: Figure, salt: str) -> str:
    """The figure as an <svg> element (no XML prolog), its ids unique to ``salt``."""
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        out = io.StringIO()
        fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = out.getvalue()
    # the prolog, and the RDF metadata (its namespaces are addresses, and it says nothing)
    return re.sub(r"\s*<metadata>.*?</metadata>", "", text[text.index("<svg"):], flags=re.S)


def memory_chart(memory: dict[str, Any], salt: str) -> str:
    """Stacked bars: each pipeline stage's memory per GPU by component, against the capacity."""
    stages = memory["stages"]
    parts = [*MEMORY_PARTS, ("buffers", "buffers_gib"), ("fragmentation margin", "fragmentation_gib")]
    fig, ax = plt.subplots(figsize=(WIDTH, 1.2 + 0.28 * len(stages)))
    left = numpy.zeros(len(stages))
    rows = numpy.arange(len(stages))
    for (label, key), colour in zip(parts, MEMORY_COLOURS, strict=True):
        values = numpy.array([s[key] for s in stages])
        ax.barh(rows, values, left=left, color=colour, label=label, height=0.7)
        left += values
    for cap, style, label in ((memory["gpu_memory_gib"], "-", "GPU memory"),
                              (memory["capacity_gib"], "--", "usable (less headroom)")):
        if cap is not None:
            ax.axvline(cap, color="black", linestyle=style, linewidth=1.2, label=f"{label} {cap:g} GiB")
    ax.set_yticks(rows, [f"stage {s['stage']}" for s in stages])
    ax.invert_yaxis()
    ax.set_xlabel("GiB per GPU")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35 if len(stages) < 4 else -0.12), ncol=4,
              fontsize=8, frameon=False)
    return _svg(fig, salt)


def run_chart(run: dict[str, Any], salt: str) -> str:
    """Learning rate, global batch and tokens seen over the steps, with the warmup's end, the
    stages, and the allocations and checkpoints as ticks."""
    points = run["points"]
    steps = [p["step"] for p in points]
    fig, (lr, batch, tokens) = plt.subplots(3, 1, figsize=(WIDTH, 6.4), sharex=True)
    lr.plot(steps, [p["lr"] for p in points], color="#4e79a7")
    lr.set_ylabel("learning rate")
    changes = run["batch_changes"]
    batch.step([s for s, _ in changes] + [run["total_steps"]], [b for _, b in changes] + [changes[-1][1]],
               where="post", color="#f28e2b")
    batch.set_ylabel("global batch")
    batch.set_ylim(0, max(b for _, b in changes) * 1.15)
    tokens.plot(steps, [p["tokens"] for p in points], color="#59a14f")
    tokens.set_ylabel("tokens seen")
    tokens.set_xlabel("optimizer step")
    for ax in (lr, batch, tokens):
        _marks(ax, run)
    _ticks(tokens, run)
    return _svg(fig, salt)


def _marks(ax: Axes, run: dict[str, Any]) -> None:
    if run["warmup_end_step"]:
        ax.axvline(run["warmup_end_step"], color="#e15759", linestyle=":", linewidth=1)
    if run["stable_end_step"] is not None:
        ax.axvline(run["stable_end_step"], color="#e15759", linestyle="-.", linewidth=1)
    for stage in run["stages"][1:]:
        ax.axvline(stage["step"], color="black", linestyle="--", linewidth=1)
    ax.grid(alpha=0.3)


def _ticks(ax: Axes, run: dict[str, Any]) -> None:
    """Allocation ends (top) and checkpoints (bottom) as short ticks in axes coordinates."""
    ends = [s for a in run["allocations"] if a for s in a["boundaries"]]
    if ends:
        ax.vlines(ends, 0.88, 1.0, transform=ax.get_xaxis_transform(), color="#b07aa1", linewidth=1)
    interval = run["checkpoint_interval"]
    if run["checkpoint_ticks"]:
        saves = [interval * k for k in range(1, run["checkpoints"] + 1)]
        ax.vlines(saves, 0.0, 0.06, transform=ax.get_xaxis_transform(), color="#9c755f", linewidth=0.6)


def step_chart(step: dict[str, Any], salt: str) -> str:
    """The pipeline's timeline per stage (forward and backward of each micro-batch, the bubble,
    then the exposed communication and the optimizer step), and the step's breakdown."""
    t = step["timeline"]
    rows = min(max(1.5, 0.16 * t["pp"] + 0.6), 5.0)
    fig, (timeline, parts) = plt.subplots(2, 1, figsize=(WIDTH, rows + 2.0), height_ratios=(rows, 0.9),
                                          sharex=True)
    ops = pipeline.schedule(t["pp"], t["vpp"], t["micro_batches"], t["busy_s"])
    grid = _timeline_grid(ops, t, step["step_time_s"])
    timeline.imshow(grid, aspect="auto", interpolation="nearest", cmap=ListedColormap(TIMELINE),
                    vmin=0, vmax=len(TIMELINE) - 1, extent=(0, step["step_time_s"], t["pp"] - 0.5, -0.5))
    if len(ops) <= LABELLED_OPS * t["pp"]:
        for op in ops:
            timeline.text((op.start + op.end) / 2, op.stage, str(op.micro + 1), ha="center", va="center",
                          fontsize=7, color="white")
    timeline.set_yticks(range(t["pp"]), [f"stage {s}" for s in range(t["pp"])] if t["pp"] <= 16 else
                        [str(s) if s % max(1, t["pp"] // 16) == 0 else "" for s in range(t["pp"])])
    _breakdown(parts, step)
    return _svg(fig, salt)


def _timeline_grid(ops: list[pipeline.Op], t: dict[str, Any], step_time: float) -> numpy.ndarray:
    """Stage × time cells: 0 idle, 1-2 forward (even, odd micro-batch), 3-4 backward, then from
    5 each exposed communication and the optimizer step, one after the other."""
    grid = numpy.zeros((t["pp"], BINS), dtype=numpy.int8)
    scale = BINS / step_time

    def cells(start: float, end: float) -> slice:
        return slice(int(start * scale), max(int(start * scale) + 1, int(end * scale)))

    for op in ops:
        grid[op.stage, cells(op.start, op.end)] = (1 if op.forward else 3) + op.micro % 2
    start = t["pipeline_s"]
    after = [(code, seconds) for code, seconds in enumerate([*t["exposed_s"].values(), t["optimizer_s"]], 5)
             if seconds]
    for k, (code, seconds) in enumerate(after):  # (the last to the step's end: plan.json rounds each)
        end = step_time if k == len(after) - 1 else min(start + seconds, step_time)
        grid[:, cells(start, end)] = code
        start = end
    return grid


def _breakdown(ax: Axes, step: dict[str, Any]) -> None:
    left = 0.0
    for (label, key), colour in zip(STEP_PARTS, STEP_COLOURS, strict=True):
        value = step["breakdown_s"][key]
        if value:
            ax.barh(0, value, left=left, color=colour, label=f"{label} {value:g} s")
            left += value
    ax.set_yticks([])
    ax.set_xlim(0, step["step_time_s"])
    ax.set_xlabel("seconds into the step")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.6), ncol=3, fontsize=8, frameon=False)


def layouts_chart(layouts: dict[str, Any], salt: str) -> str:
    """Auto-plan's ranked layouts: step time against memory, the chosen one marked."""
    ranked = layouts["ranked"]
    fig, ax = plt.subplots(figsize=(WIDTH, 4.2))
    others = [r for r in ranked if not r["chosen"]]
    ax.scatter([r["memory_gib"] for r in others], [r["step_time_s"] for r in others], color="#4e79a7",
               label="fitting layouts, ranked")
    for r in ranked:
        ax.annotate(f"#{r['rank']}", (r["memory_gib"], r["step_time_s"]), textcoords="offset points",
                    xytext=(4, 3), fontsize=7)
    chosen = [r for r in ranked if r["chosen"]]
    ax.scatter([r["memory_gib"] for r in chosen], [r["step_time_s"] for r in chosen], marker="*", s=220,
               color="#e15759", label="chosen (generate uses it)", zorder=3)
    if layouts["limit_gib"] is not None:
        ax.axvline(layouts["limit_gib"], color="black", linestyle="--", linewidth=1,
                   label=f"fits within {layouts['limit_gib']:g} GiB")
    ax.set_xlabel("memory per GPU, GiB (most loaded stage)")
    ax.set_ylabel("step time, s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _svg(fig, salt)
