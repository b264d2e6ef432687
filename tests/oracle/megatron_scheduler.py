"""megatron-core's own OptimizerParamScheduler, built from a generated megatron_args.sh as
Megatron-LM's training.py builds it (get_optimizer_param_scheduler): with --train-samples, its
steps are the sample counts; with --train-iters, the iteration counts × the global batch (it is
stepped by the global batch each iteration either way); the weight decay constant over
--train-samples (or iterations × global batch); --use-checkpoint-opt_param-scheduler and
--override-opt_param-scheduler as given."""

from __future__ import annotations

import re


def megatron_flags(text: str) -> dict[str, str]:
    """A megatron_args.sh's arguments, {flag without dashes: its word} (switches: "")."""
    pairs = re.findall(r"^\s+--([\w-]+)(?: (\S+))?$", text, re.M)
    return {flag: value for flag, value in pairs}


def scheduler(args: dict[str, str], own: dict[str, int] | None = None):
    import torch
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

    if "train-samples" in args:
        values = {"train": int(args["train-samples"]), "warmup": int(args.get("lr-warmup-samples", 0)),
                  "decay": int(args.get("lr-decay-samples", args["train-samples"]))}
    else:
        gbs = int(args["global-batch-size"])
        iters = int(args["train-iters"])
        values = {"train": iters * gbs, "warmup": int(args.get("lr-warmup-iters", 0)) * gbs,
                  "decay": int(args.get("lr-decay-iters", iters)) * gbs}
    values.update(own or {})
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.0)
    wd = float(args["weight-decay"])
    return OptimizerParamScheduler(optimizer, init_lr=0.0, max_lr=float(args["lr"]), min_lr=float(args["min-lr"]),
                                   lr_warmup_steps=values["warmup"], lr_decay_steps=values["decay"],
                                   lr_decay_style=args["lr-decay-style"], start_wd=wd, end_wd=wd,
                                   wd_incr_steps=values["train"], wd_incr_style="constant",
                                   use_checkpoint_opt_param_scheduler="use-checkpoint-opt_param-scheduler" in args,
                                   override_opt_param_scheduler="override-opt_param-scheduler" in args)


def lr(scheduler_) -> float:
    return scheduler_.optimizer.param_groups[0]["lr"]
