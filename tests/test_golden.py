"""Golden files: every sample's rendered artifacts, as real files in tests/golden/<sample>/.

Update them only with ``pytest --update-golden`` and review the diff like code.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from generator.artifacts import spec_files
from generator.drift import compare
from generator.run import load_spec

from .conftest import ROOT, SAMPLES

GOLDEN = ROOT / "tests" / "golden"


def rendered(sample: Path) -> dict[str, str]:
    """Everything `generate` writes for a sample (stage and sweep-point folders included)."""
    return spec_files(load_spec(sample, f"samples/{sample.name}"))[0]


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
