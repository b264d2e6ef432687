"""End to end on this machine: the two pods of each executor as two local process groups, each
given exactly the environment its operator (or SkyPilot) injects for its rank, as
shared/reference/executors/EXECUTORS.md records it, and the container environment the file
sets, running the file's own container command with the real launcher — torchrun, the DeepSpeed
launcher (--no_ssh, one per pod) or accelerate launch — and the CPU stand-in for Megatron's loop
(tests/oracle/ckpt_train.py) or for a Trainer entry point (tests/oracle/trainer_ckpt_train.py):
both ranks meet, train and save to the shared checkpoint folder; killed after a save, the
restarted pods resume from that checkpoint. A TrainJob with the DeepSpeed launcher (the
deepspeed-distributed runtime) runs its launcher pod's command under real OpenMPI mpirun, ssh to
the node pods standing in as a local agent (openmpi-bin: skipped locally without it, failed in CI).

The emulation, and only it: the ConfigMap's files are written to a folder that stands for its
mount (the command's /etc/gen-launch/ path is that folder); a claim's mount path is a real
folder both pods share (ReadWriteMany). Pod hostnames cannot resolve here, so where a name is
spelled — by the operator (TrainJob's PET_MASTER_ADDR, PyTorchJob's MASTER_ADDR) or by the file
itself (JobSet's MASTER_ADDR) — the test gives 127.0.0.1 and a free port instead; SkyPilot
injects IP addresses, 127.0.0.1 for both nodes here."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from generator.artifacts import render_all
from generator.calculator.resolve import resolve
from generator.render.executor_files import MOUNT
from generator.run import load_spec

from .conftest import ROOT, require_oracle

NODES, ITERS, INTERVAL = 2, 6, 3
STANDIN = ROOT / "tests" / "oracle" / "ckpt_train.py"
TRAINER_STANDIN = ROOT / "tests" / "oracle" / "trainer_ckpt_train.py"
# (executor, launcher): torchrun on every executor; the DeepSpeed launcher and accelerate launch
# once where the operator injects the rendezvous (PET_*) and once where the pod's script spells
# it (SkyPilot's, as JobSet's: each launcher's words on every executor are read back by its own
# parser in test_executors.py, so a run per pair would only repeat these)
RUNS = [("trainjob", "torchrun"), ("pytorchjob", "torchrun"), ("jobset", "torchrun"), ("skypilot", "torchrun"),
        ("pytorchjob", "deepspeed"), ("skypilot", "deepspeed"),
        ("trainjob", "accelerate"), ("skypilot", "accelerate")]


def spec(tmp_path: Path, executor: str, launcher: str = "torchrun") -> dict:
    """Megatron-LM's arguments for torchrun and the DeepSpeed launcher; accelerate launch starts
    an FSDP run (Trainer arguments), as it does no Megatron-LM run."""
    ckpt = tmp_path / "claim"
    data = {
        "name": f"e2e-{executor}", "framework": "megatron-lm",
        "cluster": {"nodes": NODES, "gpus_per_node": 1, "gpu": "cpu"},
        "model": {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 128,
                  "seq_length": 32},
        "parallelism": {"tp": 1},
        "batch": {"micro_batch_size": 1, "gradient_accumulation_steps": 1},
        "training": {"train_iters": ITERS, "lr": 1.0e-3, "warmup": {"iters": 1}, "precision": "fp32"},
        "checkpoint": {"dir": str(ckpt / "run"), "interval": INTERVAL},
        "launch": {"executor": executor, "launcher": launcher, "entrypoint": str(STANDIN),
                   "env": {"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
                           "GEN_LAUNCH_STANDIN_STEP_S": "0.4"}},
        "kubernetes": {"image": "local", "volumes": [{"claim": "ckpt", "mount_path": str(ckpt)}]},
    }
    if launcher == "accelerate":
        data.update(framework="fsdp", parallelism={"zero_stage": 3})
        data["launch"]["entrypoint"] = str(TRAINER_STANDIN)
    return data


def saved(run: Path) -> int:
    """The step of the last checkpoint in ``run``: Megatron's tracker file, the Trainer's
    newest checkpoint-N folder; 0 without one."""
    tracker = run / "latest_checkpointed_iteration.txt"
    if tracker.exists():
        return int(tracker.read_text().strip() or 0)
    steps = [int(m.group(1)) for p in run.glob("checkpoint-*") if (m := re.fullmatch(r"checkpoint-(\d+)", p.name))]
    return max(steps, default=0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def injected(executor: str, job: str, rank: int, port: int) -> dict[str, str]:
    """What the operator or SkyPilot gives the pod of ``rank`` (EXECUTORS.md), hostnames as 127.0.0.1."""
    if executor == "trainjob":  # torch plugin: PET_* only (PET_MASTER_ADDR <job>-node-0-0.<job>)
        return {"PET_NNODES": str(NODES), "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": str(rank),
                "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": str(port)}
    if executor == "pytorchjob":  # MASTER_ADDR <job>-master-0; RANK/WORLD_SIZE count pods
        return {"PYTHONUNBUFFERED": "1", "MASTER_ADDR": "127.0.0.1", "PET_MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port), "PET_MASTER_PORT": str(port), "WORLD_SIZE": str(NODES),
                "RANK": str(rank), "PET_NODE_RANK": str(rank), "PET_NPROC_PER_NODE": "1",
                "PET_NNODES": str(NODES)}
    if executor == "jobset":  # Kubernetes' indexed Job: the completion index only
        return {"JOB_COMPLETION_INDEX": str(rank)}
    return {"SKYPILOT_NODE_RANK": str(rank), "SKYPILOT_NODE_IPS": "127.0.0.1\n127.0.0.1",
            "SKYPILOT_NUM_NODES": str(NODES), "SKYPILOT_NUM_GPUS_PER_NODE": "0", "SKYPILOT_TASK_ID": "e2e"}


def pod_commands(executor: str, files: dict[str, str], work: Path, port: int) -> list[tuple[list[str], dict]]:
    """(command, env) of each pod: the file's container command and env, the mounts emulated."""
    job = f"e2e-{executor}"
    if executor == "skypilot":
        task = yaml.safe_load(files["sky.yaml"])
        mount = work / "sky-mount"  # file_mounts {~/gen-launch: .}: the task's folder
        mount.mkdir()
        for name, text in files.items():
            (mount / name).write_text(text)
        run = task["run"].replace("~/gen-launch", str(mount))
        return [(["bash", "-c", run], injected(executor, job, rank, port)) for rank in range(NODES)]
    docs = list(yaml.safe_load_all(files[f"{executor}.yaml"]))
    configmap, obj = docs
    mount = work / "configmap"
    mount.mkdir()
    for name, text in configmap["data"].items():
        (mount / name).write_text(text)
    if executor == "trainjob":
        command, env = obj["spec"]["trainer"]["command"], obj["spec"]["trainer"].get("env", [])
    elif executor == "pytorchjob":
        container = obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
        command, env = container["command"], container.get("env", [])
    else:
        container = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
        command, env = container["command"], container.get("env", [])
    pod_env = {e["name"]: e["value"] for e in env}
    if "MASTER_ADDR" in pod_env:  # the file spells a hostname: the test's address and port
        pod_env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    command = [word.replace(MOUNT, str(mount)) for word in command]
    return [(command, {**pod_env, **injected(executor, job, rank, port)}) for rank in range(NODES)]


