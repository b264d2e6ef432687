"""A run longer than its Slurm allocation: it exits and saves before the limit, resumes from its
checkpoint folder, and launch.sbatch submits a bounded chain of jobs; the warnings for a run that
would never keep its progress."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from generator.artifacts import spec_files
from generator.calculator.resolve import chained_jobs, exit_margin_minutes, resolve
from generator.explain import explain_text
from generator.run import load_spec
from generator.units import slurm_minutes

from .conftest import ROOT

PRETRAIN = ROOT / "samples" / "llama3-8b-pretrain.yaml"


@pytest.mark.parametrize(("text", "minutes"), [
    ("30", 30), ("30:30", 31), ("48:00:00", 2880), ("2-00:00:00", 2880), ("1-12", 2160),
    ("1-12:30", 2190), ("1-00:00:01", 1441), ("UNLIMITED", None), ("infinite", None)])
def test_slurm_time_limits_in_minutes(text: str, minutes: int | None) -> None:
    """sbatch's --time formats (man sbatch): minutes, minutes:seconds, hours:minutes:seconds,
    days-hours, days-hours:minutes, days-hours:minutes:seconds."""
    assert slurm_minutes(text) == minutes


def test_the_exit_margin_covers_the_save() -> None:
    assert exit_margin_minutes(10080, 6.0) == 504 + 1  # 5% of 7 days, plus two 6 s steps
    assert exit_margin_minutes(240, 30.0) == 15 + 1  # at least 15 minutes
    assert chained_jobs(100, 60) == 2  # at least one job more than the estimate needs


def test_the_chain_covers_the_estimates_band() -> None:
    """Enough jobs for the run taking as much longer as the GPU's calibrated band allows (20%
    where no published runs calibrate it), at least one more than the estimate needs."""
    twenty = 20 * 3600  # twenty one-hour allocations
    assert chained_jobs(twenty, 60, 0.13) == 23  # 22.6 allocations at 13% slower
    assert chained_jobs(twenty, 60) == 24  # uncalibrated: 20%
    assert chained_jobs(twenty, 60, 0.02) == 21  # the one more
    assert chained_jobs(47.9 * 86400, 9575) == 9  # 7.2 needed, 8.6 at 20% slower


def test_a_run_longer_than_its_allocation_exits_saves_and_resumes() -> None:
    plan = resolve(load_spec(PRETRAIN))
    seconds = plan.estimate().train_seconds
    assert seconds > 7 * 86400  # 1T tokens on 32 H100s: weeks
    limit = 7 * 1440
    assert plan.exit_duration_minutes == limit - exit_margin_minutes(limit, plan.estimate().performance.step_time_s)
    files = spec_files(load_spec(PRETRAIN))[0]
    args = files["megatron_args.sh"]
    assert f"--exit-duration-in-mins {plan.exit_duration_minutes}\n" in args
    assert "--save /checkpoints/llama3-8b-pretrain\n" in args and "--load /checkpoints/llama3-8b-pretrain\n" in args
    assert f"for ((job = 1; job <= {plan.allocations}; job++))" in files["launch.sbatch"]
    assert plan.allocations == chained_jobs(seconds, plan.exit_duration_minutes, 0.17)  # h100-80gb's band
    assert f"launch.sbatch submits {plan.allocations} jobs" in explain_text(plan)


def test_the_chain_is_submitted_as_written(tmp_path: Path) -> None:
    """bash launch.sbatch, with a stand-in sbatch on PATH that records its arguments: the
    allocations are submitted as a singleton chain, each with the user's own options."""
    files = spec_files(load_spec(PRETRAIN))[0]
    script = tmp_path / "launch.sbatch"
    script.write_text(files["launch.sbatch"])
    stand_in = tmp_path / "bin" / "sbatch"
    stand_in.parent.mkdir()
    stand_in.write_text('#!/bin/bash\nprintf "%s\\n" "$*" >> "${CALLS}"\n')
    stand_in.chmod(0o755)
    calls = tmp_path / "calls"
    env = {"PATH": f"{stand_in.parent}:/usr/bin:/bin", "CALLS": str(calls)}
    subprocess.run(["bash", str(script), "--qos=high"], cwd=tmp_path, env=env, check=True)
    lines = calls.read_text().splitlines()
    plan = resolve(load_spec(PRETRAIN))
    assert lines == [f"--dependency=singleton --qos=high {script}"] * plan.allocations
    assert (tmp_path / "logs").is_dir()


