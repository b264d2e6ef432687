"""Entry point for the ``srun`` launch style (one task per process, no torchrun), as Megatron-LM
sees it: RANK, LOCAL_RANK and WORLD_SIZE come only from the environment.

Checks them against Slurm's own variables and the plan, parses the Megatron batch arguments the
generated script passes, and runs a gloo all-reduce over the whole world. Rank 0 prints
``gen-launch-result: {...}`` (with the arguments it did not parse, so tests can see that they
arrived literally); any mismatch exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--micro-batch-size", "--global-batch-size", "--tensor-model-parallel-size",
                 "--pipeline-model-parallel-size", "--context-parallel-size"):
        parser.add_argument(flag, type=int, default=1)
    args, rest = parser.parse_known_args()

    env = {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR",
                                          "MASTER_PORT", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS")}
    problems = []
    if env["RANK"] != env["SLURM_PROCID"] or env["LOCAL_RANK"] != env["SLURM_LOCALID"]:
        problems.append(f"RANK/LOCAL_RANK {env['RANK']}/{env['LOCAL_RANK']} != Slurm's "
                        f"{env['SLURM_PROCID']}/{env['SLURM_LOCALID']}")
    if env["WORLD_SIZE"] != env["SLURM_NTASKS"]:
        problems.append(f"WORLD_SIZE {env['WORLD_SIZE']} != SLURM_NTASKS {env['SLURM_NTASKS']}")
    world, rank = int(env["WORLD_SIZE"]), int(env["RANK"])
    plan_file = Path(os.environ["GEN_LAUNCH_DIR"]) / "plan.json"
    plan = json.loads(plan_file.read_text(encoding="utf-8"))
    if world != plan["cluster"]["world_size"]:
        problems.append(f"WORLD_SIZE {world} != plan {plan['cluster']['world_size']}")
    model_parallel = args.tensor_model_parallel_size * args.pipeline_model_parallel_size * \
        args.context_parallel_size
    dp = world // model_parallel
    if world % model_parallel or dp != plan["parallelism"]["dp"]:
        problems.append(f"dp {world}/{model_parallel} != plan {plan['parallelism']['dp']}")
    if args.global_batch_size % (args.micro_batch_size * dp):
        problems.append(f"global {args.global_batch_size} not divisible by micro {args.micro_batch_size} × dp {dp}")

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=world)  # env:// from MASTER_ADDR/PORT
    total = torch.tensor([rank])
    dist.all_reduce(total)
    if total.item() != world * (world - 1) // 2:
        problems.append(f"all-reduce of ranks gave {total.item()}")
    hosts = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    dist.destroy_process_group()
    if rank == 0:
        print("gen-launch-result: " + json.dumps({
            "world_size": world, "dp": dp, "hosts": sorted(set(hosts)),
            "micro_batch_size": args.micro_batch_size, "global_batch_size": args.global_batch_size,
            "num_microbatches": args.global_batch_size // (args.micro_batch_size * dp),
            "other_args": rest, "cpus_per_task": os.environ.get("SLURM_CPUS_PER_TASK"),
        }, sort_keys=True), flush=True)
    if problems:
        print(f"rank {rank}: {problems}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
