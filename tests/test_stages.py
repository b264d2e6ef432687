"""A run in stages: each stage's plan and files, the timeline, and errors that name their stage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from generator.calculator.resolve import PlanError
from generator.cli import app
from generator.run import load_spec, resolve_run

from .conftest import ROOT

SAMPLE = ROOT / "samples" / "llama3-8b-progressive.yaml"
runner = CliRunner()


def test_each_stage_is_its_own_consistent_plan() -> None:
    short, long = resolve_run(load_spec(SAMPLE))
    assert (short.spec.stage, long.spec.stage) == ("short", "long")
    assert (short.model.seq_length, short.tokens_per_step) == (4096, 4 * 2**20)
    assert (long.model.seq_length, long.cp, long.tokens_per_step) == (8192, 2, 8 * 2**20)
    assert short.schedule.train_iters == 61 and long.schedule.train_iters == 11_921  # ceil(252M/4Mi), ceil(100B/8Mi)
    for plan in (short, long):
        assert plan.global_batch_size == plan.micro_batch_size * plan.gradient_accumulation_steps * plan.dp


def test_generate_writes_a_folder_per_stage(tmp_path: Path) -> None:
    result = runner.invoke(app, ["generate", str(SAMPLE), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stage-1-short", "stage-2-long"]
    long_args = (tmp_path / "stage-2-long" / "megatron_args.sh").read_text()
    assert "--seq-length 8192" in long_args and "--context-parallel-size 2" in long_args
    assert ", stage long); do not edit." in long_args.splitlines()[0]
    sbatch = (tmp_path / "stage-1-short" / "launch.sbatch").read_text()
    assert "#SBATCH --job-name=llama3-8b-progressive-short" in sbatch
    lint = runner.invoke(app, ["lint", str(tmp_path)])
    assert lint.exit_code == 0 and "0 error(s)" in lint.stderr


def test_single_target_to_stdout_is_refused_for_stages() -> None:
    result = runner.invoke(app, ["generate", str(SAMPLE), "--target", "megatron"])
    assert result.exit_code == 2 and "2 files (stages or sweep points); give --out" in result.stderr


def test_explain_shows_the_timeline() -> None:
    text = runner.invoke(app, ["explain", str(SAMPLE)]).stdout
    assert text.startswith("Stages of one run: each resumes from the previous stage's checkpoint")
    assert "stage-2-long: 100,000,595,968 tokens (11,921 steps) at seq 8192" in text
    assert "100,256,448,512 tokens in all" in text and "=== stage-1-short ===" in text
    payload = json.loads(runner.invoke(app, ["explain", str(SAMPLE), "--format", "json"]).stdout)
    assert [s["name"] for s in payload["stages"]] == ["llama3-8b-progressive-short", "llama3-8b-progressive-long"]


def test_stage_errors_name_the_stage(tmp_path: Path) -> None:
    data = yaml.safe_load(SAMPLE.read_text())
    data["stages"][1]["model"]["seq_length"] = 8190  # not a multiple of 2 × cp 2
    data["stages"][1]["model"]["max_position_embeddings"] = 8192
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(PlanError) as err:
        resolve_run(load_spec(path))
    assert "GL011 [stage long] seq_length 8190 is not divisible by 2 × cp 2 = 4" in str(err.value)


def test_a_stage_needs_one_run_length(tmp_path: Path) -> None:
    data = yaml.safe_load(SAMPLE.read_text())
    del data["stages"][0]["train_tokens"]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["explain", str(path)])
    assert result.exit_code == 2 and "a stage gives exactly one of train_tokens" in result.stderr


STAGED_RELAYOUT = """\
name: relayout
framework: megatron-lm
cluster: {nodes: 2, gpus_per_node: 8, gpu: h100-80gb}
model: {preset: llama3-8b}
parallelism: {tp: 2, distributed_optimizer: true}
batch: {micro_batch_size: 1, global_batch_size: 64}
training: {train_iters: 100, lr: 1.0e-4}
checkpoint: {dir: /ckpt/relayout, format: FORMAT}
stages:
  - {name: short, train_iters: 50}
  - {name: wide, parallelism: {tp: 4}, train_iters: 50}
"""


@pytest.mark.parametrize(("fmt", "refused"), [("torch", "tools/checkpoint/convert.py"),
                                              ("torch_dist", "dp_reshardable"),
                                              ("torch_dist, reshardable: true", None)])
def test_a_stage_that_cannot_resume_the_previous_one_is_refused_at_its_field(write_spec, fmt, refused) -> None:
    """GL313: a later stage at another tp loads the earlier stage's checkpoint only where the
    format reshards it (resume-check's classification of the two stages)."""

    path = write_spec(STAGED_RELAYOUT.replace("FORMAT", fmt))
    if refused is None:
        assert [p.tp for p in resolve_run(load_spec(path))] == [2, 4]
        return
    with pytest.raises(PlanError) as error:
        resolve_run(load_spec(path))
    (finding,) = error.value.findings
    assert finding.code == "GL313" and refused in finding.message
    assert finding.sources[0] == f"{path}:11:36"  # the stage's tp
    assert "stage short saves" in finding.message or fmt == "torch"
