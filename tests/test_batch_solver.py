"""Solving the batch from every sufficient subset, and the errors for the others."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.calculator.resolve import PlanError
from generator.plan.batch import closest_multiple, solve_batch

from .helpers import plan_of, spec_dict

# dp 8 throughout: 2 nodes × 8 GPUs / (tp 2 × pp 1 × cp 1)
LAYOUT = {"parallelism": {"tp": 2, "pp": 1}}


def with_batch(batch: dict) -> dict:
    data = spec_dict(**LAYOUT)
    data["batch"] = batch
    return data


@pytest.mark.parametrize(
    ("batch", "expected"),
    [
        ({"micro_batch_size": 4, "gradient_accumulation_steps": 2}, (4, 2, 64)),
        ({"global_batch_size": 64, "micro_batch_size": 4}, (4, 2, 64)),
        ({"global_batch_size": 64, "gradient_accumulation_steps": 2}, (4, 2, 64)),
        ({"micro_batch_size": 4, "gradient_accumulation_steps": 2, "global_batch_size": 64}, (4, 2, 64)),
        # tokens target + micro: 131072 tokens / 2048 = 64 sequences = micro 4 × 2 × dp 8
        ({"tokens_per_step": 131072, "micro_batch_size": 4}, (4, 2, 64)),
        ({"tokens_per_step": "128Ki", "gradient_accumulation_steps": 2}, (4, 2, 64)),
        # consistent tokens given with micro + accumulation
        ({"tokens_per_step": "128Ki", "micro_batch_size": 4, "gradient_accumulation_steps": 2}, (4, 2, 64)),
    ],
)
def test_every_sufficient_subset(tmp_path: Path, batch: dict, expected: tuple) -> None:
    plan = plan_of(tmp_path, with_batch(batch))
    assert (plan.micro_batch_size, plan.gradient_accumulation_steps, plan.global_batch_size) == expected
    assert plan.global_batch_size == plan.micro_batch_size * plan.gradient_accumulation_steps * plan.dp


def test_token_target_is_rounded_and_reported(tmp_path: Path) -> None:
    # 4M tokens / (micro 1 × dp 8 × 2048) = 244.14 steps of 8 sequences -> 244 -> global 1952
    plan = plan_of(tmp_path, with_batch({"tokens_per_step": "4M", "micro_batch_size": 1}))
    assert plan.global_batch_size == 1952
    assert plan.tokens_per_step == 3_997_696
    assert any("tokens_per_step target 4,000,000 → global batch 1952" in n and "-0.06%" in n
               for n in plan.notes)


def test_token_target_too_far_is_refused(tmp_path: Path) -> None:
    # the batch moves in steps of micro 64 × dp 8 = 512 sequences = 1,048,576 tokens
    data = with_batch({"tokens_per_step": "1.5Mi", "micro_batch_size": 64})
    with pytest.raises(PlanError) as err:
        plan_of(tmp_path, data)
    assert "GL019" in str(err.value)
    assert "tokens_per_step target 1,572,864 is unreachable" in str(err.value)


@pytest.mark.parametrize(
    "batch",
    [{}, {"micro_batch_size": 4}, {"gradient_accumulation_steps": 4}, {"global_batch_size": 64},
     {"tokens_per_step": "4M"}, {"tokens_per_step": "4M", "global_batch_size": 64}],
)
def test_insufficient_subsets(tmp_path: Path, batch: dict) -> None:
    data = with_batch(batch)
    with pytest.raises(PlanError) as err:
        plan_of(tmp_path, data)
    assert "GL018" in str(err.value) and "does not determine the batch" in str(err.value)


def test_not_divisible_names_every_factor_and_alternatives(tmp_path: Path) -> None:
    # the example: dp 32 (32 nodes × 8 / (4 × 2 × 1)), micro 16, global 1000
    data = spec_dict(cluster={"nodes": 32}, parallelism={"tp": 4, "pp": 2},
                     batch={"global_batch_size": 1000, "micro_batch_size": 16,
                            "gradient_accumulation_steps": None})
    with pytest.raises(PlanError) as err:
        plan_of(tmp_path, data)
    message = str(err.value)
    assert "GL002 global batch 1000 is not divisible by micro 16 × dp 32 = 512; use 512 or 1024" in message
    assert message.startswith(f"{tmp_path / 'spec.yaml'}:")


def test_not_divisible_offers_micro_alternatives(tmp_path: Path) -> None:
    # global 96, dp 8 -> 12 per rank; micro 5 does not divide 12: offer micro 4 (acc 3) and 6 (acc 2)
    data = spec_dict(**LAYOUT, batch={"global_batch_size": 96, "micro_batch_size": 5,
                                      "gradient_accumulation_steps": None})
    with pytest.raises(PlanError) as err:
        plan_of(tmp_path, data)
    assert ("use 80, 120, micro 4 with accumulation 3 or micro 6 with accumulation 2"
            in str(err.value))


def test_disagreeing_values(tmp_path: Path) -> None:
    data = spec_dict(**LAYOUT, batch={"micro_batch_size": 4, "gradient_accumulation_steps": 2,
                                      "global_batch_size": 128})
    with pytest.raises(PlanError) as err:
        plan_of(tmp_path, data)
    assert "GL001 global batch 128 != micro 4 × accumulation 2 × dp 8 = 64" in str(err.value)


def test_tokens_disagreeing_with_batch(tmp_path: Path) -> None:
    data = spec_dict(**LAYOUT, batch={"micro_batch_size": 4, "gradient_accumulation_steps": 2,
                                      "tokens_per_step": "4M"})
    with pytest.raises(PlanError) as err:
        plan_of(tmp_path, data)
    assert "GL014 tokens_per_step 4,000,000 != global batch 64 × seq_length 2048 = 131,072" in str(err.value)


def test_global_and_accumulation_not_divisible(tmp_path: Path) -> None:
    data = spec_dict(**LAYOUT, batch={"global_batch_size": 100, "gradient_accumulation_steps": 4,
                                      "micro_batch_size": None})
    with pytest.raises(PlanError) as err:
        plan_of(tmp_path, data)
    assert "global batch 100 is not divisible by accumulation 4 × dp 8 = 32; use 96 or 128" in str(err.value)


def test_solver_leaves_inconsistency_to_the_rules() -> None:
    solved = solve_batch(micro=16, accumulation=None, global_=1000, tokens=None, dp=32, seq_length=2048)
    assert solved.gradient_accumulation_steps is None and solved.global_batch_size == 1000


@pytest.mark.parametrize(("target", "unit", "k"), [(10, 4, 2), (10, 3, 3), (1, 100, 1), (14, 4, 3), (6, 4, 1)])
def test_closest_multiple(target: int, unit: int, k: int) -> None:
    assert closest_multiple(target, unit) == k


@pytest.mark.parametrize(("rule", "expected"), [("linear", 4e-4), ("sqrt", 2e-4)])
def test_lr_scaling_from_a_reference(tmp_path: Path, rule: str, expected: float) -> None:
    # global = 4 × 2 × dp 8 = 64 = 4 × the reference 16
    data = with_batch({"micro_batch_size": 4, "gradient_accumulation_steps": 2})
    data["training"] = {"train_iters": 1000, "warmup": {"iters": 10},
                        "lr_scaling": {"rule": rule, "reference_global_batch_size": 16, "reference_lr": 1e-4}}
    plan = plan_of(tmp_path, data)
    assert plan.lr == pytest.approx(expected)
    assert any(line.startswith("lr = reference_lr × ") and f"({rule} rule)" in line for line in plan.derivation)
    from generator.artifacts import render_all

    assert f"--lr {plan.lr!r}" in render_all(plan)["megatron_args.sh"]
