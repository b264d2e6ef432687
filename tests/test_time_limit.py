"""A run longer than its Slurm allocation: it exits and saves before the limit, resumes from its
checkpoint folder, and launch.sbatch runs as a chain of jobs, at most two queued, each submitting
the next only while the run is unfinished and it saved progress; the warnings for a run that would
never keep its progress."""

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
    sbatch = files["launch.sbatch"]
    assert 'exec sbatch --dependency=singleton "$@" "$0" "$@"' in sbatch and "for ((" not in sbatch
    assert "scancel --name=llama3-8b-pretrain" in sbatch.split("#SBATCH")[0]  # the header says how to stop it
    assert 'TRACKER="${CHECKPOINT_DIR}"/latest_checkpointed_iteration.txt' in sbatch
    assert f"elif ((SAVED_AFTER >= {plan.schedule.train_iters})); then" in sbatch
    assert plan.allocations == chained_jobs(seconds, plan.exit_duration_minutes, 0.17)  # h100-80gb's band
    text = explain_text(plan)
    assert "at most two jobs queued; each submits the next while the run is unfinished and it made progress" in text


def _stand_ins(tmp_path: Path) -> dict[str, str]:
    """sbatch, scontrol and srun stand-ins on PATH: sbatch records its arguments, scontrol answers
    as for a job submitted as /submitted/launch.sbatch with the job's arguments, srun runs
    FAKE_STEP as the training step (the preflight passes)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "sbatch").write_text('#!/bin/bash\nprintf "%s\\n" "$*" >> "${CALLS}"\n')
    (bin_dir / "scontrol").write_text(
        '#!/bin/bash\nif [[ "$1" == show && "$2" == job ]]; then echo "   Command=/submitted/launch.sbatch${JOB_ARGS}"; '
        'else echo node1; fi\n')
    (bin_dir / "srun").write_text('#!/bin/bash\n[[ "$*" == *preflight.py ]] || exec "${FAKE_STEP}"\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "CALLS": str(tmp_path / "calls")}


def test_the_first_job_is_submitted_with_the_users_options_as_its_arguments(tmp_path: Path) -> None:
    """bash launch.sbatch, with a stand-in sbatch on PATH that records its arguments: one job is
    submitted (singleton), with the user's own options, which are also its arguments."""
    files = spec_files(load_spec(PRETRAIN))[0]
    script = tmp_path / "launch.sbatch"
    script.write_text(files["launch.sbatch"])
    env = _stand_ins(tmp_path)
    subprocess.run(["bash", str(script), "--qos=high", "--comment=a b"], cwd=tmp_path, env=env, check=True)
    assert (tmp_path / "calls").read_text().splitlines() == [
        f"--dependency=singleton --qos=high --comment=a b {script} --qos=high --comment=a b"]
    assert (tmp_path / "logs").is_dir()


@pytest.mark.parametrize(("before", "after", "status", "submits"), [
    (None, "1000", 0, True),  # saved, unfinished: the next job
    ("1000", "2000", 1, True),  # a crash after a save: the next job resumes from it
    ("1000", "1000", 0, False),  # no new checkpoint: the chain ends
    (None, None, 1, False),  # a crash before the first save: no loop
    ("1000", "release", 0, False),  # nothing the chain can count
    ("1000", "{final}", 0, False),  # the run is done
])
def test_a_job_submits_the_next_only_after_progress_in_an_unfinished_run(
        tmp_path: Path, before, after, status, submits) -> None:
    """The job part of launch.sbatch with stand-ins for srun (a training step that writes the
    tracker and exits with a status), scontrol and sbatch: the next job is submitted with the same
    options and a dependency on this one exactly when the tracker moved forward short of the end;
    the job ends with the training step's status."""
    plan = resolve(load_spec(PRETRAIN))
    sbatch = spec_files(load_spec(PRETRAIN))[0]["launch.sbatch"]
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    sbatch = sbatch.replace("CHECKPOINT_DIR=/checkpoints/llama3-8b-pretrain", f"CHECKPOINT_DIR={ckpt}")
    script = tmp_path / "launch.sbatch"
    script.write_text(sbatch)
    (tmp_path / "megatron_args.sh").write_text("MEGATRON_ARGS=()\n")
    tracker = ckpt / "latest_checkpointed_iteration.txt"
    if before is not None:
        tracker.write_text(before)
    step = tmp_path / "step"
    write = f"printf %s {after.format(final=plan.schedule.train_iters)} > {tracker}\n" if after else ""
    step.write_text(f"#!/bin/bash\n{write}exit {status}\n")
    step.chmod(0o755)
    env = {**_stand_ins(tmp_path), "FAKE_STEP": str(step), "SLURM_JOB_ID": "41", "SLURM_NNODES": "4",
           "SLURM_JOB_NODELIST": "node[1-4]", "SLURM_CPUS_ON_NODE": "96", "GEN_LAUNCH_DIR": str(tmp_path),
           "JOB_ARGS": " --qos=high"}
    proc = subprocess.run(["bash", str(script), "--qos=high"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == status, proc.stderr
    calls = (tmp_path / "calls").read_text().splitlines() if (tmp_path / "calls").exists() else []
    assert calls == (["--qos=high --dependency=afterany:41 /submitted/launch.sbatch --qos=high"] if submits else [])
    if not submits and after != "{final}":
        assert "no new checkpoint" in proc.stderr


def test_a_run_within_its_allocation_is_one_job(write_spec) -> None:
    path = write_spec(PRETRAIN.read_text().replace("train_tokens: 1T", "train_tokens: 10B"))
    plan = resolve(load_spec(path))
    assert plan.estimate().train_seconds < 7 * 86400
    assert plan.exit_duration_minutes is None and plan.allocations is None
    files = spec_files(load_spec(path))[0]
    assert "--exit-duration-in-mins" not in files["megatron_args.sh"]
    sbatch = files["launch.sbatch"]
    assert 'exec sbatch "$@" "$0"\n' in sbatch and "singleton" not in sbatch and "SAVED_AFTER" not in sbatch
    assert "STEP_STATUS" not in sbatch and "scancel" not in sbatch


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
    # srun --time ends the training step 5 minutes before the limit: the job looks for the
    # Trainer's newest checkpoint-N folder and submits the next while there is a newer one
    assert plan.step_time_limit_minutes == 25 and sbatch.count("  --time=25 \\\n") == 1
    assert '"${CHECKPOINT_DIR}"/checkpoint-*' in sbatch
    assert f"elif ((SAVED_AFTER >= {plan.schedule.train_iters})); then" in sbatch
    assert "the entry point must load it" in explain_text(plan)
    data["checkpoint"] = None
    path.write_text(yaml.safe_dump({k: v for k, v in data.items() if v is not None}, sort_keys=False))
    assert resolve(load_spec(path)).allocations is None  # nothing saved: no chain (GL309 says so)
