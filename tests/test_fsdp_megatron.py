"""Megatron-FSDP (parallelism.megatron_fsdp): the sharding strategy from zero_stage, the
releases that have it, GL238's refusals; and (oracle) Megatron-LM core_v0.16.1's and main's own
parser and validate_args accept the arguments and hold the plan's strategy, format and dp."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from generator.artifacts import render_all, spec_files
from generator.calculator.resolve import PlanError
from generator.run import load_spec

from .helpers import plan_of, spec_dict
from .test_framework_parsers import cases_of, run_parsers

MOE = {"name": "mfsdp", "framework": "megatron-lm",
       "cluster": {"nodes": 4, "gpus_per_node": 8, "gpu": "h100-80gb"},
       "model": {"preset": "qwen3-30b-a3b"},
       "batch": {"micro_batch_size": 1, "global_batch_size": 256},
       "training": {"train_iters": 100, "lr": 3.0e-4, "warmup": {"iters": 10}, "precision": "bf16"}}


def _args(files: dict[str, str]) -> str:
    return files["megatron_args.sh"]


@pytest.mark.parametrize(("stage", "strategy"), [(None, "optim_grads_params"), (3, "optim_grads_params"),
                                                 (2, "optim_grads"), (1, "optim"), (0, "no_shard")])
def test_the_sharding_strategy_is_the_zero_stage(tmp_path: Path, stage, strategy: str) -> None:
    parallelism = {"tp": 1, "pp": 1, "ep": 8, "megatron_fsdp": True,
                   **({} if stage is None else {"zero_stage": stage})}
    plan = plan_of(tmp_path, {**MOE, "parallelism": parallelism})
    args = _args(render_all(plan))
    assert f"--data-parallel-sharding-strategy {strategy}" in args
    assert "--use-megatron-fsdp" in args and "--ckpt-format fsdp_dtensor" in args
    assert plan.checkpoint_format == "fsdp_dtensor"
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in render_all(plan)["launch.sbatch"]


def test_zero_stage_without_megatron_fsdp_is_still_refused(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="GL208 .* or megatron_fsdp: true"):
        plan_of(tmp_path, spec_dict(parallelism={"tp": 2, "pp": 2, "zero_stage": 3}))


def test_releases_before_megatron_fsdp_refuse_it(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="core_v0.14 or later"):
        plan_of(tmp_path, spec_dict(parallelism={"tp": 2, "pp": 2, "megatron_fsdp": True},
                                    megatron={"version": "core_v0.12"}))


def test_another_checkpoint_format_is_refused_where_it_is_written(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="GL238 Megatron-FSDP checkpoints only in the fsdp_dtensor format"):
        plan_of(tmp_path, spec_dict(parallelism={"tp": 2, "pp": 2, "megatron_fsdp": True},
                                    checkpoint={"dir": "/ckpt", "format": "torch_dist"}))


@pytest.mark.oracle
def test_megatrons_own_parser_accepts_megatron_fsdp(trees, tmp_path: Path) -> None:
    """core_v0.16.1 and main: the arguments parse and validate (no CUDA_DEVICE_MAX_CONNECTIONS=1,
    as launch.sbatch exports none), with the plan's strategy, format and dp; the same words
    with CUDA_DEVICE_MAX_CONNECTIONS=1 are refused, as GL238 says."""
    cases = []
    for version in ("core_v0.16", "latest"):
        data = {**MOE, "megatron": {"version": version},
                "parallelism": {"tp": 2, "pp": 1, "ep": 8, "megatron_fsdp": True, "zero_stage": 2}}
        path = tmp_path / f"mfsdp-{version}.yaml"
        path.write_text(yaml.safe_dump(data))
        (case,) = cases_of(spec_files(load_spec(path))[0], path.stem)
        case["env"] = {}
        case["show"] = ["use_megatron_fsdp", "data_parallel_sharding_strategy", "ckpt_format",
                        "use_distributed_optimizer"]
        cases += [case, dict(case, label=case["label"] + " with one connection",
                             env={"CUDA_DEVICE_MAX_CONNECTIONS": "1"})]
    for case, result in zip(cases, run_parsers(trees, cases), strict=True):
        if case["label"].endswith("with one connection"):
            assert not result["ok"] and "CUDA_DEVICE_MAX_CONNECTIONS" in result["error"], (case["label"], result)
            continue
        assert result["ok"], (case["label"], result)
        assert result["shown"] == {"use_megatron_fsdp": True, "data_parallel_sharding_strategy": "optim_grads",
                                   "ckpt_format": "fsdp_dtensor", "use_distributed_optimizer": True}
        assert (result["dp"], result["global"]) == (case["want"]["dp"], case["want"]["global"])
