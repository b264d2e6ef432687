"""A tiny DeepSpeed training run used as an oracle: ``torchrun ... ds_train.py
--deepspeed_config ds_config.json [--result out.json]``.

It trains a small MLP for two optimizer steps on CPU (gloo) and records what the real DeepSpeed
engine resolved: world size, data-parallel size, train batch, micro batch, accumulation, ZeRO
stage, steps and the scheduler. Rank 0 prints it (``gen-launch-result: {...}``) and writes it to
``--result``. When a plan.json sits beside the config (as gen-launch writes it), every rank
checks the engine against the plan and exits 1 on a mismatch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def skip_shm_op_build() -> None:
    """DeepSpeed JIT-compiles a shared-memory op on CPU at init (12-53 s); it is only used by
    inference_all_reduce, so skip it."""
    import deepspeed.comm.torch  # noqa: F401

    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deepspeed_config", required=True)
    parser.add_argument("--result")
    args, _ = parser.parse_known_args()

    import deepspeed
    import torch

    skip_shm_op_build()
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    engine, _, _, scheduler = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=args.deepspeed_config)
    micro = engine.train_micro_batch_size_per_gpu()
    dtype = next(engine.module.parameters()).dtype
    for _ in range(2 * engine.gradient_accumulation_steps()):
        x = torch.randn(micro, 16, dtype=dtype)
        loss = engine(x).float().pow(2).mean()
        engine.backward(loss)
        engine.step()
    result = {
        "world_size": torch.distributed.get_world_size(),
        "dp": engine.dp_world_size,
        "train_batch_size": engine.train_batch_size(),
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": engine.gradient_accumulation_steps(),
        "zero_stage": engine.zero_optimization_stage(),
        "global_steps": engine.global_steps,
        "scheduler": type(scheduler).__name__ if scheduler else None,
        "dtype": str(dtype),
    }
    if engine.global_rank == 0:
        print("gen-launch-result: " + json.dumps(result, sort_keys=True), flush=True)
        if args.result:
            with open(args.result, "w", encoding="utf-8") as out:
                json.dump(result, out)
    mismatches = check_against_plan(Path(args.deepspeed_config).parent / "plan.json", result)
    # end the process group before exiting: a rank that exits with gloo's threads still running
    # can abort in teardown ("terminate called without an active exception", seen once in CI)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    if mismatches:
        print(f"rank {engine.global_rank}: engine differs from the plan: {mismatches}", flush=True)
        sys.exit(1)


def check_against_plan(plan_file: Path, result: dict) -> dict:
    if not plan_file.exists():
        return {}
    plan = json.loads(plan_file.read_text(encoding="utf-8"))
    expected = {
        "world_size": plan["cluster"]["world_size"],
        "dp": plan["parallelism"]["dp"],
        "train_batch_size": plan["batch"]["global_batch_size"],
        "train_micro_batch_size_per_gpu": plan["batch"]["micro_batch_size"],
        "gradient_accumulation_steps": plan["batch"]["gradient_accumulation_steps"],
        "zero_stage": plan["parallelism"]["zero_stage"],
    }
    return {k: (result[k], v) for k, v in expected.items() if result[k] != v}

if __name__ == "__main__":
    main()
