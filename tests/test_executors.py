"""Executors beyond Slurm (launch.executor): the spec's kubernetes and skypilot sections, the
refusals of what only the user knows, and the records (generator/executors.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.artifacts import render_all
from generator.calculator.resolve import resolve as resolve_spec
from generator.errors import UserError
from generator.executors import executor_of, executors
from generator.run import load_spec

from .helpers import spec_dict

K8S = {"image": "nvcr.io/nvidia/pytorch:25.01-py3", "volumes": [{"claim": "ckpt", "mount_path": "/ckpt"}]}


def load(tmp_path: Path, **overrides) -> object:
    import yaml

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_dict(**overrides), sort_keys=False))
    return load_spec(path)


def test_slurm_is_the_default_and_every_record_is_complete() -> None:
    assert list(executors()) == ["slurm", "trainjob", "pytorchjob", "jobset", "skypilot"]
    assert executor_of("slurm").chains and not executor_of("trainjob").chains
    assert {e.file for e in executors().values()} == {"launch.sbatch", "trainjob.yaml", "pytorchjob.yaml",
                                                      "jobset.yaml", "sky.yaml"}


def test_the_kubernetes_section_is_typed(tmp_path: Path) -> None:
    spec = load(tmp_path, launch={"executor": "jobset"}, checkpoint={"dir": "/ckpt/run"},
                kubernetes={**K8S, "node_selector": {"gpu": "h100"},
                            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]})
    assert spec.launch.executor == "jobset"
    assert spec.kubernetes.volumes[0].mount_path == "/ckpt" and spec.kubernetes.max_restarts == 3
    assert spec.kubernetes.tolerations[0].operator == "Exists"
    assert spec.kubernetes.node_selector == (("gpu", "h100"),)


@pytest.mark.parametrize(("overrides", "message"), [
    ({"launch": {"executor": "trainjob"}}, r"spec.yaml:\d+:\d+: \$.launch.executor: trainjob runs the pods "
                                            r"from a container image; give kubernetes.image, e.g. kubernetes: \{image:"),
    ({"launch": {"executor": "pytorchjob", "launcher": "srun"}, "kubernetes": K8S},
     r"pytorchjob starts the launcher torchrun or deepspeed or accelerate, not srun \(srun starts one task "
     r"per process through Slurm's own daemons, which only a Slurm job has; .*\); set launch.launcher: "
     r"torchrun \(or launch.executor: slurm\)"),
    ({"launch": {"executor": "jobset"}, "kubernetes": {**K8S, "scheduler": "volcano"}},
     r"spec.yaml:\d+:\d+: \$.kubernetes.scheduler: volcano with launch.executor jobset: the JobSet CRD has no "
     r"gang-scheduling field: .* use launch.executor: pytorchjob"),
    ({"launch": {"executor": "trainjob"}, "kubernetes": {**K8S, "scheduler": "volcano"}},
     r"\$.kubernetes.scheduler: volcano with launch.executor trainjob: a TrainJob's runtime places its pods: "
     r"runtimePatches cannot set schedulerName.* podGroupPolicy \{volcano: \{\}\}"),
    ({"launch": {"executor": "skypilot", "launcher": "srun"}, "skypilot": {"accelerator": "H100"}},
     r"skypilot starts the launcher torchrun or deepspeed or accelerate, not srun \(srun starts one task"),
    ({"launch": {"executor": "jobset"}, "checkpoint": {"dir": "/scratch/run"}, "kubernetes": K8S},
     r"spec.yaml:\d+:\d+: \$.checkpoint.dir: /scratch/run is on none of the volumes kubernetes.volumes "
     r"mounts \(/ckpt\): a restarted jobset node would find no checkpoint to resume; mount one there, "
     r"e.g. kubernetes: \{volumes: \[\{claim: checkpoints, mount_path: /scratch\}\]\}"),
    ({"launch": {"executor": "skypilot"}, "checkpoint": {"dir": "/ckpt/run"},
      "skypilot": {"accelerator": "H100"}},
     r"\$.checkpoint.dir: /ckpt/run is on none of the volumes skypilot.buckets mounts \(none\): a restarted "
     r"skypilot node would find no checkpoint to resume; mount one there, e.g. skypilot: \{buckets: "
     r"\{/ckpt: s3://my-bucket/ckpt\}\}"),
    ({"name": "a-name-long-enough-to-overflow-the-sixty-three-characters-of-a-pod", "launch": {"executor": "jobset"},
      "kubernetes": K8S},
     r"\$.name: 'a-name-long.*' names the JobSet; its longest pod name .*-node-0-1-abcde has 81 characters, more "
     r"than 63; use at most 48"),
    ({"name": "a-name-of-forty-five-characters-for-the-mpi45", "framework": "megatron-deepspeed",
      "launch": {"executor": "trainjob", "launcher": "deepspeed"}, "kubernetes": K8S},
     r"names the Kubeflow Trainer v2 TrainJob; its longest pod name a-name.*-launcher-0-0-abcde has 64 "
     r"characters, more than 63; use at most 44"),
    ({"launch": {"executor": "skypilot"}},
     r"\$.launch.executor: skypilot asks SkyPilot for the GPUs by its name of them; give "
     r"skypilot.accelerator, e.g. skypilot: \{accelerator: H100\}"),
])
def test_what_only_the_user_knows_is_refused_where_it_is_missing(tmp_path: Path, overrides: dict,
                                                                 message: str) -> None:
    with pytest.raises(UserError, match=message):
        load(tmp_path, **overrides)


LONG = {"cluster": {"nodes": 2, "gpus_per_node": 2, "gpu": "h100-80gb", "allow_oversize": True},
        "model": {"num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "vocab_size": 32000,
                  "seq_length": 2048},
        "parallelism": {"tp": 1, "pp": 1},
        "batch": {"micro_batch_size": 1, "gradient_accumulation_steps": 64},
        "training": {"train_iters": 500, "lr": 1.0e-3, "warmup": {"iters": 2}, "precision": "bf16"},
        "checkpoint": {"dir": "/ckpt/run", "interval": 400}, "slurm": {"time": "01:00:00"}}


def test_only_slurm_chains_jobs_and_exits_before_its_limit(tmp_path: Path) -> None:
    """A run longer than its time limit: on Slurm a chain of jobs, each exiting before the limit
    (--exit-duration-in-mins); a pod that exited 0 there would end its job unfinished, so on
    Kubernetes neither (the pods restart and resume), and kubernetes.time is the limit the
    rules judge (GL310: an interval beyond the deadline)."""
    from generator.calculator.resolve import resolve

    slurm = resolve(load(tmp_path, **LONG))
    assert slurm.allocations and slurm.exit_duration_minutes
    k8s = resolve(load(tmp_path, **LONG, launch={"executor": "trainjob"},
                       kubernetes={**K8S, "time": "00:30:00"}))
    assert k8s.allocations is None and k8s.exit_duration_minutes is None
    assert "--exit-duration-in-mins" not in render_all(k8s)["trainjob.yaml"]
    assert [w.code for w in k8s.warnings if w.code in ("GL309", "GL310")] == ["GL310"]
    gl310 = next(w for w in k8s.warnings if w.code == "GL310")
    assert "0.5 h allocation" in gl310.message and "spec.yaml" in str(gl310.values)


def test_explain_says_how_the_pods_start(tmp_path: Path) -> None:
    from generator.calculator.resolve import resolve
    from generator.explain import explain_text

    text = explain_text(resolve(load(tmp_path, launch={"executor": "jobset"}, kubernetes=K8S)))
    assert "  jobset.yaml: JobSet, 2 pods × 8 h100-80gb\n" in text
    assert "16 in all), started by torchrun: Kubernetes' indexed Job sets JOB_COMPLETION_INDEX" in text
    assert "nothing is saved (no checkpoint.dir)" in text
    assert "Launch" not in explain_text(resolve(load(tmp_path)))  # Slurm: as before


@pytest.mark.parametrize("executor", ["trainjob", "pytorchjob", "jobset", "skypilot"])
def test_lint_reads_the_generated_files_clean_and_finds_a_pod_count_that_disagrees(
        tmp_path: Path, executor: str) -> None:
    """The files generate writes lint clean (the pods' script read from the ConfigMap, or
    SkyPilot's mounted launch.sh, with the job's counts); one number changed in the YAML, lint
    names it at its line (GL320) as it does an #SBATCH line that disagrees with torchrun."""
    from generator.calculator.resolve import resolve
    from generator.lint import lint_paths

    extra = {"skypilot": {"accelerator": "H100"}} if executor == "skypilot" else {"kubernetes": K8S}
    extra["checkpoint"] = {"dir": "/ckpt/run"}
    if executor == "skypilot":
        extra["skypilot"]["buckets"] = {"/ckpt": "s3://team-bucket/ckpt"}
    files = render_all(resolve(load(tmp_path, launch={"executor": executor}, **extra)))
    out = tmp_path / "out"
    out.mkdir()
    for name, text in files.items():
        (out / name).write_text(text)
    report = lint_paths([out])
    assert [i.finding.code for i in report.items] == [] and report.errors == 0
    target = out / executor_of(executor).file
    text = target.read_text()
    changed = {"trainjob": ("numNodes: 2", "numNodes: 3"), "pytorchjob": ("Worker:\n      replicas: 1",
                                                                          "Worker:\n      replicas: 2"),
               "jobset": ("parallelism: 2", "parallelism: 3"), "skypilot": ("num_nodes: 2", "num_nodes: 3")}
    old, new = changed[executor]
    assert old in text
    target.write_text(text.replace(old, new))
    line = text[:text.index(old)].count("\n") + 1 + old.count("\n")
    found = [(i.finding.code, i.line, i.path) for i in lint_paths([out]).items]
    assert ("GL320", line, str(target)) in found, found


