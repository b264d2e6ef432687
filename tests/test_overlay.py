"""Layered specs: `extends` chains (deep merge, lists replaced, cycles refused) and `--set`
overrides typed by the schema, with errors pointing at the right file and line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from generator.calculator.resolve import PlanError, resolve
from generator.cli import app
from generator.errors import UserError
from generator.run import load_spec

from .conftest import ROOT

runner = CliRunner()


@pytest.fixture
def layers(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "samples" / "seed-pretrain-256.yaml", tmp_path / "base.yaml")
    (tmp_path / "mid.yaml").write_text("extends: base.yaml\nname: mid\nparallelism:\n  tp: 8\n  pp: 1\n")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "top.yaml").write_text(
        "extends: ../mid.yaml\nname: top\ntraining:\n  adam_betas: [0.8, 0.9]\n")
    return tmp_path


def test_chain_merges_deeply_and_replaces_lists(layers: Path) -> None:
    spec = load_spec(layers / "runs" / "top.yaml")
    assert spec.name == "top" and (spec.parallelism.tp, spec.parallelism.pp) == (8, 1)
    assert spec.parallelism.sequence_parallel is True  # kept from base.yaml
    assert spec.training.adam_betas == (0.8, 0.9) and spec.training.lr == 1.5e-4
    assert resolve(spec).dp == 32


def test_values_keep_their_file_and_line(layers: Path) -> None:
    spec = load_spec(layers / "runs" / "top.yaml", "runs/top.yaml")
    assert spec.where("parallelism.tp") == "runs/../mid.yaml:4:7"
    assert spec.where("training.lr") == "runs/../base.yaml:40:7"  # the sample's lr line


def test_cycles_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(UserError, match="extends forms a cycle: a.yaml → b.yaml → a.yaml"):
        load_spec(tmp_path / "a.yaml")


def test_missing_base(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("name: x\nextends: nope.yaml\n")
    result = runner.invoke(app, ["explain", str(tmp_path / "a.yaml")])
    assert result.exit_code == 2 and f"{tmp_path / 'a.yaml'}:2:10: $.extends: nope.yaml not found" in result.stderr


def test_set_is_typed_and_located(layers: Path) -> None:
    spec = load_spec(layers / "base.yaml", overrides=("parallelism.tp=8", "parallelism.pp=1",
                                                       "training.adam_betas=[0.8, 0.99]"))
    assert spec.parallelism.tp == 8 and spec.training.adam_betas == (0.8, 0.99)
    with pytest.raises(UserError) as err:
        load_spec(layers / "base.yaml", overrides=("cluster.nodes=abc",))
    assert str(err.value) == "--set cluster.nodes=abc:2:10: $.cluster.nodes: expected an integer, got 'abc'"
    with pytest.raises(UserError) as err:
        load_spec(layers / "base.yaml", overrides=("parallelism.tpp=3",))
    assert "$.parallelism: unknown key 'tpp'; did you mean 'tp'?" in str(err.value)
    with pytest.raises(UserError, match="expected PATH=VALUE"):
        load_spec(layers / "base.yaml", overrides=("nonsense",))


def test_plan_errors_point_into_the_overlay(layers: Path) -> None:
    (layers / "bad.yaml").write_text("extends: base.yaml\nparallelism:\n  tp: 5\n")
    with pytest.raises(PlanError) as err:
        resolve(load_spec(layers / "bad.yaml", "bad.yaml"))
    assert "tp at bad.yaml:3:7" in str(err.value)


def test_cli_set(layers: Path) -> None:
    result = runner.invoke(app, ["explain", str(layers / "base.yaml"), "--set", "parallelism.tp=8",
                                 "--set", "parallelism.pp=1"])
    assert result.exit_code == 0 and "dp = world_size / (pp × tp × cp) = 256 / (1 × 8 × 1) = 32" in result.stdout


def test_overridden_files_name_the_spec_file_with_another_hash(layers: Path) -> None:
    plain = load_spec(layers / "base.yaml", "base.yaml")
    changed = load_spec(layers / "base.yaml", "base.yaml", ("parallelism.tp=8",))
    assert changed.doc.file == plain.doc.file == "base.yaml"
    assert changed.doc.digest != plain.doc.digest
