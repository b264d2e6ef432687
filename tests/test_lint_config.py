"""A project's lint configuration ([tool.gen-launch] in pyproject.toml, or gen-launch.toml), found
from each linted file upwards, and --dialect: the declared parser makes a finding certain."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from generator.cli import app
from generator.lint import lint_paths
from generator.lint.config import matches

# BLOOM's recipe habits (--checkpoint-activations) with a flag only Megatron-LM and microsoft's
# fork define: without a declaration the flags fit several dialects
SCRIPT = """\
#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nproc_per_node 8 pretrain_gpt.py \\
  --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 \\
  --max-position-embeddings 2048 --micro-batch-size 2 --global-batch-size 64 \\
  --tensor-model-parallel-size 2 --recompute-granularity full --recompute-method uniform
"""


def project(root: Path, config: str, name: str = "gen-launch.toml", script: str = "scripts/train.sh") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(config)
    path = root / script
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SCRIPT)
    return path


def codes(*paths: Path, **kwargs) -> list[tuple[str, str]]:
    return [(i.finding.code, i.level) for i in lint_paths(list(paths), **kwargs).items]


def test_nothing_declared_is_judged_by_the_catalogue_it_fits(tmp_path: Path) -> None:
    assert codes(project(tmp_path, "")) == []  # Megatron-LM spells recompute so


def test_a_declared_dialect_judges_every_script(tmp_path: Path) -> None:
    script = project(tmp_path, 'dialect = "megatron-deepspeed/bigscience"\n')
    [item] = lint_paths([script]).items
    assert (item.finding.code, item.level) == ("GL201", "error")
    assert "--recompute-granularity is not an option of Megatron-DeepSpeed (bigscience" in item.finding.message
    assert f"declared at {tmp_path / 'gen-launch.toml'}:1:1" in item.finding.message


def test_pyproject_per_path_dialects_and_the_nearest_configuration(tmp_path: Path) -> None:
    config = '[tool.gen-launch]\ndialect = "megatron-lm"\nper-path-dialects = {"bloom/*.sh" = "megatron-deepspeed/bigscience"}\n'
    project(tmp_path, config, "pyproject.toml")
    bloom = tmp_path / "bloom" / "train.sh"
    bloom.parent.mkdir()
    bloom.write_text(SCRIPT)
    assert codes(tmp_path) == [("GL201", "error")]  # bloom/train.sh only
    # a gen-launch.toml nearer to the file wins over the pyproject above it
    (tmp_path / "bloom" / "gen-launch.toml").write_text('dialect = "megatron-lm@core_v0.14"\n')
    assert codes(tmp_path) == []


def test_a_pyproject_without_the_table_is_not_a_configuration(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    outer = project(tmp_path / "sub", '[tool.ruff]\nline-length = 100\n', "pyproject.toml")
    assert codes(outer) == []


def test_the_dialect_flag_overrides_the_configuration(tmp_path: Path) -> None:
    script = project(tmp_path, 'dialect = "megatron-lm"\n')
    assert codes(script) == []
    assert codes(script, dialect="megatron-deepspeed/bigscience") == [("GL201", "error")]


def test_a_declared_megatron_tree_is_read_as_the_parser(tmp_path: Path) -> None:
    tree = tmp_path / "vendor" / "megatron-fork" / "megatron"
    tree.mkdir(parents=True)
    (tree / "arguments.py").write_text(
        "def add(parser):\n"
        + "".join(f"    parser.add_argument('{f}', type=int)\n" for f in (
            "--num-layers", "--hidden-size", "--num-attention-heads", "--seq-length", "--max-position-embeddings",
            "--micro-batch-size", "--global-batch-size", "--tensor-model-parallel-size"))
        + "    parser.add_argument('--recompute-granularity', choices=['full', 'selective'])\n")
    script = project(tmp_path, 'megatron-tree = "vendor/megatron-fork"\n')
    [item] = lint_paths([script]).items  # --recompute-method: not in the declared tree
    assert (item.finding.code, item.level) == ("GL201", "error")
    assert "--recompute-method is not an option of the Megatron tree vendor/megatron-fork" in item.finding.message


def test_select_ignore_per_file_ignores_and_exclude(tmp_path: Path) -> None:
    script = project(tmp_path, 'dialect = "megatron-deepspeed/bigscience"\nignore = ["GL201"]\n')
    assert codes(script) == []
    project(tmp_path, 'dialect = "megatron-deepspeed/bigscience"\nper-file-ignores = {"scripts/*.sh" = ["GL2"]}\n')
    assert codes(script) == []
    project(tmp_path, 'dialect = "megatron-deepspeed/bigscience"\nselect = ["GL0"]\n')
    assert codes(script) == []
    project(tmp_path, 'dialect = "megatron-deepspeed/bigscience"\nexclude = ["scripts"]\n')
    assert codes(tmp_path) == []
    assert codes(script) == [("GL201", "error")]  # a file named on the command line is linted


@pytest.mark.parametrize(("config", "message"), [
    ('dialect = "megatron-lm"\ndialects = "x"\n', "gen-launch.toml:2:1: dialects: not a setting"),
    ('per_file_ignores = {}\n', "gen-launch.toml:1:1: per_file_ignores: not a setting; did you mean 'per-file-ignores'?"),
    ('dialect = "megatron-lm@core_v0.99"\n', "gen-launch.toml:1:1: dialect: 'megatron-lm@core_v0.99' is not a dialect"),
    ('ignore = "GL201"\n', "gen-launch.toml:1:1: ignore: must be a list, not str ('GL201')"),
    ('megatron-tree = "nowhere"\n', "gen-launch.toml:1:1: megatron-tree: 'nowhere' is not a folder"),
    ('dialect = \n', "gen-launch.toml:1:11: not valid TOML: Invalid value"),
])
def test_a_mistake_in_the_configuration_is_a_located_usage_error(tmp_path: Path, config: str, message: str) -> None:
    script = project(tmp_path, config)
    result = CliRunner().invoke(app, ["lint", str(script)])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.output


def test_an_unknown_dialect_flag_is_a_usage_error(tmp_path: Path) -> None:
    script = project(tmp_path, "")
    result = CliRunner().invoke(app, ["lint", "--dialect", "megatron", str(script)])
    assert result.exit_code == 2
    assert "--dialect: 'megatron' is not a dialect; choose from megatron-lm, megatron-lm@core_v0.12" in result.stderr


@pytest.mark.parametrize(("path", "glob", "hit"), [
    ("scripts/train.sh", "scripts/*.sh", True), ("scripts/a/train.sh", "scripts/*.sh", False),
    ("scripts/a/train.sh", "scripts/**/*.sh", True), ("scripts/train.sh", "scripts/**/*.sh", True),
    ("deep/er/train.sh", "train.sh", True), ("deep/er/train.sh", "*.sh", True), ("train.py", "*.sh", False),
])
def test_globs_match_as_ruff_reads_them(path: str, glob: str, hit: bool) -> None:
    assert matches(path, glob) is hit