def test_lint_warns_of_pods_without_shared_memory(tmp_path: Path) -> None:
    from generator.calculator.resolve import resolve
    from generator.lint import lint_paths

    text = render_all(resolve(load(tmp_path, launch={"executor": "jobset"}, kubernetes=K8S)))["jobset.yaml"]
    target = tmp_path / "jobset.yaml"
    target.write_text(text.replace("medium: Memory", "medium: ''"))
    found = [(i.finding.code, i.finding.severity) for i in lint_paths([target]).items]
    assert found == [("GL321", "warning")]


def test_generate_check_covers_the_executors_file(tmp_path: Path) -> None:
    import yaml
    from typer.testing import CliRunner

    from generator.cli import app

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_dict(launch={"executor": "trainjob"}, kubernetes=K8S)))
    out = tmp_path / "out"
    runner = CliRunner()
    assert runner.invoke(app, ["generate", str(path), "--out", str(out)]).exit_code == 0
    assert runner.invoke(app, ["generate", str(path), "--out", str(out), "--check"]).exit_code == 0
    (out / "trainjob.yaml").write_text((out / "trainjob.yaml").read_text().replace("numNodes: 2", "numNodes: 4"))
    result = runner.invoke(app, ["generate", str(path), "--out", str(out), "--check"])
    assert result.exit_code == 1 and "trainjob.yaml" in result.output + result.stderr


