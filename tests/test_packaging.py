"""`pip install .` (a real wheel, not an editable install) works from any directory: templates,
schemas and presets ship inside the wheel."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT


def run(*args: str | Path, cwd: Path) -> str:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


def test_wheel_installs_and_runs_elsewhere(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, ROOT, cwd=tmp_path)
    wheel = next(wheels.glob("gen_launch-*.whl"))
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    run(venv / "bin" / "python", "-m", "pip", "install", "-q", wheel, cwd=tmp_path)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    gen = venv / "bin" / "gen-launch"
    assert run(gen, "--version", cwd=elsewhere).startswith("gen-launch ")
    located = run(venv / "bin" / "python", "-c",
                  "from generator.resources import data_dir; print(data_dir('templates'), data_dir('schemas'))",
                  cwd=elsewhere)
    assert all("site-packages" in p for p in located.split()), located
    assert json.loads(run(gen, "schema", cwd=elsewhere))["title"] == "gen-launch run spec"
    sample = ROOT / "samples" / "seed-pretrain-256.yaml"
    run(gen, sample, "--target", "all", cwd=elsewhere)
    out = elsewhere / "launch" / "seed-pretrain-256"
    expected = ROOT / "tests" / "golden" / "seed-pretrain-256" / "ds_config.json"
    assert (out / "ds_config.json").read_text() == expected.read_text()
    assert sorted(p.name for p in out.iterdir()) == [
        "ds_config.json", "launch.sbatch", "megatron_args.sh", "plan.json"]
    # without the report extra (no matplotlib here), report names it and writes nothing
    refused = subprocess.run([gen, "report", sample], cwd=elsewhere, capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and "pip install 'gen-launch[report]'" in refused.stderr, refused.stderr
    assert not (out / "report.html").exists()