def start(pods: list[tuple[list[str], dict]], work: Path, attempt: int) -> list[subprocess.Popen]:
    base = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin", "HOME": str(work)}
    procs = []
    for rank, (command, env) in enumerate(pods):
        log = (work / f"pod-{rank}-{attempt}.log").open("w")
        procs.append(subprocess.Popen(command, env={**base, **env}, cwd=work, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True))
    return procs


def wait_all(procs: list[subprocess.Popen], timeout: float = 180) -> list[int]:
    deadline = time.monotonic() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(max(1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            kill(procs)
            pytest.fail("the pods did not finish")
    return codes


def descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (torchrun starts its workers in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill(procs: list[subprocess.Popen]) -> None:
    """A pod's failure: its container and every process in it end at once."""
    for p in procs:
        for pid in [p.pid, *descendants(p.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    for p in procs:
        p.wait()


@pytest.mark.parametrize(("executor", "launcher"), RUNS, ids=[f"{e}-{lr}" for e, lr in RUNS])
def test_the_pods_meet_train_save_and_resume(tmp_path: Path, executor: str, launcher: str) -> None:
    require_oracle("torch")  # torchrun and the stand-in's gloo process group
    if launcher != "torchrun":
        require_oracle(launcher)
    path = tmp_path / "spec.yaml"
    data = spec(tmp_path, executor, launcher)
    if executor == "skypilot":  # the claim stands for a bucket the nodes mount
        data.pop("kubernetes")
        data["skypilot"] = {"buckets": {str(tmp_path / "claim"): "s3://e2e-bucket/ckpt"}}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    files = render_all(resolve(load_spec(path)))
    pods = pod_commands(executor, files, tmp_path, free_port())
    run = tmp_path / "claim" / "run"
    first = start(pods, tmp_path, 0)
    deadline = time.monotonic() + 180
    while not saved(run) and time.monotonic() < deadline:
        if all(p.poll() is not None for p in first):
            break
        time.sleep(0.05)
    kill(first)  # a pod failure after the first save: every pod starts again
    logs = "\n".join(f.read_text() for f in sorted(tmp_path.glob("pod-*-0.log")))
    assert saved(run) == INTERVAL, logs[-3000:]
    second = start(pods, tmp_path, 1)
    codes = wait_all(second)
    logs = "\n".join(f.read_text() for f in sorted(tmp_path.glob("pod-*-1.log")))
    assert codes == [0, 0], logs[-3000:]
    progress = [json.loads(line) for line in (run / "progress.jsonl").read_text().splitlines()]
    assert [(p["start"], p["end"], p["exit"]) for p in progress] == [(INTERVAL, ITERS, "done")]
    assert progress[0].get("world", NODES) == NODES  # the Trainer stand-in reports its world
    assert saved(run) == ITERS


FAKE_SSH = """#!/bin/bash
# ssh to a node pod, emulated: the ssh options dropped, the command run here with the pod's own
# /tmp (OpenMPI's session folders: two pods on one machine would share them)
while [[ "$1" == -* ]]; do shift; [[ "$1" != -* ]] && shift; done
TMPDIR="${PODS_TMP}/$1"
mkdir -p "${TMPDIR}"
export TMPDIR
shift
exec bash -c "$*"
"""


def test_the_deepspeed_runtime_launcher_pod_starts_the_plans_world_with_mpirun(tmp_path: Path) -> None:
    """A TrainJob with the DeepSpeed launcher, on the deepspeed-distributed runtime: the launcher
    pod runs the file's command with the environment the MPI plugin injects (OMPI_MCA_*, the
    hostfile of the launcher pod and the node pods, one slot each); real OpenMPI's mpirun starts
    the ranks over "ssh" (a stand-in that runs the command here: the pods' sshd is what cannot run
    on one machine), each rank takes RANK/WORLD_SIZE/LOCAL_RANK from mpirun's OMPI_COMM_WORLD_*,
    the ranks meet, train, save, and a restarted launcher resumes from the checkpoint."""
    require_oracle("torch")
    if shutil.which("mpirun") is None:  # .ci/run installs openmpi-bin
        if os.environ.get("CI"):
            pytest.fail("mpirun is required in CI (apt-get install openmpi-bin)")
        pytest.skip("mpirun not installed (apt-get install openmpi-bin)")
    path = tmp_path / "spec.yaml"
    data = spec(tmp_path, "trainjob", "deepspeed")
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    files = render_all(resolve(load_spec(path)))
    configmap, job = yaml.safe_load_all(files["trainjob.yaml"])
    assert job["spec"]["runtimeRef"]["name"] == "deepspeed-distributed"
    mount, etc = tmp_path / "configmap", tmp_path / "etc-mpi"
    mount.mkdir()
    etc.mkdir()
    port = free_port()
    for name, text in configmap["data"].items():  # the master's hostname cannot resolve here
        (mount / name).write_text(text.replace("MASTER_ADDR=e2e-trainjob-launcher-0-0.e2e-trainjob",
                                               "MASTER_ADDR=127.0.0.1").replace("MASTER_PORT=29500",
                                                                                f"MASTER_PORT={port}"))
    hostfile = etc / "hostfile"  # the operator's: the launcher pod, then the node pods
    hostfile.write_text("e2e-trainjob-launcher-0-0.e2e-trainjob slots=1\ne2e-trainjob-node-0-0.e2e-trainjob slots=1\n")
    for name in configmap["data"]:
        (mount / name).write_text((mount / name).read_text().replace("/etc/mpi/hostfile", str(hostfile)))
    ssh = tmp_path / "ssh"
    ssh.write_text(FAKE_SSH)
    ssh.chmod(0o755)
    command = [w.replace(MOUNT, str(mount)) for w in job["spec"]["trainer"]["command"]]
    env = {"OMPI_MCA_orte_default_hostfile": str(hostfile), "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
           "OMPI_MCA_orte_set_default_slots": "1", "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
           "OMPI_MCA_plm_rsh_agent": str(ssh), "PODS_TMP": str(tmp_path / "pods-tmp"),
           "TMPDIR": str(tmp_path / "pods-tmp" / "launcher")}
    (tmp_path / "pods-tmp" / "launcher").mkdir(parents=True)
    if os.geteuid() == 0:  # the runtime runs as uid 1000; mpirun refuses root unless told
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    pods = [(command, env)]
    run = tmp_path / "claim" / "run"
    first = start(pods, tmp_path, 0)
    deadline = time.monotonic() + 180
    while not saved(run) and time.monotonic() < deadline and first[0].poll() is None:
        time.sleep(0.05)
    kill(first)
    log = (tmp_path / "pod-0-0.log").read_text()
    assert saved(run) == INTERVAL, log[-3000:]
    second = start(pods, tmp_path, 1)
    log = (tmp_path / "pod-0-1.log").read_text
    assert wait_all(second) == [0], log()[-3000:]
    progress = [json.loads(line) for line in (run / "progress.jsonl").read_text().splitlines()]
    assert [(p["start"], p["end"], p["exit"]) for p in progress] == [(INTERVAL, ITERS, "done")], log()[-3000:]


def test_a_pod_in_a_job_of_another_size_refuses_to_start(tmp_path: Path) -> None:
    """The operator says 3 nodes, the plan 2: launch.sh stops before torchrun."""
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec(tmp_path, "trainjob"), sort_keys=False))
    files = render_all(resolve(load_spec(path)))
    (command, env), _ = pod_commands("trainjob", files, tmp_path, free_port())
    proc = subprocess.run(command, env={**env, "PET_NNODES": "3", "PATH": "/usr/bin:/bin"}, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 1 and "this job has 3 nodes but the plan needs 2" in proc.stderr
