"""Golden files: every sample's rendered artifacts, as real files in tests/golden/<sample>/.

Update them only with ``pytest --update-golden`` and review the diff like code.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from generator.drift import compare
from generator.plan.stages import resolve_run, stage_folder
from generator.render import render_all
from generator.spec.model import load_spec

from .conftest import ROOT, SAMPLES

GOLDEN = ROOT / "tests" / "golden"


def rendered(sample: Path) -> dict[str, str]:
    """The files of a sample; a staged sample's are keyed by their stage folder."""
    plans = resolve_run(load_spec(sample, f"samples/{sample.name}"))
    if plans[0].spec.stage is None:
        return render_all(plans[0])
    return {f"{stage_folder(i, plan)}/{name}": text
            for i, plan in enumerate(plans, start=1) for name, text in render_all(plan).items()}


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.stem for s in SAMPLES])
def test_golden(sample: Path, update_golden: bool) -> None:
    files = rendered(sample)
    folder = GOLDEN / sample.stem
    if update_golden:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text, encoding="utf-8")
        return
    assert folder.is_dir(), f"no golden files for {sample.name}; run pytest --update-golden"
    drift = compare(files, folder)  # the comparison `generate --check` uses
    if not drift.clean:
        pytest.fail(f"golden files differ (pytest --update-golden to accept):\n{drift.summary()}\n"
                    f"{drift.diff}")


def test_no_orphaned_golden_folders() -> None:
    assert sorted(p.name for p in GOLDEN.iterdir()) == sorted(s.stem for s in SAMPLES)
