"""Oracle: the real DeepSpeed (0.19.8, CPU) accepts every generated ds_config.json with the
plan's dp and resolves the same batch; a 2-process run trains with it.

The recipe: a real 1-process gloo group and deepspeed.comm (without
them DeepSpeedConfig silently ignores the mpu), the shm-op JIT skipped, and the scheduler built
as the engine does, since DeepSpeedConfig alone does not construct it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings

from generator.artifacts import render_all
from generator.calculator.resolve import resolve
from generator.plan.plan import Plan
from generator.run import load_spec

from .conftest import ROOT, SAMPLES, require_oracle
from .helpers import plan_of, spec_dict
from .test_property import valid_specs

pytestmark = pytest.mark.oracle
DS_SAMPLES = [s for s in SAMPLES if "ds_config.json" in render_all(resolve(load_spec(s)))]


class FakeMPU:
    """What DeepSpeedConfig asks a Megatron-style mpu for."""

    def __init__(self, dp: int) -> None:
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp

    def get_data_parallel_rank(self) -> int:
        return 0


@pytest.fixture(scope="module")
def deepspeed_config(tmp_path_factory: pytest.TempPathFactory):
    require_oracle("torch")
    deepspeed = require_oracle("deepspeed")
    import torch.distributed as dist

    from tests.oracle.ds_train import skip_shm_op_build

    skip_shm_op_build()
    if not dist.is_initialized():
        store = tmp_path_factory.mktemp("gloo") / "store"
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    deepspeed.init_distributed(dist_backend="gloo")
    from deepspeed.runtime.config import DeepSpeedConfig

    return DeepSpeedConfig


def check_with_deepspeed(DeepSpeedConfig, plan: Plan, text: str) -> None:
    config = json.loads(text)
    parsed = DeepSpeedConfig(config, mpu=FakeMPU(plan.dp))
    assert (parsed.train_batch_size, parsed.train_micro_batch_size_per_gpu,
            parsed.gradient_accumulation_steps) == (
        plan.global_batch_size, plan.micro_batch_size, plan.gradient_accumulation_steps)
    assert parsed.zero_optimization_stage == plan.zero_stage
    assert parsed.gradient_clipping == plan.spec.training.gradient_clipping
    assert parsed.bfloat16_config.enabled == (plan.spec.training.precision == "bf16")
    assert parsed.float16_config.enabled == (plan.spec.training.precision == "fp16")
    if "scheduler" in config:
        build_scheduler(config, plan)


def build_scheduler(config: dict, plan: Plan) -> None:
    """Construct the scheduler as DeepSpeedEngine._scheduler_from_config does."""
    import torch
    from deepspeed.runtime import lr_schedules

    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=plan.lr)
    kind = config["scheduler"]["type"]
    cls = getattr(lr_schedules, kind, None) or getattr(torch.optim.lr_scheduler, kind)
    scheduler = cls(optimizer, **config["scheduler"]["params"])
    assert scheduler.warmup_num_steps == plan.schedule.warmup_iters  # not silently clamped
    if hasattr(scheduler, "total_num_steps"):
        assert scheduler.total_num_steps == plan.schedule.train_iters


@pytest.mark.parametrize("sample", DS_SAMPLES, ids=[s.stem for s in DS_SAMPLES])
def test_samples_accepted_by_deepspeed(deepspeed_config, sample: Path) -> None:
    plan = resolve(load_spec(sample))
    check_with_deepspeed(deepspeed_config, plan, render_all(plan)["ds_config.json"])


def test_deepspeed_rejects_a_drifted_config(deepspeed_config) -> None:
    """The oracle can fail: the same config at another dp is refused by DeepSpeed."""
    plan = resolve(load_spec(ROOT / "samples" / "seed-pretrain-256.yaml"))
    config = json.loads(render_all(plan)["ds_config.json"])
    with pytest.raises(AssertionError, match=r"4096 != 16 \* 8 \* 24"):
        deepspeed_config(config, mpu=FakeMPU(24))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(valid_specs())
def test_random_plans_accepted_by_deepspeed(deepspeed_config, data: dict) -> None:
    assume(data["framework"] != "megatron-lm")  # no DeepSpeed JSON there
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        plan = plan_of(Path(tmp), data)
    check_with_deepspeed(deepspeed_config, plan, render_all(plan)["ds_config.json"])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_process_training_run(tmp_path: Path) -> None:
    """torchrun, 2 CPU processes (gloo): DeepSpeed trains two steps with the generated config."""
    require_oracle("deepspeed")
    data = spec_dict(framework="deepspeed",
                     cluster={"nodes": 1, "gpus_per_node": 2, "gpu": "cpu"},
                     parallelism={"tp": 1, "pp": 1, "zero_stage": 2},
                     batch={"micro_batch_size": 2, "gradient_accumulation_steps": 3},
                     training={"precision": "bf16", "train_iters": 20, "warmup": {"iters": 2}})
    plan = plan_of(tmp_path, data)
    config = tmp_path / "ds_config.json"
    config.write_text(render_all(plan)["ds_config.json"])
    result = tmp_path / "result.json"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1",
                f"--nproc-per-node={plan.procs_per_node}", "--master-addr=127.0.0.1",
                f"--master-port={free_port()}", str(ROOT / "tests" / "oracle" / "ds_train.py"),
                "--deepspeed_config", str(config), "--result", str(result)]
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(torchrun, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = json.loads(result.read_text())
    assert got == {
        "world_size": 2, "train_batch_size": 12, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3,
        "dp": 2, "zero_stage": 2, "global_steps": 2, "scheduler": "WarmupCosineLR",
        "dtype": "torch.bfloat16",
    }
    assert (got["train_batch_size"], got["dp"]) == (plan.global_batch_size, plan.dp)


def test_offload_config_accepted_by_deepspeed(deepspeed_config, tmp_path: Path) -> None:
    data = spec_dict(framework="deepspeed", parallelism={"tp": 1, "pp": 1, "zero_stage": 3,
                                                          "zero_offload": "optimizer_and_params"})
    plan = plan_of(tmp_path, data)
    config = json.loads(render_all(plan)["ds_config.json"])
    parsed = deepspeed_config(config, mpu=FakeMPU(plan.dp))
    assert str(parsed.zero_config.offload_optimizer.device).endswith("cpu")
    assert str(parsed.zero_config.offload_param.device).endswith("cpu")
