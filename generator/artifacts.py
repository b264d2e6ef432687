"""Every file a spec produces, as {path relative to its output folder: text}: the plan's files,
one folder per stage (stage-<n>-<stage>/), or one folder per sweep point plus index.md/.json.
Every artifact is read back by the linter before it is returned (render_all).
`generate` writes or --checks them; the golden tests compare them."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from generator.errors import UserError
from generator.executors import executor_of
from generator.lint.readback import check_rendered
from generator.plan.stages import stage_folder
from generator.readers.kubernetes import read_executor_file
from generator.render import ARTIFACTS, NOT_LINTED, render_files, targets_for
from generator.run import resolve_run
from generator.sweep import index as sweep_index
from generator.sweep import sweep_points


def spec_files(spec, wanted: str | None = None) -> tuple[dict[str, str], list[str], int]:
    """(files, report lines for the terminal, number of warnings or invalid sweep points)."""
    if spec.doc.data.get("sweep"):
        return _sweep_files(spec, wanted)
    plans = resolve_run(spec)
    return plan_files(plans, wanted), _reports(plans), sum(len(p.warnings) for p in plans)


def _reports(plans: list) -> list[str]:
    auto = [f"note: {p.spec.auto.summary}" for p in plans if p.spec.auto is not None]
    return [f"warning: {w}" for p in plans for w in p.warnings] + auto + \
        [f"note: {n}" for p in plans for n in p.notes]


def plan_files(plans: list, wanted: str | None = None) -> dict[str, str]:
    """{path: text} of a spec's plans: plain names, or stage-<n>-<stage>/<name>."""
    launch = plans[0].spec.launch
    used = targets_for(plans[0].framework, launch.launcher, launch.executor)
    if wanted is not None and wanted not in (ARTIFACTS[t][0] for t in used):
        raise UserError(f"--target: framework {plans[0].framework} does not use {wanted} (launch.executor "
                        f"{launch.executor}); choose one of {', '.join(used)} or all")
    staged = plans[0].spec.stage is not None
    files: dict[str, str] = {}
    for index, plan in enumerate(plans, start=1):
        prefix = f"{stage_folder(index, plan)}/" if staged else ""
        files.update({prefix + name: text for name, text in render_all(plan).items()
                      if wanted is None or name == wanted})
    return files


def render_all(plan) -> dict[str, str]:
    """File name -> text for every artifact the framework uses, plus preflight.py and plan.json;
    the artifacts read back by the linter and checked against the plan (lint/readback.py)."""
    files = render_files(plan)
    checked = {name: text for name, text in files.items() if name not in NOT_LINTED}
    record = executor_of(plan.spec.launch.executor)
    read = read_executor_file(files[record.file], record.file)  # the pods' script (None: Slurm's)
    check_rendered(plan, checked, record.file if read is None else read.script)
    return files


def _sweep_files(spec, wanted: str | None) -> tuple[dict[str, str], list[str], int]:
    points = sweep_points(spec.doc)
    files: dict[str, str] = {}
    reports: list[str] = []
    problems = 0
    for point in points:
        if point.error:
            problems += 1
            reports.append(f"sweep point {point.label} skipped: {point.error}")
            continue
        reports += [f"{point.label}: {line}" for line in _reports(point.plans)]
        problems += sum(len(p.warnings) for p in point.plans)
        files.update({f"{point.label}/{name}": text
                      for name, text in plan_files(point.plans, wanted).items()})
    markdown, data = sweep_index(points)
    files.update({"index.md": markdown, "index.json": data})
    return files, reports, problems


def _write_text(path: Path, text: str, encoding: str) -> None:
    path.write_text(text, encoding=encoding)


def write_files(folder: Path, files: dict[str, str]) -> list[Path]:
    """Write {relative path: text} into ``folder``, all or nothing: into a new folder beside it
    first, then each file moved into place once every one is written (a failure part-way leaves
    ``folder`` as it was). Returns the paths written."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        for name, text in files.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            _write_text(staging / name, text, encoding="utf-8")
        written = []
        for name in files:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / name, folder / name)
            written.append(folder / name)
        return written
    finally:
        shutil.rmtree(staging, ignore_errors=True)
