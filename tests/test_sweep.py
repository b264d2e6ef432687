"""Sweeps: every grid point (or listed override set) becomes its own run folder and a row of
index.md / index.json; invalid points are reported and skipped, --strict fails on them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from generator.artifacts import spec_files
from generator.calculator.resolve import resolve
from generator.cli import app
from generator.errors import UserError
from generator.run import load_spec

from .conftest import ROOT

runner = CliRunner()
SAMPLE = ROOT / "samples" / "sweep-tp-micro.yaml"


def test_grid_is_the_cross_product_and_invalid_points_are_skipped() -> None:
    files, reports, problems = spec_files(load_spec(SAMPLE))
    folders = sorted({name.split("/")[0] for name in files if "/" in name})
    assert folders == ["tp2-micro_batch_size1", "tp2-micro_batch_size2",
                       "tp4-micro_batch_size1", "tp4-micro_batch_size2"]
    skipped = [line for line in reports if "skipped" in line]
    assert len(skipped) == 2 and all("GL008" in line and "tp3" in line for line in skipped)
    assert problems == 2


def test_each_point_matches_the_spec_resolved_with_its_overrides(tmp_path: Path) -> None:
    files, _, _ = spec_files(load_spec(SAMPLE))
    rows = json.loads(files["index.json"])
    assert [r["point"] for r in rows][:2] == ["tp2-micro_batch_size1", "tp2-micro_batch_size2"]
    for row in rows:
        if "error" in row:
            assert row["parallelism.tp"] == 3
            continue
        plan = resolve(load_spec(SAMPLE, overrides=(f"parallelism.tp={row['tp']}",
                                                     f"batch.micro_batch_size={row['micro']}")))
        assert (row["dp"], row["accumulation"], row["global_batch"]) == (
            plan.dp, plan.gradient_accumulation_steps, plan.global_batch_size)
        assert row["micro"] * row["accumulation"] * row["dp"] == row["global_batch"]
        assert row["tokens_per_step"] == 2 * 1024 * 1024
        args = files[f"{row['point']}/megatron_args.sh"]
        assert f"--tensor-model-parallel-size {row['tp']}" in args
        assert f"--micro-batch-size {row['micro']}" in args
    table = files["index.md"].splitlines()
    assert len(table) == 2 + len(rows) and table[0].startswith("| point | world | tp |")
    assert sum("invalid:" in line for line in table) == 2


def test_generate_writes_folders_and_strict_refuses(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["generate", str(SAMPLE), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "sweep point tp3-micro_batch_size1 skipped" in result.output
    assert (out / "tp4-micro_batch_size2" / "launch.sbatch").is_file()
    assert (out / "index.md").is_file() and not (out / "tp3-micro_batch_size1").exists()
    assert runner.invoke(app, ["generate", str(SAMPLE), "--out", str(out), "--check"]).exit_code == 0
    (out / "tp2-micro_batch_size1" / "megatron_args.sh").unlink()
    check = runner.invoke(app, ["generate", str(SAMPLE), "--out", str(out), "--check"])
    assert check.exit_code == 1 and "tp2-micro_batch_size1/megatron_args.sh" in check.output
    strict = runner.invoke(app, ["generate", str(SAMPLE), "--out", str(tmp_path / "s"), "--strict"])
    assert strict.exit_code == 1 and not (tmp_path / "s").exists()


def test_points_list_and_single_target_need_out(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    text = SAMPLE.read_text().split("sweep:")[0]
    spec.write_text(text + "sweep:\n  points:\n    - {parallelism.tp: 8, batch.micro_batch_size: 2}\n"
                    "    - {parallelism.tp: 1}\n")
    files, reports, problems = spec_files(load_spec(spec))
    assert len(files) == 2 + 2 * 3
    warnings = [line for line in reports if "warning:" in line]
    assert problems == 2 and all(line.startswith("tp1: warning:") for line in warnings)
    assert any("GL010" in line for line in warnings) and any("GL020" in line for line in warnings)
    assert "--micro-batch-size 2" in files["tp8-micro_batch_size2/megatron_args.sh"]
    assert {n.split("/")[0] for n in files if "/" in n} == {"tp1", "tp8-micro_batch_size2"}
    result = runner.invoke(app, ["generate", str(spec), "--target", "megatron"])
    assert result.exit_code == 2 and "give --out" in result.output


def test_a_sweep_where_no_point_is_valid_is_an_error(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SAMPLE.read_text().split("sweep:")[0]
                    + "sweep:\n  grid:\n    parallelism.tpp: [2, 4]\n")
    with pytest.raises(UserError, match="no point of the sweep is valid.*tpp"):
        spec_files(load_spec(spec))
    result = runner.invoke(app, ["generate", str(spec), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_sweep_must_have_grid_or_points(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SAMPLE.read_text().split("sweep:")[0] + "sweep:\n  grid: {}\n")
    result = runner.invoke(app, ["generate", str(spec), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "s.yaml:" in result.output


def test_explain_prints_the_index() -> None:
    text = runner.invoke(app, ["explain", str(SAMPLE)])
    assert text.exit_code == 0 and text.output.startswith("| point | world | tp |")
    rows = json.loads(runner.invoke(app, ["explain", str(SAMPLE), "--format", "json"]).output)
    assert len(rows) == 6 and sum("error" in r for r in rows) == 2
    assert all(r["memory_gib"] > 0 and 0 < r["mfu"] < 1 for r in rows if "error" not in r)


def test_point_files_cite_the_spec_file_and_carry_no_sweep() -> None:
    from generator.sweep import sweep_points

    points = [p for p in sweep_points(load_spec(SAMPLE).doc) if not p.error]
    digests = {p.spec.doc.digest for p in points}
    assert len(digests) == len(points)  # each point's header hash differs
    for point in points:
        assert point.spec.doc.file == str(SAMPLE) and "sweep" not in point.spec.doc.data
        assert point.spec.name == f"sweep-tp-micro-{point.label}"
