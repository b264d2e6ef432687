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
     r"pytorchjob starts the launcher torchrun, not srun; set launch.launcher: torchrun"),
    ({"framework": "megatron-deepspeed", "launch": {"executor": "trainjob", "launcher": "deepspeed"},
      "kubernetes": K8S},
     r"trainjob starts the launcher torchrun, not deepspeed \(the DeepSpeed launcher needs the "
     r"deepspeed-distributed runtime .* DeepSpeed's engine runs under torchrun as well\); set "
     r"launch.launcher: torchrun"),
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
    assert '--node-rank="${JOB_COMPLETION_INDEX}"' in text and "16 in all" in text
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
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PET_NNODES": "2", "SKYPILOT_NUM_NODES": "2",
           "SKYPILOT_NODE_IPS": "10.0.0.1\n10.0.0.2", "SKYPILOT_NODE_RANK": "0", "JOB_COMPLETION_INDEX": "0",
           "MASTER_ADDR": "t-node-0-0.t", "MASTER_PORT": "29500"}
    proc = subprocess.run(["bash", str(pod / "launch.sh")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["argv"][-len(HOSTILE):] == HOSTILE
    assert got["env"]["NCCL_DEBUG"] == "$(touch pwned)" and got["env"]["WEIRD"] == "it's \"quoted\""
    assert got["env"]["GEN_LAUNCH_DIR"] == str(pod)
    assert not (tmp_path / "pwned").exists() and not (pod / "pwned").exists()


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
