"""Host memory of the most loaded node while a run loads (generator/estimate/host.py, GL025):
each framework's load path as its code reads it, against the node's memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.estimate.host import node_capacity, optimizer_rank_zeros
from generator.estimate.memory import GIB, Layout, rank_params
from generator.estimate.params import count_params
from generator.estimate.plan import layout_of, shape_of

from .helpers import plan_of, spec_dict

LLAMA70B = {"preset": "llama3-70b"}


def _megatron(tmp_path: Path, name: str, parallelism: dict, checkpoint: dict, cluster: dict | None = None):
    data = spec_dict(parallelism=parallelism, checkpoint=checkpoint,
                     cluster={"nodes": 8, "gpus_per_node": 8, "gpu": "h100-80gb", "allow_oversize": True,
                              **(cluster or {})},
                     batch={"micro_batch_size": 1, "gradient_accumulation_steps": None, "global_batch_size": 64})
    data["model"] = LLAMA70B  # the preset alone (spec_dict would merge it into BASE's shape)
    return plan_of(tmp_path, data, f"{name}.yaml")


def test_a_torch_format_resume_reads_every_ranks_file_into_cpu_memory(tmp_path: Path) -> None:
    """Llama-3-70B, tp 8, resumed from a torch-format checkpoint without the distributed
    optimizer: each of a node's 8 ranks torch.load()s 2-byte weights and 12 bytes of fp32 main
    weights and Adam moments for its 1/8 of the parameters; on a 512 GiB node that is GL025."""
    plan = _megatron(tmp_path, "torch", {"tp": 8, "pp": 1, "distributed_optimizer": False},
                     {"dir": "/ckpt/70b", "format": "torch"}, {"host_memory_gib": 512})
    host = plan.estimate().host
    per_rank = count_params(shape_of(plan)).total / 8
    assert host.bytes_per_node == pytest.approx(8 * 14 * per_rank)
    assert 900 < host.bytes_per_node / GIB < 950 and host.fits is False
    assert any(w.code == "GL025" and "512 GiB" in w.message for w in plan.warnings)
    dist = _megatron(tmp_path, "dist", {"tp": 8, "pp": 1, "distributed_optimizer": True},
                     {"dir": "/ckpt/70b", "format": "torch_dist"}, {"host_memory_gib": 512})
    assert dist.estimate().host.bytes_per_node == 0.0
    assert not any(w.code == "GL025" for w in dist.warnings)


def test_the_distributed_optimizers_file_is_read_by_data_parallel_rank_zero(tmp_path: Path) -> None:
    """With the distributed optimizer a torch-format checkpoint keeps the optimizer's state in
    distrib_optim.pt, which data-parallel rank 0 of each shard reads whole: with tp 2 and dp 4
    two of the first node's eight ranks do, each 12 bytes per parameter of its shard."""
    plan = _megatron(tmp_path, "dp0", {"tp": 2, "pp": 4, "distributed_optimizer": True},
                     {"dir": "/ckpt/70b", "format": "torch"})
    layout = layout_of(plan)
    assert (layout.tp, layout.dp) == (2, 8)
    assert optimizer_rank_zeros(layout, 8) == 2
    per_rank = sum(rank_params(shape_of(plan), layout))
    assert plan.estimate().host.bytes_per_node == pytest.approx(8 * 2 * per_rank + 2 * 12 * per_rank)
    assert plan.estimate().host.capacity is None and plan.estimate().host.fits is None
    # weights only when fine-tuning from converted weights
    tuned = _megatron(tmp_path, "ft", {"tp": 2, "pp": 4, "distributed_optimizer": True},
                      {"finetune_from": "/ckpt/converted"})
    assert tuned.estimate().host.bytes_per_node == pytest.approx(8 * 2 * per_rank)


@pytest.mark.parametrize(("tp", "cp", "dp", "per_node", "zeros"),
                         [(8, 1, 4, 8, 8), (2, 1, 4, 8, 2), (1, 1, 16, 8, 1), (2, 2, 2, 8, 2), (4, 1, 1, 8, 8)])
def test_optimizer_rank_zeros_counts_the_first_nodes_data_parallel_leaders(tp, cp, dp, per_node, zeros) -> None:
    assert optimizer_rank_zeros(Layout(tp=tp, cp=cp, dp=dp, pp=2), per_node) == zeros


def test_the_trainer_loads_a_copy_per_process_unless_zero3_or_fsdp(tmp_path: Path) -> None:
    """from_pretrained builds the whole model (2 bytes per parameter) in every process; ZeRO-3's
    zero.Init keeps each rank's partition; FSDP's cpu_ram_efficient_loading one copy per node."""
    base = {"launch": {"launcher": "accelerate"},
            "cluster": {"nodes": 2, "gpus_per_node": 8, "gpu": "h100-80gb"},
            "batch": {"micro_batch_size": 1, "gradient_accumulation_steps": 4, "global_batch_size": None}}

    def host(name: str, **overrides):
        data = spec_dict(**{**base, **overrides})
        data["model"] = {"preset": "llama3-8b"}
        plan = plan_of(tmp_path, data, f"{name}.yaml")
        return plan.estimate().host, 2 * count_params(shape_of(plan)).total

    zero2, model = host("z2", framework="deepspeed", parallelism={"tp": 1, "pp": 1, "zero_stage": 2})
    assert zero2.bytes_per_node == pytest.approx(8 * model)
    zero3, _ = host("z3", framework="deepspeed", parallelism={"tp": 1, "pp": 1, "zero_stage": 3})
    assert zero3.bytes_per_node == pytest.approx(model / 16 * 8)
    fsdp, _ = host("fsdp", framework="fsdp", parallelism={"tp": 1, "pp": 1})
    assert fsdp.bytes_per_node == pytest.approx(model)


def test_the_nodes_memory_comes_from_the_cluster_else_slurm_mem(tmp_path: Path) -> None:
    def capacity(cluster: dict, slurm: dict):
        data = spec_dict(cluster={"nodes": 2, "gpus_per_node": 8, "gpu": "h100-80gb", **cluster}, slurm=slurm)
        return node_capacity(plan_of(tmp_path, data, "c.yaml").spec)

    assert capacity({}, {"mem": "500G"}) == (500 * GIB, "slurm.mem")
    assert capacity({}, {"mem": "1T"}) == (1024 * GIB, "slurm.mem")
    assert capacity({}, {"mem": "256000"}) == (256000 * (1 << 20), "slurm.mem")  # megabytes
    assert capacity({}, {"mem": "0"}) == (None, None)  # all of the node's: unknown here
    assert capacity({"host_memory_gib": 2048}, {"mem": "500G"}) == (2048 * GIB, "cluster.host_memory_gib")


def test_a_fresh_megatron_run_loads_nothing(tmp_path: Path) -> None:
    plan = _megatron(tmp_path, "fresh", {"tp": 8, "pp": 1}, {"dir": None})
    assert plan.estimate().host is None
    assert plan.estimate().to_json()["memory"]["host_at_load"] is None
