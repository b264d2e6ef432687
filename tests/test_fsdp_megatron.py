"""Megatron-FSDP (parallelism.megatron_fsdp): the sharding strategy from zero_stage, the
releases that have it, GL238's refusals; HSDP in Megatron-LM (parallelism.dp_replicate as
--num-distributed-optimizer-instances: written, read back by lint and import, GL240's refusals);
and (oracle) Megatron-LM core_v0.16.1's and main's own parser and validate_args accept the
arguments and hold the plan's strategy, format, dp and optimizer instances."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from generator.artifacts import render_all, spec_files
from generator.calculator.resolve import PlanError
from generator.importer import import_paths
from generator.lint.engine import lint_texts, views
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


def _hsdp(tmp_path: Path, **parallelism):
    """Qwen3-30B-A3B on 4 × 8 GPUs (dp 32 at tp 1, pp 1; ep 8: an expert data-parallel group of 4)
    with the distributed optimizer."""
    return plan_of(tmp_path, {**MOE, "parallelism": {"tp": 1, "pp": 1, "ep": 8, "distributed_optimizer": True,
                                                     **parallelism}})


@pytest.mark.parametrize(("given", "replicate"), [({"dp_replicate": 4}, 4), ({"dp_shard": 8}, 4),
                                                  ({"ep": 4, "dp_replicate": 8}, 8), ({}, None)])
def test_dp_replicate_is_the_distributed_optimizers_instances(tmp_path: Path, given, replicate) -> None:
    plan = _hsdp(tmp_path, **given)
    args = _args(render_all(plan))
    if replicate is None:  # one instance: Megatron's default, not written
        assert plan.dp_replicate == 1 and "--num-distributed-optimizer-instances" not in args
        return
    assert (plan.dp_replicate, plan.dp_shard) == (replicate, 32 // replicate)
    assert f"--num-distributed-optimizer-instances {replicate}" in args.split("\n  ")
    assert "--use-distributed-optimizer" in args


def test_megatron_fsdp_replicas_are_its_hsdp(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, {**MOE, "parallelism": {"tp": 1, "pp": 1, "ep": 8, "megatron_fsdp": True,
                                                     "dp_shard": 16}})
    args = _args(render_all(plan))
    assert "--num-distributed-optimizer-instances 2" in args and "--use-megatron-fsdp" in args


@pytest.mark.parametrize(("parallelism", "words"), [
    ({"dp_replicate": 2, "distributed_optimizer": False},
     r"spec.yaml:\d+:\d+: GL240 dp_replicate 2 \(--num-distributed-optimizer-instances\) replicates the "
     "distributed optimizer, and this run has none"),
    # 32 GPUs, ep 16, pp 2: the expert data-parallel group has 1 rank; dp 16 has room for 2 replicas
    ({"dp_replicate": 2, "ep": 16, "pp": 2},
     r"GL240 dp_replicate 2 does not divide the expert data-parallel size 1 = world 32 / \(etp 1 × ep 16 × pp 2\)"),
    ({"dp_replicate": 3}, "GL026 dp_replicate 3 does not divide dp 32"),
])
def test_what_megatron_asserts_of_the_instances_is_refused_where_written(tmp_path: Path, parallelism,
                                                                        words: str) -> None:
    with pytest.raises(PlanError, match=words):
        _hsdp(tmp_path, **parallelism)


def test_megatron_deepspeed_has_no_replicas(tmp_path: Path) -> None:
    data = {**MOE, "framework": "megatron-deepspeed", "model": {"preset": "llama3-8b"},
            "parallelism": {"tp": 1, "pp": 1, "dp_replicate": 2}}
    with pytest.raises(PlanError, match="GL026 framework megatron-deepspeed does not replicate a sharded group "
                                        r"\(dp_replicate 2\); use dp_replicate 1, or framework megatron-lm, fsdp or "
                                        "torchtitan"):
        plan_of(tmp_path, data)


def test_lint_and_import_read_the_instances_back(tmp_path: Path) -> None:
    files = render_all(_hsdp(tmp_path, dp_replicate=2, ep=8))
    scripts = {name: text for name, text in files.items() if name.endswith(".sh") or name.endswith(".sbatch")}
    result = lint_texts(scripts)
    facts = views(next(run for run in result.runs if run.name == "launch.sbatch"))[0]
    assert facts["dp_replicate"].value == 2 and facts["dp_replicate"].source.startswith("megatron_args.sh:")
    assert not [f for f in result.findings if f.severity == "error"]
    # a hand edit Megatron's parallel_state would refuse: 4 instances of an expert data-parallel group of
    # 32 / ep 16 = 2 ranks
    edited = dict(scripts, **{"megatron_args.sh": scripts["megatron_args.sh"].replace(
        "--expert-model-parallel-size 8", "--expert-model-parallel-size 16").replace(
        "--num-distributed-optimizer-instances 2", "--num-distributed-optimizer-instances 4")})
    assert [f.code for f in lint_texts(edited).findings if f.severity == "error"] == ["GL240"]
    out = tmp_path / "out"
    out.mkdir()
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
    imported = yaml.safe_load(import_paths([out]).text)
    assert imported["parallelism"]["dp_replicate"] == 2


@pytest.mark.oracle
def test_megatrons_own_parser_takes_the_instances(trees, tmp_path: Path) -> None:
    """core_v0.16.1 and main: parse_args and validate_args accept the arguments with
    num_distributed_optimizer_instances the plan's dp_replicate (with the distributed optimizer,
    and with Megatron-FSDP's HSDP)."""
    cases, wanted = [], []
    for version in ("core_v0.16", "latest"):
        for label, parallelism in (("distopt", {"tp": 2, "pp": 1, "ep": 4, "dp_replicate": 2,
                                                "distributed_optimizer": True}),
                                   ("mfsdp", {"tp": 1, "pp": 1, "ep": 8, "dp_shard": 8, "megatron_fsdp": True})):
            data = {**MOE, "megatron": {"version": version}, "parallelism": parallelism}
            path = tmp_path / f"{label}-{version}.yaml"
            path.write_text(yaml.safe_dump(data))
            (case,) = cases_of(spec_files(load_spec(path))[0], path.stem)
            plan = plan_of(tmp_path, data, name=f"{label}-{version}-plan.yaml")
            # as launch.sbatch exports it (tp 2 with the distributed optimizer; never with Megatron-FSDP)
            case["env"] = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"} if plan.cuda_device_max_connections_1 else {}
            case["show"] = ["num_distributed_optimizer_instances", "use_distributed_optimizer"]
            cases.append(case)
            wanted.append(plan.dp_replicate)
    assert wanted == [2, 4, 2, 4]
    for case, want, result in zip(cases, wanted, run_parsers(trees, cases), strict=True):
        assert result["ok"], (case["label"], result)
        assert result["shown"] == {"num_distributed_optimizer_instances": want, "use_distributed_optimizer": True}
        assert (result["dp"], result["global"]) == (case["want"]["dp"], case["want"]["global"])
