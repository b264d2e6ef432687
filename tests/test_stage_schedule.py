"""A run in stages is one run: megatron-core's own OptimizerParamScheduler, built from each
stage's generated arguments as Megatron-LM's training.py builds it (sample-based: decay steps
--lr-decay-samples, warmup --lr-warmup-samples, weight-decay steps --train-samples, stepped by the
global batch each iteration), loads the state saved at the end of stage 1 into stage 2 without
assertion, and the learning rate goes on where it left off, to min_lr at the end of the run."""

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
    train_samples branch) builds it, with the defaults of --use-checkpoint-opt_param-scheduler and
    --override-opt_param-scheduler (both off)."""
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
                                   use_checkpoint_opt_param_scheduler=False, override_opt_param_scheduler=False)


def _lr(scheduler) -> float:
    return scheduler.optimizer.param_groups[0]["lr"]


def test_stage_two_resumes_stage_ones_schedule() -> None:
    first, second = _stages()
    assert first["train-samples"] == second["train-samples"]  # the whole run, in both
    gbs1, gbs2 = int(first["global-batch-size"]), int(second["global-batch-size"])
    steps1 = int(first["exit-interval"])  # stage 1 ends (and saves) at its last step
    assert "exit-interval" not in second
    one = _scheduler(first)
    for _ in range(steps1):
        one.step(increment=gbs1)
    saved = one.state_dict()
    two = _scheduler(second)
    two.load_state_dict(saved)  # Megatron's load_checkpoint: asserts on any differing value
    assert two.num_steps == steps1 * gbs1 and _lr(two) == pytest.approx(_lr(one))
    one.step(increment=gbs2)
    two.step(increment=gbs2)
    assert _lr(two) == pytest.approx(_lr(one))  # continuous at the boundary
    remaining = (int(second["train-samples"]) - two.num_steps) // gbs2
    for _ in range(remaining):
        two.step(increment=gbs2)
    assert _lr(two) == pytest.approx(float(second["min-lr"]), rel=1e-3)  # one decay, to the end


def test_a_stage_with_a_schedule_of_its_own_is_refused_on_load() -> None:
    """The check can fail: stage 2 with only its own length and warmup (what each stage wrote
    before) does not load stage 1's state."""
    first, second = _stages()
    one = _scheduler(first)
    one.step(increment=int(first["global-batch-size"]))
    own = int(second["train-samples"]) - int(first["exit-interval"]) * int(first["global-batch-size"])
    two = _scheduler(second, {"train": own, "decay": own, "warmup": own // 100})
    with pytest.raises(AssertionError, match="do not match"):
        two.load_state_dict(one.state_dict())
