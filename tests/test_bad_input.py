"""Every kind of bad input exits 2 with a one-line located message and no traceback."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from generator.cli import app

from .conftest import MINIMAL

runner = CliRunner()


def run(path: Path | str) -> tuple[int, str]:
    result = runner.invoke(app, ["explain", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stderr


def one_located_line(stderr: str, path: Path, line: int | None = None) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    pattern = re.escape(str(path)) + (rf":{line}:\d+: " if line else r"(:\d+:\d+)?: ")
    assert re.match(pattern, lines[0]), lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        # unknown key, with a did-you-mean
        (MINIMAL.replace("parallelism: {tp: 2, pp: 2}", "parallelism: {tp: 2, pp: 2, dpp: 3}"), 5,
         "$.parallelism: unknown key 'dpp'; did you mean 'dp'?"),
        (MINIMAL + "trainig: {}\n", 8, "$: unknown key 'trainig'; did you mean 'training'?"),
        # duplicate key (PyYAML would keep the last silently)
        (MINIMAL + "name: again\n", 8, "duplicate key 'name' (first defined on line 1)"),
        # wrong types
        (MINIMAL.replace("nodes: 2,", "nodes: two,"), 3, "$.cluster.nodes: expected an integer, got 'two'"),
        (MINIMAL.replace("nodes: 2,", "nodes: 2.5,"), 3, "$.cluster.nodes: expected an integer, got 2.5"),
        (MINIMAL.replace("parallelism: {tp: 2, pp: 2}", "parallelism: [2, 2]"), 5,
         "$.parallelism: expected a mapping, got a list"),
        # zero and negative sizes
        (MINIMAL.replace("nodes: 2,", "nodes: 0,"), 3, "$.cluster.nodes: must be at least 1, got 0"),
        (MINIMAL.replace("tp: 2,", "tp: -2,"), 5, "$.parallelism.tp: must be at least 1, got -2"),
        # enum with a suggestion
        (MINIMAL.replace("framework: megatron-lm", "framework: megatron"), 2,
         "$.framework: 'megatron' is not one of megatron-lm, megatron-deepspeed, deepspeed, fsdp, torchtitan; did you mean 'megatron-lm'?"),
        # garbage count
        (MINIMAL.replace("batch: {micro_batch_size: 2, gradient_accumulation_steps: 4}",
                         "batch: {micro_batch_size: 2, tokens_per_step: 4X}"), 6,
         "$.batch.tokens_per_step: expected a positive count"),
        # exactly one run length
        (MINIMAL.replace("train_iters: 1000", "train_iters: 1000, train_tokens: 1B"), 7,
         "$.training: give exactly one of train_tokens, train_iters, train_samples"),
        # Slurm and launch options
        (MINIMAL + "slurm: {time: 2 days}\n", 8, "$.slurm.time: a Slurm time limit such as 2-00:00:00"),
        (MINIMAL + "launch: {launcher: mpirun}\n", 8, "$.launch.launcher: 'mpirun' is not one of torchrun, deepspeed, srun"),
        # a name that would escape the output folder
        (MINIMAL.replace("name: t", "name: ../../etc"), 1, "$.name: a name uses only letters"),
        (MINIMAL.replace("name: t", "name: .."), 1, "$.name: a name uses only letters"),
        # missing required section
        (MINIMAL.replace("batch: {micro_batch_size: 2, gradient_accumulation_steps: 4}\n", ""), 1,
         "$: missing required key 'batch'"),
        # a python tag: never constructed
        (MINIMAL.replace("name: t", "name: !!python/object/apply:os.system ['echo pwned']"), 1,
         "tag !!python/object/apply:os.system is not allowed"),
        # invalid YAML syntax
        (MINIMAL + "model: {num_layers: [\n", 9, "invalid YAML"),
        # model without a preset and without its shape
        (MINIMAL.replace("model: {num_layers: 8, hidden_size: 1024, num_attention_heads: 16, vocab_size: 32000, seq_length: 2048}",
                         "model: {num_layers: 8}"), 4, "$.model: missing hidden_size, num_attention_heads, vocab_size, seq_length"),
    ],
)
def test_bad_spec(write_spec, text: str, line: int, fragment: str) -> None:
    path = write_spec(text)
    code, stderr = run(path)
    assert code == 2
    message = one_located_line(stderr, path, line)
    assert fragment in message


def test_empty_file(write_spec) -> None:
    path = write_spec("")
    code, stderr = run(path)
    assert code == 2 and "the file is empty" in one_located_line(stderr, path, 1)


def test_comment_only_file(write_spec) -> None:
    path = write_spec("# nothing here\n")
    code, stderr = run(path)
    assert code == 2 and "the file is empty" in one_located_line(stderr, path)


def test_list_instead_of_mapping(write_spec) -> None:
    path = write_spec("- name: t\n- framework: megatron-lm\n")
    code, stderr = run(path)
    assert code == 2 and "a spec is a mapping of sections" in one_located_line(stderr, path, 1)


def test_alias_bomb_is_bounded(write_spec) -> None:
    bomb = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        bomb.append(f"{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]")
    path = write_spec("\n".join(bomb) + "\n")
    code, stderr = run(path)
    assert code == 2 and "alias bomb" in one_located_line(stderr, path)


def test_recursive_alias_is_bounded(write_spec) -> None:
    path = write_spec("a: &a [*a]\n")
    code, stderr = run(path)
    assert code == 2 and "more than 10,000 nodes" in one_located_line(stderr, path)


def test_non_utf8(write_spec) -> None:
    path = write_spec(MINIMAL.encode().replace(b"name: t", b"name: t\xff"))
    code, stderr = run(path)
    assert code == 2 and "not valid UTF-8 (byte 0xff)" in one_located_line(stderr, path, 1)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    code, stderr = run(path)
    assert code == 2 and "file not found" in one_located_line(stderr, path)


def test_directory_instead_of_file(tmp_path: Path) -> None:
    code, stderr = run(tmp_path)
    assert code == 2 and "is a directory" in one_located_line(stderr, tmp_path)


def test_yaml11_pitfalls_are_not_applied(write_spec) -> None:
    """'on' stays a string and 48:00:00 stays a time, not the base-60 integer 172800."""
    path = write_spec(MINIMAL + "slurm: {time: 48:00:00, partition: on}\n")
    result = runner.invoke(app, ["generate", str(path), "--target", "slurm"])
    assert result.exit_code == 0, result.stderr
    assert "#SBATCH --time=48:00:00" in result.stdout
    assert "#SBATCH --partition=on" in result.stdout


def test_no_traceback_from_the_console_script(write_spec) -> None:
    path = write_spec(MINIMAL.replace("tp: 2,", "tp: 3,"))
    proc = subprocess.run([sys.executable, "-m", "generator", str(path), "--target", "megatron"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "GL003 world size 16 is not divisible by tp 3 × pp 2 × cp 1 = 6" in proc.stderr


@pytest.mark.parametrize("value", ["'x\\ny'", "'a b'", "\"$(reboot)\""])
def test_sbatch_values_cannot_inject(write_spec, value: str) -> None:
    path = write_spec(MINIMAL + f"slurm: {{partition: {value}}}\n")
    code, stderr = run(path)
    assert code == 2
    assert "$.slurm.partition" in one_located_line(stderr, path, 8)
