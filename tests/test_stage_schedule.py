"""A run in stages is one run: megatron-core's own OptimizerParamScheduler, built from each
stage's generated arguments as Megatron-LM's training.py builds it (sample-based: decay steps
--lr-decay-samples, warmup --lr-warmup-samples, weight-decay steps --train-samples, stepped by the
global batch each iteration; --use-checkpoint-opt_param-scheduler as given), loads the state saved
at the end of stage 1 into stage 2 without assertion, and the learning rate goes on where it left
off, to min_lr at the end of the run."""

from __future__ import annotations

import pytest

from generator.artifacts import spec_files
from generator.run import load_spec

from .conftest import ROOT, require_oracle
from .oracle.megatron_scheduler import lr as _lr
from .oracle.megatron_scheduler import megatron_flags, scheduler

pytestmark = pytest.mark.oracle
SAMPLE = ROOT / "samples" / "llama3-8b-progressive.yaml"


def _stages() -> list[dict[str, str]]:
    """Each stage's Megatron arguments, {flag without dashes: its word}, in stage order."""
    files = spec_files(load_spec(SAMPLE))[0]
    return [megatron_flags(files[name]) for name in sorted(n for n in files if n.endswith("megatron_args.sh"))]


def _scheduler(args: dict[str, str], own: dict[str, int] | None = None):
    require_oracle("torch")
    require_oracle("megatron.core")
    return scheduler(args, own)


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


def test_stages_with_a_schedule_each_override_the_checkpoints(tmp_path) -> None:
    """checkpoint.schedule: spec gives each stage a schedule of its own: stage 2 still trains to
    its cumulative end (Megatron resumes at the samples stage 1 consumed), passes
    --override-opt_param-scheduler, and its scheduler loads stage 1's state and takes stage 2's
    curve from the sample it resumes at, down to min_lr at its end."""
    import yaml

    data = yaml.safe_load(SAMPLE.read_text(encoding="utf-8"))
    data.setdefault("checkpoint", {})["schedule"] = "spec"
    path = tmp_path / "own.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    files = spec_files(load_spec(path))[0]
    first, second = (megatron_flags(files[n]) for n in sorted(n for n in files if n.endswith("megatron_args.sh")))
    assert "override-opt_param-scheduler" in second and "use-checkpoint-opt_param-scheduler" not in second
    assert second["lr-decay-samples"] == second["train-samples"]
    assert int(second["train-samples"]) > int(first["train-samples"]) == int(first["lr-decay-samples"])
    one = _scheduler(first)
    gbs1, gbs2 = int(first["global-batch-size"]), int(second["global-batch-size"])
    for _ in range(int(first["train-samples"]) // gbs1):
        one.step(increment=gbs1)
    two = _scheduler(second)
    two.load_state_dict(one.state_dict())
    assert two.lr_decay_steps == int(second["lr-decay-samples"])  # its own schedule, not the saved one
    fresh = _scheduler(second)  # stage 2's curve, at the sample stage 1 reached
    fresh.step(increment=two.num_steps)
    assert _lr(two) == pytest.approx(_lr(fresh))
    while two.num_steps < int(second["train-samples"]):
        two.step(increment=gbs2)
    assert _lr(two) == pytest.approx(float(second["min-lr"]), rel=1e-3)
