"""A CPU stand-in for a Hugging Face Trainer entry point (trainer_args.sh's TrainingArguments),
for the executors' end-to-end test: what the Trainer does with the arguments that carry a run
across restarts, and nothing else.

- ``--output_dir DIR``: resume at the newest DIR/checkpoint-N (none: 0), as the entry point's
  ``trainer.train(resume_from_checkpoint=...)`` on the last checkpoint does;
- ``--max_steps N``: train until step N; ``--save_steps K``: save DIR/checkpoint-K, -2K, ... and
  at the end.

The ranks (RANK and WORLD_SIZE from the environment: torchrun's, DeepSpeed's or accelerate's)
step together over a gloo process group; rank 0 writes the checkpoints and appends
``{"start", "end", "exit", "world"}`` to DIR/progress.jsonl. GEN_LAUNCH_STANDIN_STEP_S seconds per
step (default 1)."""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path


def newest(folder: Path) -> int:
    steps = [int(m.group(1)) for p in folder.glob("checkpoint-*") if (m := re.fullmatch(r"checkpoint-(\d+)", p.name))]
    return max(steps, default=0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max_steps", type=int, required=True)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--save_steps", type=int, required=True)
    args, _ = parser.parse_known_args()
    step_s = float(os.environ.get("GEN_LAUNCH_STANDIN_STEP_S", "1"))

    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    out = Path(args.output_dir)
    start = newest(out)
    step = start

    def save() -> None:
        dist.barrier()
        if rank == 0:
            folder = out / f"checkpoint-{step}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
        dist.barrier()

    while step < args.max_steps:
        time.sleep(step_s)
        step += 1
        if step % args.save_steps == 0:
            save()
    if step > start and step % args.save_steps:
        save()
    if rank == 0:
        record = {"start": start, "end": step, "exit": "done", "world": world}
        with (out / "progress.jsonl").open("a", encoding="utf-8") as progress:
            progress.write(json.dumps(record) + "\n")
        print("gen-launch-result: " + json.dumps(record), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
