"""The two worked examples of the seed article (000): they must come out to the digit."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.calculator.resolve import resolve
from generator.explain import explain_text
from generator.run import load_spec

from .conftest import ROOT


@pytest.mark.parametrize(
    ("sample", "world", "dp", "global_batch", "tokens", "lines"),
    [
        ("seed-pretrain-256.yaml", 256, 32, 4096, 8_388_608, [
            "world_size = nodes × gpus_per_node = 32 × 8 = 256",
            "dp = world_size / (pp × tp × cp) = 256 / (2 × 4 × 1) = 32",
            "global_batch_size = micro × accumulation × dp = 16 × 8 × 32 = 4096",
            "tokens_per_step = seq_length × global_batch_size = 2048 × 4096 = 8,388,608 ≈ 8.4M",
        ]),
        ("seed-sft-64.yaml", 64, 16, 512, 524_288, [
            "world_size = nodes × gpus_per_node = 8 × 8 = 64",
            "dp = world_size / (pp × tp × cp) = 64 / (2 × 2 × 1) = 16",
            "global_batch_size = micro × accumulation × dp = 8 × 4 × 16 = 512",
            "tokens_per_step = seq_length × global_batch_size = 1024 × 512 = 524,288 ≈ 524.3K",
        ]),
    ],
)
def test_seed_example(sample: str, world: int, dp: int, global_batch: int, tokens: int,
                      lines: list[str]) -> None:
    plan = resolve(load_spec(ROOT / "samples" / sample, f"samples/{sample}"))
    assert (plan.world_size, plan.dp, plan.global_batch_size, plan.tokens_per_step) == (
        world, dp, global_batch, tokens)
    text = explain_text(plan)
    for line in lines:
        assert f"  {line}\n" in text


def test_seed_pretrain_schedule() -> None:
    """300B tokens at 8,388,608 tokens per step: 35,763 steps (rounded up and reported)."""
    plan = resolve(load_spec(ROOT / "samples" / "seed-pretrain-256.yaml"))
    assert plan.schedule.train_iters == 35_763  # ceil(300e9 / 8388608) = ceil(35762.786)
    assert plan.schedule.warmup_iters == 358  # 1% of 35,763 = 357.63, rounded
    assert any("rounded up to 35,763 steps" in n for n in plan.notes)


def test_explain_cli_reproduces_seed(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from generator.cli import app

    result = CliRunner().invoke(app, ["explain", str(ROOT / "samples" / "seed-pretrain-256.yaml")])
    assert result.exit_code == 0
    assert "global_batch_size = micro × accumulation × dp = 16 × 8 × 32 = 4096" in result.stdout
    assert "8,388,608 ≈ 8.4M" in result.stdout
