"""A changing global batch: ramp-up and step schedule, rendered for the Megatron version, checked
against megatron-core 0.16.1's own ramp-up calculator, and the refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.artifacts import render_all
from generator.calculator.resolve import PlanError
from generator.plan.ramp import from_rampup, from_schedule

from .helpers import plan_of, spec_dict
from .test_megatron_oracle import calculator  # noqa: F401  (the oracle fixture)

# (global, micro, dp, rampup) from megatron-core's tests of its microbatch calculator
CASES = [(32, 8, 2, (16, 16, 48)), (32, 4, 2, (16, 8, 96)), (32, 8, 2, (16, 16, 96)),
         (2048, 2, 8, (16, 16, 6_000_000)), (2048, 2, 8, (192, 16, 9_765_625)), (1024, 1, 64, (64, 64, 5_000_000))]


@pytest.mark.oracle
@pytest.mark.parametrize(("global_batch", "micro", "dp", "rampup"), CASES)
def test_rampup_sequence_equals_megatron_core(calculator, global_batch, micro, dp, rampup) -> None:  # noqa: F811
    ramp = from_rampup(*rampup, global_batch)
    calculator.unset_num_microbatches_calculator()
    calculator.init_num_microbatches_calculator(0, list(rampup), global_batch, micro, dp, False)
    samples = rampup[2]
    probes = sorted({0, 1, samples // 3, samples // 2, samples - 1, samples, samples + 1,
                     *(t for t, _ in ramp.entries), *(t - 1 for t, _ in ramp.entries if t)})
    for consumed in probes:
        calculator.update_num_microbatches(consumed, consistency_check=False)
        assert ramp.batch_at(consumed) == calculator.get_current_global_batch_size(), consumed


def test_published_simulation() -> None:
    """16,022 steps to reach 2048 from 16 in steps of 16 over 6M samples (BLOOM tr11's ramp-up, checked against megatron-core's calculator)."""
    ramp = from_rampup(16, 16, 6_000_000, 2048)
    consumed = steps = 0
    while ramp.batch_at(consumed) < 2048:
        consumed += ramp.batch_at(consumed)
        steps += 1
    assert (steps, consumed, len(ramp.entries)) == (16_022, 6_000_864, 128)
    assert ramp.steps_for(6_000_864) == 16_022


def test_schedule_thresholds_are_tokens() -> None:
    ramp = from_schedule(((0, 1024), (252_000_000, 2048)), 4096)
    assert ramp.entries == ((0, 1024), (61_523, 2048))
    assert ramp.step_schedule_text(4096) == "0:1024 251998208:2048"


def ramp_spec(**batch) -> dict:
    data = spec_dict(parallelism={"tp": 2, "pp": 1})  # dp 8
    data["batch"] = {"micro_batch_size": 2, "global_batch_size": 256, **batch}
    data["training"] = {"train_tokens": "10B", "lr": 1e-4, "warmup": "1%"}
    return data


def megatron_words(plan) -> list[str]:
    return render_all(plan)["megatron_args.sh"].split()


def test_rampup_for_megatron_core_016(tmp_path: Path) -> None:
    data = ramp_spec(rampup={"start": 32, "increment": 32, "samples": "1M"})
    data["megatron"] = {"version": "core_v0.16"}
    plan = plan_of(tmp_path, data)
    words = megatron_words(plan)
    assert words[words.index("--rampup-batch-size") + 1:words.index("--rampup-batch-size") + 4] == \
        ["32", "32", "1000000"]
    assert "--global-batch-size" in words and "--train-samples" in words
    assert plan.train_samples == 10_000_000_000 // 2048 + 1  # ceil(10B / 2048)


def test_rampup_becomes_a_step_schedule_for_current_megatron(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, ramp_spec(rampup={"start": 32, "increment": 32, "samples": "1M"}))
    text = render_all(plan)["megatron_args.sh"]
    assert "\n  --global-batch-size" not in text and "\n  --rampup-batch-size" not in text
    schedule = text.split("--step-batch-size-schedule ")[1].split("\n")[0].strip("'")
    pairs = [tuple(map(int, p.split(":"))) for p in schedule.split()]
    assert pairs[0] == (0, 32) and pairs[-1][1] == 256
    # the same batch at every consumed sample as the ramp-up form
    equivalent = from_schedule(tuple(pairs), 2048)
    ramp = from_rampup(32, 32, 1_000_000, 256)
    for consumed in range(0, 1_100_000, 997):
        assert equivalent.batch_at(consumed) == ramp.batch_at(consumed)


def test_step_schedule(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, ramp_spec(schedule=[{"tokens": 0, "global_batch_size": 128},
                                                  {"tokens": "1B", "global_batch_size": 256}]))
    assert "--step-batch-size-schedule '0:128 999999488:256'" in render_all(plan)["megatron_args.sh"]


@pytest.mark.parametrize(("change", "code"), [
    ({"training": {"train_iters": 1000, "lr": 1e-4, "warmup": {"iters": 10}}}, "GL007"),
    ({"framework": "deepspeed", "parallelism": {"tp": 1, "pp": 1}}, "GL022"),
    ({"batch_form": "schedule", "megatron": {"version": "core_v0.17"}}, "GL022"),
    ({"rampup": {"start": 24, "increment": 8, "samples": 1000}}, "GL006"),
    ({"batch_form": "bad_schedule"}, "GL023"),
])
def test_refusals(tmp_path: Path, change: dict, code: str) -> None:
    form = change.pop("batch_form", None)
    if form == "schedule":
        data = ramp_spec(schedule=[{"tokens": 0, "global_batch_size": 128}, {"tokens": "1B", "global_batch_size": 256}])
    elif form == "bad_schedule":
        data = ramp_spec(schedule=[{"tokens": 0, "global_batch_size": 120}, {"tokens": "1B", "global_batch_size": 256}])
    elif "rampup" in change:
        data = ramp_spec(rampup=change.pop("rampup"))
    else:
        data = ramp_spec(rampup={"start": 32, "increment": 32, "samples": "1M"})
    for section, value in change.items():
        if section == "framework":
            data[section] = value
            data["parallelism"] = value and {"tp": 1, "pp": 1}
            data["training"]["warmup"] = {"iters": 2}
        else:
            data[section] = value
    with pytest.raises(PlanError) as err:
        plan_of(tmp_path, data)
    assert code in [f.code for f in err.value.findings], str(err.value)


def test_rampup_and_schedule_together_are_refused(write_spec) -> None:
    import yaml
    from typer.testing import CliRunner

    from generator.cli import app

    data = ramp_spec(rampup={"start": 32, "increment": 32, "samples": "1M"},
                     schedule=[{"tokens": 0, "global_batch_size": 256}])
    path = write_spec(yaml.safe_dump(data))
    result = CliRunner().invoke(app, ["explain", str(path)])
    assert result.exit_code == 2 and "give either rampup or schedule, not both" in result.stderr


@pytest.mark.parametrize(("compute", "batch_m", "lr"), [(1e20, 1.02, 9.9e-4), (1e22, 4.59, 5.5e-4), (1e24, 20.7, 3.1e-4)])
def test_deepseek_llm_law(compute: float, batch_m: float, lr: float) -> None:
    from generator.estimate.advice import deepseek_llm

    # choose a token count giving the compute budget for a 1-layer, h 1000, s 0 "model": M = 72e6
    advice = deepseek_llm(1, 1000, 0, round(compute / 72e6))
    assert advice.batch_tokens / 1e6 == pytest.approx(batch_m, rel=0.01)
    assert advice.lr == pytest.approx(lr, rel=0.02)


@pytest.mark.parametrize(("loss", "batch_m"), [(4.0, 0.27), (3.0, 1.07), (2.5, 2.55), (2.0, 7.4)])
def test_kaplan_critical_batch(loss: float, batch_m: float) -> None:
    from generator.estimate.advice import kaplan_critical_batch

    assert kaplan_critical_batch(loss).batch_tokens / 1e6 == pytest.approx(batch_m, rel=0.02)


def test_explain_labels_the_advice(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from generator.cli import app

    data = ramp_spec()
    data["training"]["target_loss"] = 2.0
    plan_of(tmp_path, data)
    text = CliRunner().invoke(app, ["explain", str(tmp_path / "spec.yaml")]).stdout
    assert "Advice (published laws and estimates; not applied to the plan)" in text
    assert "DeepSeek LLM" in text and "Kaplan et al. 2020 (critical batch): batch ≈ 7.4M tokens" in text


def test_wsd_decay(tmp_path: Path) -> None:
    data = spec_dict()
    data["training"] = {"train_iters": 1000, "lr": 1e-4, "warmup": {"iters": 10}, "decay": "wsd",
                        "wsd_decay": "20%"}
    words = megatron_words(plan_of(tmp_path, data))
    assert words[words.index("--lr-decay-style") + 1] == "WSD"
    assert words[words.index("--lr-wsd-decay-iters") + 1] == "200"


def test_micro_batch_advice() -> None:
    from typer.testing import CliRunner

    from generator.cli import app

    from .conftest import ROOT

    text = CliRunner().invoke(app, ["explain", str(ROOT / "samples" / "llama3-8b-pretrain.yaml")]).stdout
    assert "micro batch: 4 (accumulation 16) is the largest that divides the batch and fits" in text