HOSTILE = ["$(touch pwned)", "`touch pwned`", "a; touch pwned", "it's \"quoted\"", "tab\tbed", "*"]


@pytest.mark.parametrize("executor", ["trainjob", "jobset", "skypilot"])
def test_the_pods_script_is_shellcheck_clean_and_passes_hostile_words_literally(tmp_path: Path,
                                                                                executor: str) -> None:
    """launch.sh as the pods run it: shellcheck finds nothing, and bash hands torchrun the
    extra arguments and exports the environment exactly as the spec gives them (a torchrun on
    PATH that records its argv and environment stands in: what is tested is the script's
    quoting), running nothing they contain."""
    import json
    import subprocess
    import sys

    import yaml

    from .test_artifacts import shellcheck

    extra = {"skypilot": {"accelerator": "H100"}} if executor == "skypilot" else {"kubernetes": K8S}

    def pod_files(folder: Path, **launch) -> None:
        files = render_all(resolve_spec(load(tmp_path, launch={"executor": executor, **launch}, **extra)))
        mounted = files if executor == "skypilot" else \
            list(yaml.safe_load_all(files[executor_of(executor).file]))[0]["data"]
        folder.mkdir()
        for name, text in mounted.items():
            (folder / name).write_text(text)

    pod_files(tmp_path / "plain", env={"NCCL_DEBUG": "WARN"}, extra_args=["--use-flash-attn"])
    check = subprocess.run([shellcheck(), "-x", "-S", "style", "launch.sh"], cwd=tmp_path / "plain",
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout
    pod = tmp_path / "pod"
    pod_files(pod, extra_args=HOSTILE, check_extra_args=False,
              env={"NCCL_DEBUG": "$(touch pwned)", "WEIRD": "it's \"quoted\""})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "torchrun").write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                                      "print(json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ)}))\n")
    (bin_dir / "torchrun").chmod(0o755)
    proc = subprocess.run(["bash", str(pod / "launch.sh")], cwd=tmp_path,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin", **INJECTED}, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["argv"][-len(HOSTILE):] == HOSTILE
    assert got["env"]["NCCL_DEBUG"] == "$(touch pwned)" and got["env"]["WEIRD"] == "it's \"quoted\""
    assert got["env"]["GEN_LAUNCH_DIR"] == str(pod)
    assert not (tmp_path / "pwned").exists() and not (pod / "pwned").exists()


# what each executor injects into the pod of node 1 of 2 (EXECUTORS.md; one environment for all)
INJECTED = {"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "t-node-0-0.t", "PET_MASTER_PORT": "29500",
            "SKYPILOT_NUM_NODES": "2", "SKYPILOT_NODE_IPS": "10.0.0.1\n10.0.0.2", "SKYPILOT_NODE_RANK": "1",
            "JOB_COMPLETION_INDEX": "1", "MASTER_ADDR": "t-node-0-0.t", "MASTER_PORT": "29500"}
MASTER = {"trainjob": "t-node-0-0.t", "pytorchjob": "t-node-0-0.t", "jobset": "t-node-0-0.t", "skypilot": "10.0.0.1"}
ON_PODS = [(e, lr) for e in ("trainjob", "pytorchjob", "jobset", "skypilot") for lr in ("torchrun", "deepspeed",
                                                                                         "accelerate")
           if executor_of(e).mpi_for(lr) is None]  # a TrainJob's DeepSpeed: mpirun (test below)


@pytest.mark.parametrize(("executor", "name"), ON_PODS, ids=[f"{e}-{n}" for e, n in ON_PODS])
def test_every_launcher_on_a_pod_gets_the_node_rank_and_master_the_executor_injects(
        tmp_path: Path, executor: str, name: str) -> None:
    """launch.sh run as node 1's pod, the launcher replaced by a recorder of its argv: the
    launcher's own parser (launchers' dialect, tests/test_launchers.py) reads the plan's nodes and
    processes, node rank 1 and the executor's master from it; the DeepSpeed launcher's hostfile
    has one line per node (--no_ssh still counts them)."""
    import json
    import subprocess
    import sys

    import yaml

    from generator.dialects.launchers import launcher

    from .test_launchers import _counts, parsed

    extra = {"skypilot": {"accelerator": "H100"}} if executor == "skypilot" else {"kubernetes": K8S}
    framework = {"accelerate": "fsdp", "deepspeed": "megatron-deepspeed"}.get(name, "megatron-lm")
    parallel = {"parallelism": {"tp": 1, "pp": 1, "zero_stage": 3}} if name == "accelerate" else {}
    plan = resolve_spec(load(tmp_path, framework=framework, launch={"executor": executor, "launcher": name},
                             **parallel, **extra))
    files = render_all(plan)
    mounted = files if executor == "skypilot" else \
        list(yaml.safe_load_all(files[executor_of(executor).file]))[0]["data"]
    pod = tmp_path / "pod"
    pod.mkdir()
    for file, text in mounted.items():
        (pod / file).write_text(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    command = launcher(name).commands[0].split()
    (bin_dir / command[0]).write_text(
        f"#!{sys.executable}\nimport json, sys\nargv = sys.argv[1:]\n"
        "hosts = open(argv[argv.index('--hostfile') + 1].split('=')[-1]).read() if '--hostfile' in argv else ''\n"
        "hosts = hosts or next((open(a.split('=', 1)[1]).read() for a in argv if a.startswith('--hostfile=')), '')\n"
        "print(json.dumps({'argv': argv, 'hostfile': hosts}))\n")
    (bin_dir / command[0]).chmod(0o755)
    proc = subprocess.run(["bash", str(pod / "launch.sh")], cwd=tmp_path,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin", **INJECTED}, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    args = parsed(name, got["argv"][len(command) - 1:])
    assert _counts(name, args) == (2, 8)
    rank, master = {"torchrun": ("node_rank", "master_addr"), "deepspeed": ("node_rank", "master_addr"),
                    "accelerate": ("machine_rank", "main_process_ip")}[name]
    assert (int(getattr(args, rank)), getattr(args, master)) == (1, MASTER[executor])
    if name == "deepspeed":
        assert args.no_ssh and got["hostfile"].splitlines() == ["node-0 slots=8", "node-1 slots=8"]


def test_the_world_of_a_plain_torchrun_is_the_one_the_operator_injects(tmp_path: Path) -> None:
    """torchrun with no --nnodes or --nproc-per-node on a TrainJob takes PET_NNODES and
    PET_NPROC_PER_NODE (numNodes, numProcPerNode), not its own defaults: lint judges that world
    against the arguments and names the YAML's lines; with numNodes 2 it fits."""
    from generator.lint import lint_paths

    source = Path(__file__).parent / "data" / "executors" / "trainjob_plain_torchrun.yaml"
    text = source.read_text()
    line = text[:text.index("numNodes: 1")].count("\n") + 1
    found = [(i.finding.code, i.line, Path(i.path).name) for i in lint_paths([source]).items]
    assert found == [("GL003", line, source.name)]
    fixed = tmp_path / source.name
    fixed.write_text(text.replace("numNodes: 1", "numNodes: 2"))
    assert lint_paths([fixed]).items == []


def test_the_mpi_launch_gives_every_rank_the_plans_world(tmp_path: Path) -> None:
    """A TrainJob with the DeepSpeed launcher (the deepspeed-distributed runtime): launch.sh on the
    launcher pod runs mpirun over the runtime's hostfile with -n the plan's world and the plan's
    processes per host; each rank's shell, given what OpenMPI gives a rank (OMPI_COMM_WORLD_RANK,
    _SIZE, _LOCAL_RANK), hands the program RANK, WORLD_SIZE, LOCAL_RANK and the master, the
    variables DeepSpeed's and Megatron's env:// initialisation read; a world of another size is
    refused. Hostile extra words and launch.env values reach each rank literally. An mpirun on
    PATH records its words and runs the rank's command for the first and last rank (the real
    mpirun: tests/test_executors_e2e.py)."""
    import json
    import subprocess
    import sys

    import yaml

    plan = resolve_spec(load(tmp_path, framework="megatron-deepspeed",
                             launch={"executor": "trainjob", "launcher": "deepspeed", "extra_args": HOSTILE,
                                     "check_extra_args": False, "env": {"WEIRD": "it's \"quoted\""}},
                             kubernetes=K8S, checkpoint={"dir": "/ckpt/run"}))
    configmap = list(yaml.safe_load_all(render_all(plan)["trainjob.yaml"]))[0]["data"]
    pod, bin_dir = tmp_path / "pod", tmp_path / "bin"
    pod.mkdir()
    bin_dir.mkdir()
    for file, text in configmap.items():
        (pod / file).write_text(text.replace("/etc/mpi/hostfile", str(tmp_path / "hostfile")))
    (tmp_path / "hostfile").write_text("t-launcher-0-0.t slots=8\nt-node-0-0.t slots=8\n")
    (bin_dir / "mpirun").write_text(
        f"#!{sys.executable}\nimport json, os, subprocess, sys\nargv = sys.argv[1:]\n"
        "k = argv.index('bash')\nn, per = int(argv[argv.index('-n') + 1]), int(argv[argv.index('--npernode') + 1])\n"
        "size = int(os.environ.get('FAKE_SIZE', n))\n"
        "for rank in (0, n - 1):\n"
        "    env = {x: os.environ[x] for x in [argv[i + 1] for i, w in enumerate(argv) if w == '-x']}\n"
        "    env['HOSTILE'] = os.environ['HOSTILE']\n"
        "    env.update(OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_SIZE=str(size),\n"
        "               OMPI_COMM_WORLD_LOCAL_RANK=str(rank % per))\n"
        "    subprocess.run(argv[k:], env=env, check=True)\n"
        "print(json.dumps({'mpirun': argv[:k]}))\n")
    (bin_dir / "python").write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                                    "assert sys.argv[-6:] == json.loads(os.environ['HOSTILE']), sys.argv\n"
                                    "assert os.environ['WEIRD'] == 'it\\'s \"quoted\"', os.environ['WEIRD']\n"
                                    "print(json.dumps({k: os.environ.get(k) for k in ('RANK', 'WORLD_SIZE', "
                                    "'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT')}))\n")
    for tool in ("mpirun", "python"):
        (bin_dir / tool).chmod(0o755)
    path = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOSTILE": json.dumps(HOSTILE)}
    proc = subprocess.run(["bash", str(pod / "launch.sh")], cwd=tmp_path, env=path, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    *ranks, mpirun = [json.loads(line) for line in proc.stdout.splitlines()]
    assert not (tmp_path / "pwned").exists()  # the extra words reach the program as they are, run by nothing
    words = mpirun["mpirun"]
    assert words[:6] == ["--hostfile", str(tmp_path / "hostfile"), "-n", "16", "--npernode", "8"]
    assert ranks == [{"RANK": "0", "WORLD_SIZE": "16", "LOCAL_RANK": "0", "MASTER_ADDR": "t-launcher-0-0.t",
                      "MASTER_PORT": "29500"},
                     {"RANK": "15", "WORLD_SIZE": "16", "LOCAL_RANK": "7", "MASTER_ADDR": "t-launcher-0-0.t",
                      "MASTER_PORT": "29500"}]
    wrong = subprocess.run(["bash", str(pod / "launch.sh")], env={**path, "FAKE_SIZE": "8"}, capture_output=True,
                           text=True, check=False)
    assert wrong.returncode != 0 and "mpirun started 8 ranks but the plan needs 16" in wrong.stderr
    (tmp_path / "hostfile").write_text("t-launcher-0-0.t slots=8\n")
    short = subprocess.run(["bash", str(pod / "launch.sh")], env=path, capture_output=True, text=True, check=False)
    assert short.returncode == 1 and "the hostfile names 1 hosts but the plan needs 2" in short.stderr


@pytest.mark.parametrize(("launch", "expected"), [
    ({"executor": "trainjob", "launcher": "deepspeed"},
     {"name": "trainjob", "file": "trainjob.yaml", "kind": "trainer.kubeflow.org/v1alpha1/TrainJob",
      "runtime": "deepspeed-distributed", "pods": 2, "processes_per_pod": 8, "launcher": "mpirun"}),
    ({"executor": "pytorchjob", "launcher": "deepspeed"},
     {"name": "pytorchjob", "file": "pytorchjob.yaml", "kind": "kubeflow.org/v1/PyTorchJob", "runtime": None,
      "pods": 2, "processes_per_pod": 8, "launcher": "deepspeed"}),
    ({"executor": "slurm", "launcher": "torchrun"},
     {"name": "slurm", "file": "launch.sbatch", "kind": None, "runtime": None, "pods": 2, "processes_per_pod": 8,
      "launcher": "torchrun"}),
])
def test_plan_json_says_how_the_run_starts(tmp_path: Path, launch: dict, expected: dict) -> None:
    """plan.json's executor block: the file and object, pods and processes, the launcher (mpirun
    on an MPI runtime), what gives the rendezvous, restarts and the time limit, from the records."""
    import json

    extra = {} if launch["executor"] == "slurm" else {"kubernetes": {**K8S, "time": "1-00:00:00"}}
    plan = resolve_spec(load(tmp_path, framework="megatron-deepspeed", launch=launch, checkpoint={"dir": "/ckpt/run"},
                             **extra))
    block = json.loads(render_all(plan)["plan.json"])["executor"]
    assert {k: block[k] for k in expected} == expected
    record = executor_of(launch["executor"])
    assert block["restarts"] == record.restarts
    assert block["rendezvous"] == (record.mpi.injects if expected["launcher"] == "mpirun" else record.injects)
    if launch["executor"] != "slurm":
        assert block["time_limit"] == {"setting": "kubernetes.time", "value": "1-00:00:00", "seconds": 86400}


def _at(text: str, needle: str, skip: int = 0, after: str = "") -> tuple[int, int]:
    """(line, column), 1-based, where ``needle`` (after ``skip`` more characters) is in ``text``,
    the first after ``after``."""
    index = text.index(needle, text.index(after)) + skip
    return text[:index].count("\n") + 1, index - text.rfind("\n", 0, index)


@pytest.mark.parametrize(("name", "needle", "skip", "what"), [
    ("pytorchjob_embedded_script.yaml", "--nnodes 3", len("--nnodes "), "ConfigMap run-scripts, key train.sh"),
    ("skypilot_embedded_run.yaml", "--nnodes=3", 0, "the task's run"),
    ("inline", "--nnodes 3", len("--nnodes "), "the container's bash -c command"),
])
def test_a_finding_in_an_embedded_script_names_the_yaml_files_line_and_column(
        tmp_path: Path, name: str, needle: str, skip: int, what: str) -> None:
    """A launch script embedded in YAML — a ConfigMap key (a block scalar, indented), a
    SkyPilot run block, a container's one-line bash -c command (quoted) — is read as a script;
    its findings point at the YAML file's own line and column of the word, the embedded text
    named, not at a line or column of the text taken out of the YAML."""
    from generator.lint import lint_paths

    data = Path(__file__).parent / "data" / "executors"
    if name == "inline":  # the script as the container's command, one double-quoted line
        text = (data / "pytorchjob_embedded_script.yaml").read_text()
        script = ("torchrun --nnodes 3 --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 8 "
                  "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
                  "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 64 --train-iters 1000 "
                  "--lr 3e-4 --bf16")
        text = text.replace("command: [bash, /scripts/train.sh]", f'command: [bash, -c, "{script}"]')
    else:
        text = (data / name).read_text()
    path = tmp_path / (name if name != "inline" else "inline.yaml")
    path.write_text(text)
    line, col = _at(text, needle, skip, 'command: [bash, -c, "' if name == "inline" else "")
    found = {i.finding.code: i for i in lint_paths([path]).items}
    gl320 = found["GL320"].finding
    assert dict(gl320.values)["launcher_nodes"] == f"{path}:{line}:{col} ({what})"
    assert text.splitlines()[line - 1][col - 1:].startswith(needle[skip:])


@pytest.mark.parametrize(("executor", "launcher", "scheduler"), [
    ("trainjob", "deepspeed", "default"), ("jobset", "deepspeed", "default"), ("pytorchjob", "torchrun", "volcano")])
def test_import_reads_the_launcher_back(tmp_path: Path, executor: str, launcher: str, scheduler: str) -> None:
    """import of a generated file gives the spec's executor and launcher back (the
    deepspeed-distributed runtime's mpirun: the DeepSpeed launcher), and that spec generates the
    same job."""
    import yaml
    from typer.testing import CliRunner

    from generator.cli import app

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_dict(framework="megatron-deepspeed", checkpoint={"dir": "/ckpt/run"},
                                             launch={"executor": executor, "launcher": launcher},
                                             kubernetes={**K8S, "scheduler": scheduler, "queue": "team-a"})))
    runner = CliRunner()
    assert runner.invoke(app, ["generate", str(path), "--out", str(tmp_path / "out")]).exit_code == 0
    file = executor_of(executor).file
    back = tmp_path / "back.yaml"
    result = runner.invoke(app, ["import", str(tmp_path / "out" / file), "-o", str(back)])
    assert result.exit_code == 0, result.output
    launch = yaml.safe_load(back.read_text())["launch"]
    assert (launch["executor"], launch.get("launcher", "torchrun")) == (executor, launcher)
    kubernetes = yaml.safe_load(back.read_text())["kubernetes"]
    assert (kubernetes.get("scheduler", "default"), kubernetes["queue"]) == (scheduler, "team-a")
    assert runner.invoke(app, ["generate", str(back), "--out", str(tmp_path / "again")]).exit_code == 0
    body = [yaml.safe_load_all((tmp_path / folder / file).read_text()) for folder in ("out", "again")]
    assert list(body[0])[1]["spec"] == list(body[1])[1]["spec"]
