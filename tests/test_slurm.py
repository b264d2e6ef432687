"""Real Slurm: every sample's launch.sbatch passes `sbatch --test-only` on a 128-node simulated
cluster (a sample for more nodes, such as the 16,384-GPU one, is refused as it is and checked
rendered for 128 nodes), and four end-to-end jobs run on two simulated nodes: torchrun and the
DeepSpeed launcher training with DeepSpeed on CPU (the cpu sample), accelerate launch with
FSDP2, and the srun style (one task per process) that Megatron-LM uses; and a run longer than
its allocation goes through its job chain, saving, exiting and resuming, at most two jobs queued
(a CPU stand-in for Megatron's loop, tests/oracle/ckpt_train.py), and a job that saved nothing
submits no successor. Start the cluster with
`scripts/slurm-cluster.sh start` (.ci/run does); without it these tests skip locally and fail
in CI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from generator.artifacts import render_all
from generator.calculator.resolve import resolve
from generator.run import load_spec

from .conftest import ROOT, SAMPLES

pytestmark = pytest.mark.slurm
JOB_TIMEOUT_S = 240
CLUSTER_NODES = int(os.environ.get("SLURM_CI_NODES", "128"))  # scripts/slurm-cluster.sh
HOSTILE_ARGS = ["$(touch pwned)", "`touch pwned`", "a; touch pwned", "it's \"quoted\"", "tab\tbed", "*"]


def _cluster_up() -> str | None:
    if shutil.which("sbatch") is None:
        return "Slurm is not installed"
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, check=False)
    return None if "is UP" in ping.stdout else "slurmctld is not running"


@pytest.fixture(scope="module")
def slurm() -> None:
    problem = _cluster_up()
    if problem:
        message = f"{problem}; start the test cluster with scripts/slurm-cluster.sh start"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def write_files(spec_path: Path, folder: Path, display: str | None = None,
                overrides: tuple[str, ...] = ()) -> dict:
    plan = resolve(load_spec(spec_path, display, overrides))
    files = render_all(plan)
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return json.loads(files["plan.json"])


@pytest.mark.parametrize("sample", [s for s in SAMPLES if load_spec(s).launch.executor == "slurm"],
                         ids=lambda s: s.stem)
def test_sbatch_test_only(slurm, sample: Path, tmp_path: Path) -> None:
    overrides: tuple[str, ...] = ()
    if load_spec(sample).cluster.nodes > CLUSTER_NODES:
        write_files(sample, tmp_path / "as-is", f"samples/{sample.name}")
        proc = subprocess.run(["sbatch", "--test-only", "launch.sbatch"], cwd=tmp_path / "as-is",
                              capture_output=True, text=True, check=False)
        assert proc.returncode != 0 and "node" in proc.stderr.lower(), proc.stderr
        overrides = (f"cluster.nodes={CLUSTER_NODES}",)
    write_files(sample, tmp_path, f"samples/{sample.name}", overrides)
    proc = subprocess.run(["sbatch", "--test-only", "launch.sbatch"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "to start at" in proc.stderr


def test_sbatch_test_only_can_fail(slurm, tmp_path: Path) -> None:
    """The oracle refuses what the cluster cannot run: 200 nodes on a 128-node cluster."""
    data = yaml.safe_load((ROOT / "samples" / "cpu-tiny.yaml").read_text())
    data["cluster"]["nodes"] = 200
    spec = tmp_path / "big.yaml"
    spec.write_text(yaml.safe_dump(data))
    write_files(spec, tmp_path / "out")
    proc = subprocess.run(["sbatch", "--test-only", "launch.sbatch"], cwd=tmp_path / "out",
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0


@pytest.mark.parametrize("first_line", ["#SBATCH <ACCOUNT> --nodes=2", "#SBATCH --job-name=x --nodes=2"])
def test_lint_and_sbatch_agree_on_directives(slurm, tmp_path: Path, first_line: str) -> None:
    """GL308 exactly when real sbatch refuses an #SBATCH line ("Invalid directive"); several
    options on one line are fine for both."""
    from generator.lint import lint_paths

    script = tmp_path / "job.sbatch"
    script.write_text(f"#!/bin/bash\n{first_line}\n#SBATCH --ntasks-per-node=1\nhostname\n")
    proc = subprocess.run(["sbatch", "--test-only", str(script)], cwd=tmp_path, capture_output=True,
                          text=True, check=False)
    refused = "Invalid directive" in proc.stderr
    assert refused == (proc.returncode != 0) == first_line.startswith("#SBATCH <")
    assert ("GL308" in [i.finding.code for i in lint_paths([script]).items]) == refused


def submit(workdir: Path, script: Path, directly: bool = False) -> str:
    """``sbatch --parsable SCRIPT``, or ``bash SCRIPT --parsable``: the script then creates its
    log folder and submits itself."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("SLURM_JOB_ID", None)
    command = ["bash", str(script), "--parsable"] if directly else ["sbatch", "--parsable", str(script)]
    proc = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, check=True)
    return proc.stdout.strip().split(";")[0]