def test_a_run_within_its_allocation_is_one_job(write_spec) -> None:
    path = write_spec(PRETRAIN.read_text().replace("train_tokens: 1T", "train_tokens: 10B"))
    plan = resolve(load_spec(path))
    assert plan.estimate().train_seconds < 7 * 86400
    assert plan.exit_duration_minutes is None and plan.allocations is None
    files = spec_files(load_spec(path))[0]
    assert "--exit-duration-in-mins" not in files["megatron_args.sh"]
    assert 'exec sbatch "$@" "$0"' in files["launch.sbatch"] and "singleton" not in files["launch.sbatch"]


def _warnings(plan) -> dict[str, str]:
    return {f.code: str(f) for f in plan.warnings}


def test_a_run_that_saves_nothing_is_warned_about(write_spec) -> None:
    text = PRETRAIN.read_text()
    start = text.index("checkpoint:")
    path = write_spec(text[:start] + text[text.index("\n", start) + 1:])
    plan = resolve(load_spec(path))
    warning = _warnings(plan)["GL309"]
    assert "nothing is saved" in warning and "set checkpoint.dir" in warning
    assert plan.exit_duration_minutes is None  # nothing to resume from: no chain either


def test_checkpoints_farther_apart_than_an_allocation_are_warned_about(write_spec) -> None:
    path = write_spec(PRETRAIN.read_text().replace("interval: 1000", "interval: 100000"))
    warning = _warnings(resolve(load_spec(path)))["GL310"]
    assert "checkpoint.interval 100,000 steps" in warning and "use at most" in warning
    assert f"{path}:" in warning


@pytest.mark.parametrize("folder", ["/tmp/ckpt", "/dev/shm/run", {"shell": "${TMPDIR}/run"}])
def test_a_node_local_checkpoint_folder_is_warned_about(write_spec, folder) -> None:
    import yaml

    data = yaml.safe_load(PRETRAIN.read_text())
    data["checkpoint"]["dir"] = folder
    path = write_spec(yaml.safe_dump(data))
    assert "only one node sees" in _warnings(resolve(load_spec(path)))["GL311"]


def test_a_time_limit_beyond_the_partitions_maximum_is_refused_at_the_field(tmp_path) -> None:
    """GL314: slurm.time above slurm.max_time would never start; at the maximum, the long
    sample is generated as a chain of jobs instead."""
    import yaml

    from generator.calculator.resolve import PlanError

    data = yaml.safe_load((ROOT / "samples" / "llama3-8b-pretrain.yaml").read_text())
    data["slurm"].update(time="7-00:00:00", max_time="2-00:00:00")
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(PlanError) as error:
        resolve(load_spec(path))
    (finding,) = error.value.findings
    assert finding.code == "GL314" and "set slurm.time: 2-00:00:00" in finding.message
    assert finding.sources[0].startswith(f"{path}:")
    data["slurm"]["time"] = "2-00:00:00"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    plan = resolve(load_spec(path))
    assert plan.allocations and plan.allocations > 1 and plan.exit_duration_minutes < 2 * 1440


def test_a_trainer_run_longer_than_its_allocation_is_chained_to_resume_at_each_limit(tmp_path) -> None:
    """The Trainer has no exit of its own: with checkpoint.dir, each job of the chain runs until
    Slurm ends it and the next resumes from the last checkpoint; explain says the entry point
    must load it."""
    import yaml

    data = yaml.safe_load((ROOT / "samples" / "sft-llama3-8b-fsdp2.yaml").read_text())
    data["slurm"]["time"] = "00:30:00"
    data["checkpoint"]["interval"] = 20
    path = tmp_path / "sft.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    plan = resolve(load_spec(path))
    assert plan.exit_duration_minutes is None and plan.allocations > 1
    assert plan.allocations == chained_jobs(plan.estimate().train_seconds, 30, plan.estimate().uncertainty)
    sbatch = spec_files(load_spec(path))[0]["launch.sbatch"]
    assert f"job <= {plan.allocations}" in sbatch or f"job <= '{plan.allocations}'" in sbatch
    assert "the entry point must load it" in explain_text(plan)
    data["checkpoint"] = None
    path.write_text(yaml.safe_dump({k: v for k, v in data.items() if v is not None}, sort_keys=False))
    assert resolve(load_spec(path)).allocations is None  # nothing saved: no chain (GL309 says so)
