"""Oracle worker: torchtitan's own ConfigManager parses generated command lines, and its own
ParallelDims validates the degrees at the plan's world size (CPU, no process group).

Reads a JSON list of cases from stdin, {"folder": the generated files, "argv": the words after
`-m torchtitan.train`, "world_size": N}; prints one JSON line per case: what torchtitan made of
them, or the error it raised. The config module is imported by torchtitan's --module (the
folder first on sys.path), as torchrun's processes import it with launch.sbatch's PYTHONPATH."""

from __future__ import annotations

import contextlib
import io
import json
import sys


def parsed(case: dict) -> dict:
    from torchtitan.config.manager import ConfigManager
    from torchtitan.distributed.parallel_dims import ParallelDims

    sys.path.insert(0, case["folder"])
    sys.modules.pop("torchtitan_config", None)  # each case's own module of that name
    said = io.StringIO()
    try:
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            config = ConfigManager().parse_args(case["argv"])
            dims = ParallelDims.from_config(config.parallelism, case["world_size"])
    except (Exception, SystemExit) as exc:  # what torchtitan refuses, reported to the test
        return {"error": f"{type(exc).__name__}: {exc} {' '.join(said.getvalue().split())[-600:]}"}
    finally:
        sys.path.remove(case["folder"])
    p, t = config.parallelism, config.training
    model = config.model_spec.model
    stages = None
    if dims.pp > 1:  # the virtual stages torchtitan's pipeline builder would make (CPU, no mesh)
        from torchtitan.distributed.pipeline_parallel import _get_pipeline_metadata

        try:
            stages = _get_pipeline_metadata(dims, p, model)[0]
        except ValueError as exc:
            return {"error": f"pipeline: {exc}"}
    return {
        "pp_stages": stages,
        "dims": {"dp_replicate": dims.dp_replicate, "dp_shard": dims.dp_shard, "cp": dims.cp, "tp": dims.tp,
                 "pp": dims.pp, "ep": dims.ep},
        "local_batch_size": t.local_batch_size, "global_batch_size": t.global_batch_size,
        "seq_len": t.seq_len, "steps": t.steps, "disable_cuda_graphs": t.disable_cuda_graphs,
        "pp_schedule": p.pipeline_parallel_schedule, "sequence_parallel": p.enable_sequence_parallel,
        "pp_microbatch_size": p.pipeline_parallel_microbatch_size,
        "pp_layers_per_stage": p.pipeline_parallel_layers_per_stage,
        "activation_checkpoint": type(config.activation_checkpoint).__qualname__,
        "compile": config.compile.enable, "compile_components": list(config.compile.components),
        "async_tp": config.compile.enable_async_tensor_parallel,
        "checkpoint": {"enable": config.checkpoint.enable, "folder": config.checkpoint.folder,
                       "interval": config.checkpoint.interval},
        "lr": config.optimizer.param_groups[0].optimizer_kwargs["lr"]
        if hasattr(config.optimizer, "param_groups") else None,
        "lr_scheduler": {"warmup_steps": config.lr_scheduler.warmup_steps,
                         "decay_type": config.lr_scheduler.decay_type,
                         "decay_ratio": config.lr_scheduler.decay_ratio,
                         "min_lr_factor": config.lr_scheduler.min_lr_factor},
        "model": {"layers": len(model.layers), "dim": model.dim, "vocab_size": model.vocab_size},
    }


def main() -> None:
    for case in json.loads(sys.stdin.read()):
        print(json.dumps(parsed(case), default=str), flush=True)


if __name__ == "__main__":
    main()
