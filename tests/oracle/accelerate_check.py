"""Entry point for the ``accelerate`` launch style: started by ``accelerate launch`` on every
node (machine rank from Slurm), it checks what accelerate set up against the plan: the world
across both nodes (a gloo all-reduce and the host names), the FSDP2 settings accelerate hands
the training process, and the Trainer arguments' batch. Rank 0 prints
``gen-launch-result: {...}``; any mismatch exits 1."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--per_device_train_batch_size", "--gradient_accumulation_steps", "--max_steps"):
        parser.add_argument(flag, type=int, required=True)
    args, _ = parser.parse_known_args()

    import torch
    import torch.distributed as dist
    from accelerate.utils import FullyShardedDataParallelPlugin

    dist.init_process_group("gloo")
    world = dist.get_world_size()
    total = torch.ones(1)
    dist.all_reduce(total)
    hosts: list = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    fsdp = FullyShardedDataParallelPlugin()
    result = {"world_size": world, "all_reduce": int(total.item()), "hosts": sorted(set(hosts)),
              "use_fsdp": os.environ.get("ACCELERATE_USE_FSDP"), "fsdp_version": fsdp.fsdp_version,
              "reshard_after_forward": bool(fsdp.reshard_after_forward),
              "micro_batch_size": args.per_device_train_batch_size,
              "gradient_accumulation_steps": args.gradient_accumulation_steps,
              "global_batch_size": args.per_device_train_batch_size * args.gradient_accumulation_steps * world,
              "max_steps": args.max_steps}
    plan = json.loads((Path(os.environ["GEN_LAUNCH_DIR"]) / "plan.json").read_text(encoding="utf-8"))
    expected = {"world_size": plan["cluster"]["world_size"], "all_reduce": plan["cluster"]["world_size"],
                "global_batch_size": plan["batch"]["global_batch_size"],
                "max_steps": plan["schedule"]["train_iters"], "fsdp_version": 2,
                "reshard_after_forward": plan["parallelism"]["zero_stage"] == 3}
    mismatches = {k: (result[k], v) for k, v in expected.items() if result[k] != v}
    if dist.get_rank() == 0:
        print("gen-launch-result: " + json.dumps(result, sort_keys=True), flush=True)
    if mismatches:
        print(f"rank {dist.get_rank()}: accelerate's setup differs from the plan: {mismatches}", flush=True)
        sys.exit(1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
