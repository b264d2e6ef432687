"""A CPU stand-in for Megatron-LM's training loop, for the Slurm test cluster: what Megatron does
with the arguments that carry a run across allocations, and nothing else.

- ``--load DIR``: resume at the iteration DIR/latest_checkpointed_iteration.txt names (none: 0);
- ``--train-iters N``: train until iteration N (a job that resumes at N trains nothing, saves
  nothing and ends);
- ``--save DIR`` / ``--save-interval K``: save every K iterations and at the end;
- ``--exit-duration-in-mins M``: after each iteration, once M minutes have passed since training
  started, save and exit 0 (Megatron's check in train(), all ranks agreeing).

The ranks (srun: RANK and WORLD_SIZE from the environment) step together over a gloo process
group; rank 0 writes the checkpoint (an ``iter_NNNNNNN`` folder and the tracker file, as Megatron
names them) and appends ``{"job", "start", "end", "exit"}`` to DIR/progress.jsonl. The environment
scales time for the test: GEN_LAUNCH_STANDIN_MINUTE_S seconds per minute (default 60),
GEN_LAUNCH_STANDIN_STEP_S seconds per iteration (default 1).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

TRACKER = "latest_checkpointed_iteration.txt"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--train-iters", type=int, required=True)
    parser.add_argument("--save", required=True)
    parser.add_argument("--load", required=True)
    parser.add_argument("--save-interval", type=int, required=True)
    parser.add_argument("--exit-duration-in-mins", type=int, default=None)
    args, _ = parser.parse_known_args()
    minute = float(os.environ.get("GEN_LAUNCH_STANDIN_MINUTE_S", "60"))
    step = float(os.environ.get("GEN_LAUNCH_STANDIN_STEP_S", "1"))

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    tracker = Path(args.load) / TRACKER
    start = int(tracker.read_text()) if tracker.exists() else 0
    iteration, reason = start, "done"
    began = time.monotonic()

    def save() -> None:
        dist.barrier()
        if rank == 0:
            folder = Path(args.save) / f"iter_{iteration:07d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "state.json").write_text(json.dumps({"iteration": iteration}))
            (Path(args.save) / TRACKER).write_text(str(iteration))
        dist.barrier()

    while iteration < args.train_iters:
        time.sleep(step)
        iteration += 1
        if iteration % args.save_interval == 0:
            save()
        if args.exit_duration_in_mins is not None:
            spent = torch.tensor([(time.monotonic() - began) / minute])
            dist.all_reduce(spent, op=dist.ReduceOp.MAX)  # every rank decides alike
            if spent.item() > args.exit_duration_in_mins and iteration < args.train_iters:
                reason = "exit-duration"
                break
    if iteration > start and iteration % args.save_interval:
        save()
    if rank == 0:
        record = {"job": os.environ.get("SLURM_JOB_ID"), "start": start, "end": iteration, "exit": reason}
        with (Path(args.save) / "progress.jsonl").open("a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
        print("gen-launch-result: " + json.dumps(record), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