def wait(job: str) -> tuple[str, str]:
    """Poll every 0.25 s (sbatch --wait polls after 2, 8, then every 32 s)."""
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        info = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True,
                              text=True, check=False).stdout
        state = re.search(r"JobState=(\w+)", info)
        if state and state.group(1) not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING",
                                             "SUSPENDED", "REQUEUED", "RESIZING"):
            return state.group(1), re.search(r"ExitCode=(\S+)", info).group(1)
        time.sleep(0.25)
    subprocess.run(["scancel", job], check=False)
    pytest.fail(f"job {job} did not finish within {JOB_TIMEOUT_S} s")


def result_of(output: Path) -> dict:
    text = output.read_text(encoding="utf-8", errors="replace")
    found = re.findall(r"^gen-launch-result: (.*)$", text, re.M)
    assert found, text[-4000:]
    return json.loads(found[-1])


def variant(tmp_path: Path, name: str, base: Path = ROOT / "samples" / "cpu-tiny.yaml", **changes) -> Path:
    """``base`` (the cpu sample) renamed, with ``section={...}`` changes merged in."""
    data = yaml.safe_load(base.read_text())
    data["name"] = name
    for section, values in changes.items():
        if isinstance(values, dict):
            data.setdefault(section, {}).update(values)
        else:
            data[section] = values
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def jobs(slurm, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Submit the three end-to-end jobs at once (distinct MASTER_PORTs) and wait for all."""
    work = tmp_path_factory.mktemp("slurm-e2e")
    (work / "tests").symlink_to(ROOT / "tests")  # entry points are relative to the submit dir
    specs = {
        "cpu-tiny": ROOT / "samples" / "cpu-tiny.yaml",
        "cpu-deepspeed": variant(work, "cpu-deepspeed", launch={"launcher": "deepspeed"}),
        "cpu-accelerate": variant(work, "cpu-accelerate", framework="fsdp",
                                  parallelism={"zero_stage": 3},
                                  launch={"launcher": "accelerate",
                                          "entrypoint": "tests/oracle/accelerate_check.py"}),
        "cpu-srun": variant(
            work, "cpu-srun", framework="megatron-lm",
            parallelism={"tp": 2, "zero_stage": None},
            slurm={"exclusive": True},  # the whole node: its CPUs are shared by the tasks
            launch={"launcher": "srun", "python": sys.executable,
                    "entrypoint": "tests/oracle/rank_check.py", "extra_args": HOSTILE_ARGS,
                    "check_extra_args": False}),  # the entry point's own words, hostile on purpose
    }
    srun_style = specs["cpu-srun"]
    specs["cpu-preflight"] = variant(work, "cpu-preflight", slurm={"preflight": True})
    specs["cpu-srun-preflight"] = variant(work, "cpu-srun-preflight", srun_style, slurm={"preflight": True},
                                           checkpoint={"dir": str(work / "ckpt")})
    (work / "not-a-folder").write_text("")  # where the checkpoint folder should be: a file
    specs["cpu-preflight-fails"] = variant(work, "cpu-preflight-fails", srun_style, slurm={"preflight": True},
                                            checkpoint={"dir": str(work / "not-a-folder" / "ckpt")})
    plans, submitted = {}, {}
    for name, spec in specs.items():
        plans[name] = write_files(spec, work / "launch" / name)
        # the first job submits itself (creating logs/), the others go through sbatch
        submitted[name] = submit(work, work / "launch" / name / "launch.sbatch", directly=not submitted)
    results = {}
    for name, job in submitted.items():
        state, exit_code = wait(job)
        output = work / "logs" / f"{name}-{job}.out"
        results[name] = {"state": state, "exit": exit_code, "output": output, "plan": plans[name]}
    results["workdir"] = work
    return results


def assert_completed(job: dict) -> None:
    log = job["output"].read_text(errors="replace")[-4000:] if job["output"].exists() else "(no output)"
    assert (job["state"], job["exit"]) == ("COMPLETED", "0:0"), log


@pytest.mark.parametrize("name", ["cpu-tiny", "cpu-deepspeed"])
def test_deepspeed_training_job_matches_the_plan(jobs: dict, name: str) -> None:
    """torchrun (c10d) and the DeepSpeed launcher on 2 nodes × 2 processes: the engine's batch
    values equal the plan (the entry point also checks them itself and would fail the job)."""
    job = jobs[name]
    assert_completed(job)
    got, plan = result_of(job["output"]), job["plan"]
    assert got["world_size"] == plan["cluster"]["world_size"] == 4
    assert got["dp"] == plan["parallelism"]["dp"]
    assert got["train_batch_size"] == plan["batch"]["global_batch_size"] == 24
    assert got["train_micro_batch_size_per_gpu"] == plan["batch"]["micro_batch_size"]
    assert got["gradient_accumulation_steps"] == plan["batch"]["gradient_accumulation_steps"]
    assert got["zero_stage"] == plan["parallelism"]["zero_stage"]
    assert got["global_steps"] == 2


def test_accelerate_job_matches_the_plan(jobs: dict) -> None:
    """accelerate launch once per node (machine rank from Slurm), FSDP2 through the generated
    config: 2 nodes × 2 processes meet, accelerate hands them FSDP2 with the plan's sharding, and
    the Trainer arguments' batch times the world is the plan's global batch."""
    job = jobs["cpu-accelerate"]
    assert_completed(job)
    got, plan = result_of(job["output"]), job["plan"]
    assert got["world_size"] == got["all_reduce"] == plan["cluster"]["world_size"] == 4
    assert got["hosts"] == ["node1", "node2"]
    assert (got["use_fsdp"], got["fsdp_version"], got["reshard_after_forward"]) == ("true", 2, True)
    assert got["global_batch_size"] == plan["batch"]["global_batch_size"] == 24
    assert got["micro_batch_size"] == plan["batch"]["micro_batch_size"]


def test_srun_job_sets_ranks_for_megatron(jobs: dict) -> None:
    """srun, one task per process: RANK/LOCAL_RANK/WORLD_SIZE from Slurm, both nodes used, the
    Megatron batch arguments consistent, hostile extra arguments passed through literally, and
    each task given its share of the node's CPUs."""
    job = jobs["cpu-srun"]
    assert_completed(job)
    got, plan = result_of(job["output"]), job["plan"]
    assert got["world_size"] == plan["cluster"]["world_size"] == 4
    assert len(got["hosts"]) == 2  # both nodes (whole nodes: which ones, Slurm decides)
    assert got["dp"] == plan["parallelism"]["dp"] == 2
    assert got["micro_batch_size"] == plan["batch"]["micro_batch_size"]
    assert got["global_batch_size"] == plan["batch"]["global_batch_size"]
    assert got["num_microbatches"] == plan["batch"]["gradient_accumulation_steps"]
    assert got["other_args"][-len(HOSTILE_ARGS):] == HOSTILE_ARGS
    node = subprocess.run(["scontrol", "show", "node", "node1"], capture_output=True, text=True, check=True)
    cpus = int(re.search(r"CPUTot=(\d+)", node.stdout).group(1))
    assert got["cpus_per_task"] == str(cpus // 2)  # the node's CPUs shared by its 2 tasks (srun, not 1)
    assert not (jobs["workdir"] / "pwned").exists()


# A run whose estimate (a 7B-like model on 2 × 2 fake H100s: ≈10.6 s a step) outlives its 60-minute
# limit: the plan passes --exit-duration-in-mins and launch.sbatch runs as a chain of jobs. The
# stand-in (tests/oracle/ckpt_train.py) does what Megatron does with those arguments, with time
# scaled: a "minute" is 0.1 s and an iteration 0.02 s, so an allocation trains about 4.4 s (about
# 220 iterations) and the 500 iterations take three.
RESUMING = {
    "name": "cpu-resume", "framework": "megatron-lm",
    "cluster": {"nodes": 2, "gpus_per_node": 2, "gpu": "h100-80gb", "allow_oversize": True},
    "model": {"num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "vocab_size": 32000,
              "seq_length": 2048},
    "parallelism": {"tp": 1},
    "batch": {"micro_batch_size": 1, "gradient_accumulation_steps": 64},
    "training": {"train_iters": 500, "lr": 1.0e-3, "min_lr": 1.0e-4, "warmup": {"iters": 2},
                 "precision": "bf16"},
    "slurm": {"time": "01:00:00", "exclusive": False, "output": "logs/%x-%j.out"},
    "launch": {"launcher": "srun", "entrypoint": "tests/oracle/ckpt_train.py",
               "env": {"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
                       "GEN_LAUNCH_STANDIN_MINUTE_S": "0.1", "GEN_LAUNCH_STANDIN_STEP_S": "0.02"}},
}


def chained(work: Path, entrypoint: str = "tests/oracle/ckpt_train.py") -> tuple[dict, str]:
    """The RESUMING spec, saving to work/ckpt, under a job name of its own (the cluster is shared:
    another chain of the same name would share the singleton), written to work/launch."""
    (work / "tests").symlink_to(ROOT / "tests")
    name = f"cpu-resume-{os.getpid()}-{time.monotonic_ns() % 10**6}"
    spec = dict(RESUMING, name=name, checkpoint={"dir": str(work / "ckpt"), "interval": 25})
    spec["launch"] = dict(spec["launch"], python=sys.executable, entrypoint=entrypoint)
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return write_files(path, work / "launch"), name


def run_chain(work: Path, name: str) -> tuple[list[str], int]:
    """bash launch.sbatch (with an sbatch option, which every job passes on), then squeue polled
    every 0.1 s until no job of the chain is left: the jobs seen, in order, and the most queued
    at once."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("SLURM_JOB_ID", None)
    proc = subprocess.run(["bash", str(work / "launch" / "launch.sbatch"), "--parsable"], cwd=work, env=env,
                          capture_output=True, text=True, check=True)
    seen, most = [proc.stdout.strip().split(";")[0]], 0
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        queued = subprocess.run(["squeue", "--noheader", f"--name={name}", "--format=%i"], capture_output=True,
                                text=True, check=True).stdout.split()
        most = max(most, len(queued))
        seen += [job for job in sorted(queued, key=int) if job not in seen]
        if not queued:
            return seen, most
        time.sleep(0.1)
    subprocess.run(["scancel", f"--name={name}"], check=False)
    pytest.fail(f"the chain {name} did not end within {JOB_TIMEOUT_S} s: {seen}")


def job_times(job: str) -> tuple[str, str, str]:
    """SubmitTime, StartTime, EndTime of a finished job (ISO, to the second: they sort as text)."""
    info = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True,
                          check=True).stdout
    found = {key: re.search(rf"\b{key}=(\S+)", info).group(1) for key in ("SubmitTime", "StartTime", "EndTime")}
    return found["SubmitTime"], found["StartTime"], found["EndTime"]


def test_a_run_longer_than_its_allocation_chains_jobs_two_at_most_until_done(slurm, tmp_path: Path) -> None:
    """Submitted once (bash launch.sbatch), the chain keeps at most two jobs queued (the running
    one and the successor it submitted); each job resumes at the iteration the one before saved
    and exits and saves when its exit duration has passed; the job that reaches --train-iters
    submits nothing, so the chain stops after the last allocation."""
    work = tmp_path
    plan, name = chained(work)
    exit_minutes = plan["slurm"]["exit_duration_minutes"]
    assert f"--exit-duration-in-mins {exit_minutes}" in (work / "launch" / "megatron_args.sh").read_text()
    jobs, most = run_chain(work, name)
    logs = {job: work / "logs" / f"{name}-{job}.out" for job in jobs}
    for job in jobs:
        state, code = wait(job)
        log = logs[job].read_text(errors="replace")[-3000:] if logs[job].exists() else job
        assert (state, code) == ("COMPLETED", "0:0"), log
    progress = [json.loads(line) for line in (work / "ckpt" / "progress.jsonl").read_text().splitlines()]
    # Slurm's own times (to the second): each job submitted while the one before still ran, and
    # started after it ended, so when a job is submitted, the chain holds it and one other
    times = [job_times(job) for job in jobs]
    for (_, _, end), (submit, start, _) in zip(times, times[1:], strict=False):
        assert submit <= end <= start
    at_submission = max(sum(s <= t <= e for s, _, e in times) for t, _, _ in times)
    print(f"chain {name}: {len(jobs)} jobs, at most {most} queued when polled, {at_submission} at each "
          "submission; " + ", ".join(f"{p['job']}: {p['start']}->{p['end']} ({p['exit']})" for p in progress))
    assert most <= 2 and at_submission == 2
    assert [p["job"] for p in progress] == jobs  # one at a time, each submitted by the one before
    # (how many jobs depends on how many iterations the machine runs in a job's scaled minutes:
    # three on an idle CI machine, more under load)
    assert len(jobs) >= 2 and progress[0]["start"] == 0 and progress[-1]["end"] == 500
    for before, after in zip(progress, progress[1:], strict=False):
        assert after["start"] == before["end"] > before["start"]  # resumed where the previous job saved
    assert all(p["exit"] == "exit-duration" for p in progress[:-1]) and progress[-1]["exit"] == "done"
    for job in jobs[:-1]:
        assert "submitting the next job of the chain" in logs[job].read_text()
    assert "the run is done (iteration 500): the chain ends here" in logs[jobs[-1]].read_text()


@pytest.mark.parametrize("status", [0, 3])
def test_a_job_that_saved_nothing_submits_no_successor(slurm, tmp_path: Path, status: int) -> None:
    """A job of the chain whose training step saves nothing (it ends at once, or crashes) ends
    the chain: no successor, so a crash cannot loop."""
    work = tmp_path
    (work / "stall.py").write_text(f"import sys\nprint('gen-launch-result: {{}}')\nsys.exit({status})\n")
    _, name = chained(work, entrypoint="stall.py")
    (work / "ckpt").mkdir()
    (work / "ckpt" / "latest_checkpointed_iteration.txt").write_text("100")  # resumed mid-run
    jobs, most = run_chain(work, name)
    assert len(jobs) == 1 and most == 1, jobs
    log = (work / "logs" / f"{name}-{jobs[0]}.out").read_text(errors="replace")
    assert wait(jobs[0]) == (("COMPLETED", "0:0") if status == 0 else ("FAILED", f"{status}:0")), log[-3000:]
    assert "no new checkpoint in this job (iteration 100): the chain ends here" in log, log[-3000:]
    assert "submitting the next job" not in log


@pytest.mark.parametrize("name", ["cpu-preflight", "cpu-srun-preflight"])
def test_the_preflight_checks_every_node_before_training(jobs: dict, name: str) -> None:
    """slurm.preflight, with torchrun (one task per node) and srun (one task per process): every
    rank joins the all-reduce, every node writes to the checkpoint folder (the launch folder
    without one) and removes its file, then the training step runs."""
    job = jobs[name]
    assert_completed(job)
    log = job["output"].read_text(errors="replace")
    assert re.search(r"gen-launch preflight: 4 ranks, all-reduce of 64 MiB in [0-9.]+ ms", log), log[-3000:]
    assert "writable on every node" in log
    result_of(job["output"])  # the training step ran after it
    folder = jobs["workdir"] / ("ckpt" if name == "cpu-srun-preflight" else f"launch/{name}")
    assert not list(folder.glob(".gen-launch-preflight-*"))


def test_a_failed_preflight_ends_the_job_before_training(jobs: dict) -> None:
    job = jobs["cpu-preflight-fails"]
    log = job["output"].read_text(errors="replace")
    assert job["state"] == "FAILED", log[-3000:]
    assert re.search(r"gen-launch preflight failed; .*node\d+: cannot write to the checkpoint folder", log)
    assert "writable on every node" not in log
    assert "gen-launch-result" not in log  # the training step never started


@pytest.mark.parametrize("limit", ["00:20:00", "01:00:00"])
def test_the_partitions_maximum_is_the_one_slurm_enforces(slurm, tmp_path: Path, limit: str) -> None:
    """On the test cluster's partition short (MaxTime 30 minutes): the job Slurm lets run is the
    one GL314 lets through. Above the maximum, sbatch refuses the script rendered without
    slurm.max_time, or holds it with the reason PartitionTimeLimit; with slurm.max_time given,
    gen-launch refuses the spec."""
    from generator.calculator.resolve import PlanError

    spec = variant(tmp_path, "cpu-short", slurm={"partition": "short", "time": limit})
    write_files(spec, tmp_path / "launch")
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    (tmp_path / "logs").mkdir()
    proc = subprocess.run(["sbatch", "--parsable", "--hold", str(tmp_path / "launch" / "launch.sbatch")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    refused = proc.returncode != 0
    if not refused:
        job = proc.stdout.strip().split(";")[0]
        subprocess.run(["scontrol", "release", job], check=False, capture_output=True)
        time.sleep(1.5)  # one scheduling pass
        info = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True).stdout
        subprocess.run(["scancel", job], check=False)
        refused = "PartitionTimeLimit" in info
    assert refused == (limit == "01:00:00"), proc.stderr
    data = yaml.safe_load(spec.read_text())
    data["slurm"]["max_time"] = "00:30:00"
    spec.write_text(yaml.safe_dump(data))
    if refused:
        with pytest.raises(PlanError, match="GL314"):
            resolve(load_spec(spec))
    else:
        resolve(load_spec(spec))



def test_slurm_variables_are_set_as_gl303_says(slurm, tmp_path: Path) -> None:
    """Each output variable GL303 knows is set by a real sbatch when the header has one of the
    options slurm_variables.yaml names, and only then: left empty with --nodes alone or another
    option (so a script that reads it then gets GL303)."""
    from generator.data import load

    table = load("slurm_variables.yaml")
    value_of = {"-n": "-n 2", "--ntasks": "--ntasks=2", "--ntasks-per-node": "--ntasks-per-node=2",
                "-c": "-c 1", "--cpus-per-task": "--cpus-per-task=1", "--gpus-per-node": "--gpus-per-node=1",
                "--gres": "--gres=gpu:1", "--gpus": "--gpus=1", "-G": "-G 1", "--gpus-per-task": "--gpus-per-task=1",
                "--mem": "--mem=100"}
    echo = " ".join(f"{v}=[${v}]" for v in table)
    runs = [("--nodes=1", None)] + [(value_of[option], option) for needs in table.values() for option in needs]
    jobs = []
    for k, (header, option) in enumerate(runs):
        script = tmp_path / f"job{k}.sbatch"
        script.write_text(f"#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH {header}\n#SBATCH --output={tmp_path}/out{k}.txt\n"
                          f"echo {echo}\n")
        jobs.append((submit(tmp_path, script), k, option))
    wrong = []
    for job, k, option in jobs:
        assert wait(job)[0] == "COMPLETED"
        got = dict(re.findall(r"(SLURM_\w+)=\[([^\]]*)\]", (tmp_path / f"out{k}.txt").read_text()))
        # set exactly by the options the table names (GL303 neither misses nor invents)
        wrong += [(variable, option, got[variable]) for variable, needs in table.items()
                  if (got[variable] != "") != (option in needs)]
    assert wrong == [], wrong
