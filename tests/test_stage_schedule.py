"""A run in stages is one run: megatron-core's own OptimizerParamScheduler, built from each
stage's generated arguments as Megatron-LM's training.py builds it (sample-based: decay steps
--lr-decay-samples, warmup --lr-warmup-samples, weight-decay steps --train-samples, stepped by the
global batch each iteration; --use-checkpoint-opt_param-scheduler as given), loads the state saved
at the end of stage 1 into stage 2 without assertion, and the learning rate goes on where it left
off, to min_lr at the end of the run."""

from __future__ import annotations

import re

import pytest

from generator.artifacts import spec_files
from generator.spec.model import load_spec

from .conftest import ROOT, require_oracle

pytestmark = pytest.mark.oracle
SAMPLE = ROOT / "samples" / "llama3-8b-progressive.yaml"


def _stages() -> list[dict[str, str]]:
    """Each stage's Megatron arguments, {flag without dashes: its word}, in stage order."""
    files = spec_files(load_spec(SAMPLE))[0]
    out = []
    for name in sorted(n for n in files if n.endswith("megatron_args.sh")):
        pairs = re.findall(r"^\s+--([\w-]+)(?: (\S+))?$", files[name], re.M)
        out.append({flag: value for flag, value in pairs})
    return out


def _scheduler(args: dict[str, str], own: dict[str, int] | None = None):
    """OptimizerParamScheduler as get_optimizer_param_scheduler (megatron/training/training.py,
    train_samples branch) builds it from the arguments (--override-opt_param-scheduler off)."""
    torch = require_oracle("torch")
    require_oracle("megatron.core")
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

    values = {"train": int(args["train-samples"]), "warmup": int(args["lr-warmup-samples"]),
              "decay": int(args["lr-decay-samples"]), **(own or {})}
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.0)
    wd = float(args["weight-decay"])
    return OptimizerParamScheduler(optimizer, init_lr=0.0, max_lr=float(args["lr"]), min_lr=float(args["min-lr"]),
                                   lr_warmup_steps=values["warmup"], lr_decay_steps=values["decay"],
                                   lr_decay_style=args["lr-decay-style"], start_wd=wd, end_wd=wd,
                                   wd_incr_steps=values["train"], wd_incr_style="constant",
                                   use_checkpoint_opt_param_scheduler="use-checkpoint-opt_param-scheduler" in args,
                                   override_opt_param_scheduler=False)


def _lr(scheduler) -> float:
    return scheduler.optimizer.param_groups[0]["lr"]


def test_stage_two_resumes_stage_ones_schedule() -> None:
    first, second = _stages()
    assert first["lr-decay-samples"] == second["lr-decay-samples"] == second["train-samples"]  # the whole run
    assert first["lr-warmup-samples"] == second["lr-warmup-samples"]
    gbs1, gbs2 = int(first["global-batch-size"]), int(second["global-batch-size"])
    steps1 = int(first["train-samples"]) // gbs1  # stage 1 trains to its own end
    assert "use-checkpoint-opt_param-scheduler" in second and "use-checkpoint-opt_param-scheduler" not in first
    one = _scheduler(first)
    for _ in range(steps1):
        one.step(increment=gbs1)
    saved = one.state_dict()
    two = _scheduler(second)
    two.load_state_dict(saved)  # what Megatron's load_checkpoint does on resume
    assert two.num_steps == steps1 * gbs1 and _lr(two) == pytest.approx(_lr(one))
    one.step(increment=gbs2)
    two.step(increment=gbs2)
    assert _lr(two) == pytest.approx(_lr(one))  # continuous at the boundary
    remaining = (int(second["train-samples"]) - two.num_steps) // gbs2
    for _ in range(remaining):
        two.step(increment=gbs2)
    assert _lr(two) == pytest.approx(float(second["min-lr"]), rel=1e-3)  # one decay, to the end


def test_without_the_checkpoints_schedule_stage_two_is_refused_on_load() -> None:
    """The check can fail: stage 2's arguments without --use-checkpoint-opt_param-scheduler do not
    load stage 1's state (its --train-samples, the weight-decay steps, differ), nor do arguments
    with a schedule of the stage's own (what each stage wrote before)."""
    first, second = _stages()
    one = _scheduler(first)
    one.step(increment=int(first["global-batch-size"]))
    plain = {k: v for k, v in second.items() if k != "use-checkpoint-opt_param-scheduler"}
    with pytest.raises(AssertionError, match="weight decay iterations do not match|do not match"):
        _scheduler(plain).load_state_dict(one.state_dict())
    own = int(second["train-samples"]) - int(first["train-samples"])
    with pytest.raises(AssertionError, match="do not match"):
        _scheduler(plain, {"train": own, "decay": own, "warmup": own // 100}).load_state_dict(one.state_dict())
