"""The data-parallel group as dp_replicate × dp_shard (FSDP, HSDP) beside tp/pp/cp: derived from
what the spec gives, refused (GL026) with every factor named, carried to accelerate's config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from generator.artifacts import render_all
from generator.calculator.resolve import PlanError

from .helpers import plan_of, spec_dict

# 4 nodes × 8 GPUs = 32, tp 2 → dp 16
FSDP = {"framework": "fsdp", "cluster": {"nodes": 4, "gpus_per_node": 8, "gpu": "h100-80gb"},
        "launch": {"launcher": "accelerate", "entrypoint": "train.py"}}


def _plan(tmp_path: Path, framework: str = "fsdp", **parallelism):
    base = {**FSDP, "framework": framework} if framework == "fsdp" else {"framework": framework,
                                                                         "cluster": FSDP["cluster"]}
    return plan_of(tmp_path, spec_dict(**base, parallelism={"tp": 1, "pp": 1, **parallelism}))


@pytest.mark.parametrize(("given", "replicate", "shard"), [
    ({}, 1, 32),  # plain FSDP: one shard group of dp
    ({"dp_shard": 8}, 4, 8),  # HSDP, the replicas derived
    ({"dp_replicate": 2}, 2, 16),  # the shard group derived
    ({"dp_replicate": 4, "dp_shard": 8}, 4, 8),
    ({"hybrid_shard": True}, 4, 8),  # shard within a node, replicate over the 4 nodes
])
def test_the_data_parallel_group_is_replicas_of_a_shard_group(tmp_path: Path, given, replicate, shard) -> None:
    plan = _plan(tmp_path, **given)
    assert (plan.dp_replicate, plan.dp_shard) == (replicate, shard)
    assert plan.dp_replicate * plan.dp_shard * plan.tp * plan.pp * plan.cp == plan.world_size


def test_hsdp_reaches_accelerates_parallelism_config(tmp_path: Path) -> None:
    config = yaml.safe_load(render_all(_plan(tmp_path, dp_shard=8))["accelerate_config.yaml"])
    assert config["parallelism_config"] == {"parallelism_config_dp_replicate_size": 4,
                                            "parallelism_config_dp_shard_size": 8}


def test_a_product_that_is_not_the_world_names_every_factor(tmp_path: Path) -> None:
    with pytest.raises(PlanError) as exc:
        _plan(tmp_path, dp_replicate=2, dp_shard=4)
    message = str(exc.value)
    assert "GL026" in message and "spec.yaml:" in message
    assert "world 32 ≠ dp_replicate 2 × dp_shard 4 × cp 1 × tp 1 × pp 1 = 8" in message


@pytest.mark.parametrize(("given", "words"), [
    ({"dp_shard": 3}, "dp_shard 3 does not divide dp 32"),
    ({"dp_replicate": 3}, "dp_replicate 3 does not divide dp 32"),
])
def test_a_degree_that_does_not_divide_dp_is_refused(tmp_path: Path, given, words) -> None:
    with pytest.raises(PlanError, match=words):
        _plan(tmp_path, **given)


def test_replicas_of_a_shard_group_need_fsdp(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="framework deepspeed does not replicate a sharded group"):
        _plan(tmp_path, framework="deepspeed", dp_replicate=2)
    assert _plan(tmp_path, framework="deepspeed", dp_shard=32).dp_replicate == 1  # ZeRO over all of dp


def test_tp_and_cp_reach_accelerates_parallelism_config(tmp_path: Path) -> None:
    plan = _plan(tmp_path, tp=2, cp=2, dp_replicate=2)  # 32 = 2 replicas × 4 shards × cp 2 × tp 2
    config = yaml.safe_load(render_all(plan)["accelerate_config.yaml"])
    assert config["parallelism_config"] == {"parallelism_config_dp_replicate_size": 2,
                                            "parallelism_config_dp_shard_size": 4,
                                            "parallelism_config_tp_size": 2, "parallelism_config_cp_size": 2}
    assert config["fsdp_config"]["fsdp_version"] == 2 and config["num_processes"] == 32


def test_tp_with_fsdp_needs_accelerates_config(tmp_path: Path) -> None:
    data = spec_dict(**{**FSDP, "launch": {"launcher": "torchrun", "entrypoint": "train.py"}},
                     parallelism={"tp": 2, "pp": 1})
    with pytest.raises(PlanError, match="framework fsdp takes tp 2 from accelerate's config; use launcher accelerate"):
        plan_of(tmp_path, data)
    with pytest.raises(PlanError, match=r"framework fsdp has no model parallelism here \(pp 2\)"):
        _plan(tmp_path, pp=2)


def test_accelerate_refuses_fsdp_with_nothing_to_shard(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="GL117 accelerate's FSDP2 shards over dp_shard × cp = 1"):
        _plan(tmp_path, tp=8, dp_replicate=4)
