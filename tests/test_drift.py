"""`generate --check [--diff]`: drift is found for a changed, a missing and an extra file, the
exit code is 1, and nothing is written."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from generator.cli import app

from .conftest import ROOT

runner = CliRunner()
SEED = ROOT / "samples" / "seed-pretrain-256.yaml"
STAGED = ROOT / "samples" / "llama3-8b-progressive.yaml"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_up_to_date_is_exit_0(tmp_path: Path) -> None:
    assert runner.invoke(app, ["generate", str(SEED), "--out", str(tmp_path)]).exit_code == 0
    result = runner.invoke(app, ["generate", str(SEED), "--out", str(tmp_path), "--check"])
    assert result.exit_code == 0 and "4 file(s) up to date" in result.stderr


def test_drift_is_reported_and_nothing_written(tmp_path: Path) -> None:
    runner.invoke(app, ["generate", str(SEED), "--out", str(tmp_path)])
    args = tmp_path / "megatron_args.sh"
    args.write_text(args.read_text().replace("--global-batch-size 4096", "--global-batch-size 4000"))
    (tmp_path / "plan.json").unlink()
    (tmp_path / "notes.txt").write_text("hand-written\n")
    before = snapshot(tmp_path)
    result = runner.invoke(app, ["generate", str(SEED), "--out", str(tmp_path), "--check", "--diff"])
    assert result.exit_code == 1
    assert "changed: megatron_args.sh" in result.stdout and "missing: plan.json" in result.stdout
    assert "extra: notes.txt" in result.stdout
    assert "-  --global-batch-size 4000\n+  --global-batch-size 4096" in result.stdout
    assert snapshot(tmp_path) == before


def test_one_target_checks_only_its_file(tmp_path: Path) -> None:
    runner.invoke(app, ["generate", str(SEED), "--out", str(tmp_path)])
    (tmp_path / "plan.json").unlink()  # not the megatron target's file: ignored
    ok = runner.invoke(app, ["generate", str(SEED), "--out", str(tmp_path), "-t", "megatron", "--check"])
    assert ok.exit_code == 0 and "1 file(s) up to date" in ok.stderr
    args = tmp_path / "megatron_args.sh"
    args.write_text(args.read_text().replace("--micro-batch-size 16", "--micro-batch-size 8"))
    bad = runner.invoke(app, ["generate", str(SEED), "--out", str(tmp_path), "-t", "megatron", "--check"])
    assert bad.exit_code == 1 and "changed: megatron_args.sh" in bad.stdout and "extra" not in bad.stdout


def test_missing_folder_is_drift(tmp_path: Path) -> None:
    result = runner.invoke(app, ["generate", str(SEED), "--out", str(tmp_path / "none"), "--check"])
    assert result.exit_code == 1 and not (tmp_path / "none").exists()


def test_staged_spec_is_checked_per_stage(tmp_path: Path) -> None:
    runner.invoke(app, ["generate", str(STAGED), "--out", str(tmp_path)])
    assert runner.invoke(app, ["generate", str(STAGED), "--out", str(tmp_path), "--check"]).exit_code == 0
    shutil.rmtree(tmp_path / "stage-2-long")
    result = runner.invoke(app, ["generate", str(STAGED), "--out", str(tmp_path), "--check"])
    assert result.exit_code == 1 and "missing: stage-2-long/launch.sbatch" in result.stdout


def test_several_specs_each_to_their_default_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    sft = ROOT / "samples" / "seed-sft-64.yaml"
    assert runner.invoke(app, ["generate", str(SEED), str(sft)]).exit_code == 0
    assert (tmp_path / "launch" / "seed-pretrain-256" / "launch.sbatch").exists()
    assert runner.invoke(app, ["generate", str(SEED), str(sft), "--check"]).exit_code == 0
    (tmp_path / "launch" / "seed-sft-64" / "launch.sbatch").write_text("edited\n")
    assert runner.invoke(app, ["generate", str(SEED), str(sft), "--check"]).exit_code == 1
    assert runner.invoke(app, ["generate", str(SEED), str(sft), "--out", "x"]).exit_code == 2


def test_header_names_the_spec_hash(tmp_path: Path) -> None:
    import hashlib

    runner.invoke(app, ["generate", str(SEED), "--out", str(tmp_path)])
    digest = hashlib.sha256(SEED.read_bytes()).hexdigest()[:16]
    assert f"(sha256 {digest}); do not edit." in (tmp_path / "launch.sbatch").read_text().splitlines()[1]
