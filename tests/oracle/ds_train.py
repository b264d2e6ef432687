"""A tiny DeepSpeed training run used as an oracle: ``torchrun ... ds_train.py
--deepspeed_config ds_config.json --result out.json``.

It trains a small MLP for two optimizer steps on CPU (gloo) and records what the real DeepSpeed
engine resolved: train batch, micro batch, accumulation, data-parallel size, ZeRO stage, steps
and the scheduler's LR. Rank 0 writes the JSON result.
"""

from __future__ import annotations

import argparse
import json
import sys


def skip_shm_op_build() -> None:
    """DeepSpeed JIT-compiles a shared-memory op on CPU at init (12-53 s); it is only used by
    inference_all_reduce, so skip it (reference/ci-oracles.md §5.2)."""
    import deepspeed.comm.torch  # noqa: F401

    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deepspeed_config", required=True)
    parser.add_argument("--result", required=True)
    args = parser.parse_args()

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
    if engine.global_rank == 0:
        with open(args.result, "w", encoding="utf-8") as out:
            json.dump({
                "train_batch_size": engine.train_batch_size(),
                "train_micro_batch_size_per_gpu": micro,
                "gradient_accumulation_steps": engine.gradient_accumulation_steps(),
                "dp": engine.dp_world_size,
                "zero_stage": engine.zero_optimization_stage(),
                "global_steps": engine.global_steps,
                "scheduler": type(scheduler).__name__ if scheduler else None,
                "dtype": str(dtype),
            }, out)


if __name__ == "__main__":
    main()
