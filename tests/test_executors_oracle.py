"""The executors' files against the real schemas: each Kubernetes object against its CRD's own
openAPIV3Schema (shared/reference/executors/crds, converted as EXECUTORS.md says) with the CEL
rules on those CRDs evaluated by hand, the pod templates and the ConfigMap with
kubernetes-validate (strict: unknown fields refused), and the SkyPilot task with SkyPilot's own
schema and ``sky.Task.from_yaml``. In CI a missing oracle fails instead of skipping."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from generator.artifacts import render_all
from generator.calculator.resolve import resolve
from generator.run import load_spec

from .conftest import ROOT, require_oracle
from .helpers import spec_dict

REFERENCE = Path(os.environ.get("GEN_LAUNCH_EXECUTORS_REFERENCE", ROOT.parent / "shared" / "reference" / "executors"))
CRDS = {"TrainJob": "trainer.kubeflow.org_trainjobs.yaml", "PyTorchJob": "kubeflow.org_pytorchjobs.yaml",
        "JobSet": "jobset.x-k8s.io_jobsets.yaml"}
K8S = {"image": "nvcr.io/nvidia/pytorch:25.01-py3", "namespace": "llm", "queue": "team-a",
       "priority_class": "high", "service_account": "trainer", "image_pull_secrets": ["ngc"],
       "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
       "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
       "volumes": [{"claim": "datasets", "mount_path": "/data", "read_only": True},
                   {"claim": "checkpoints", "mount_path": "/ckpt"}],
       "shm_size": "64Gi", "time": "2-00:00:00", "max_restarts": 5}


def crd_schema(kind: str) -> dict:
    """The CRD's openAPIV3Schema as JSON Schema (Draft 7): x-kubernetes-* dropped, int-or-string
    as anyOf, nullable as a null type, additionalProperties false where properties are listed and
    unknown fields are not preserved."""
    path = REFERENCE / "crds" / CRDS[kind]
    if not path.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{path} missing")
        pytest.skip(f"{path} not found (set GEN_LAUNCH_EXECUTORS_REFERENCE)")
    crd = yaml.safe_load(path.read_text())
    version = next(v for v in crd["spec"]["versions"] if v.get("storage", v.get("served")))
    return _converted(copy.deepcopy(version["schema"]["openAPIV3Schema"]))


def _converted(node):
    if isinstance(node, list):
        return [_converted(n) for n in node]
    if not isinstance(node, dict):
        return node
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    out = {k: _converted(v) for k, v in node.items() if not k.startswith("x-kubernetes-") and k != "nullable"}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if "properties" in node and not preserve and "additionalProperties" not in node:
        out["additionalProperties"] = False
    return out


def cel_problems(obj: dict) -> list[str]:
    """The CEL rules of the CRDs that concern a generated object, by hand: the name an RFC-1035
    label of at most 63 characters (TrainJob's root rules, the webhooks' for PyTorchJob and
    JobSet), numProcPerNode >= 1, and JobSet's longest pod name within 63."""
    name, problems = obj["metadata"]["name"], []
    if not re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", name) or len(name) > 63:
        problems.append(f"name {name}")
    trainer = obj["spec"].get("trainer", {})
    if "numProcPerNode" in trainer and not trainer["numProcPerNode"] >= 1:
        problems.append("numProcPerNode")
    for rjob in obj["spec"].get("replicatedJobs", []):
        spec = rjob["template"]["spec"]
        longest = f"{name}-{rjob['name']}-{rjob['replicas'] - 1}-{spec['completions'] - 1}-abcde"
        if len(longest) > 63:
            problems.append(f"pod name {longest}")
    return problems


def files_of(tmp_path: Path, executor: str, **overrides) -> dict[str, str]:
    data = spec_dict(**{"launch": {"executor": executor}, "checkpoint": {"dir": "/ckpt/run"}, "kubernetes": K8S,
                        **overrides})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return render_all(resolve(load_spec(path)))


def documents(text: str) -> list[dict]:
    return list(yaml.safe_load_all(text))


@pytest.mark.parametrize(("executor", "kind"), [("trainjob", "TrainJob"), ("pytorchjob", "PyTorchJob"),
                                                ("jobset", "JobSet")])
def test_each_object_validates_against_its_crd(tmp_path: Path, executor: str, kind: str) -> None:
    configmap, job = documents(files_of(tmp_path, executor)[f"{executor}.yaml"])
    assert job["kind"] == kind and configmap["kind"] == "ConfigMap"
    jsonschema.Draft7Validator(crd_schema(kind)).validate(job)
    assert cel_problems(job) == []


@pytest.mark.parametrize(("executor", "kind", "path", "bad"), [
    ("trainjob", "TrainJob", ("spec", "trainer", "numNodes"), "two"),
    ("trainjob", "TrainJob", ("spec", "trainer", "numProcs"), 8),  # a typo of numProcPerNode
    ("pytorchjob", "PyTorchJob", ("spec", "runPolicy", "backoffLimit"), "5"),
    ("jobset", "JobSet", ("spec", "failurePolicy", "maxRestart"), 5),
])
def test_the_converted_crd_refuses_a_wrong_field(tmp_path: Path, executor: str, kind: str, path: tuple,
                                                 bad) -> None:
    """The oracle can fail: a wrong type or an unknown field is refused."""
    _, job = documents(files_of(tmp_path, executor)[f"{executor}.yaml"])
    node = job
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = bad
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(crd_schema(kind)).validate(job)


def test_the_cel_rules_catch_a_long_jobset_name(tmp_path: Path) -> None:
    _, job = documents(files_of(tmp_path, "jobset")["jobset.yaml"])
    job["metadata"]["name"] = "x" * 50
    assert cel_problems(job) and "Pod" not in str(cel_problems(job))


def pods_of(job: dict) -> list[dict]:
    """The pod templates a job embeds, as Kubernetes objects kubernetes-validate knows: a
    PyTorchJob's replicas and a JobSet's Job as PodTemplates/Jobs; a TrainJob's runtime pod with
    its trainer fields and runtimePatches merged, as a Pod."""
    meta = {"name": job["metadata"]["name"]}
    if job["kind"] == "PyTorchJob":
        return [{"apiVersion": "v1", "kind": "PodTemplate", "metadata": meta, "template": r["template"]}
                for r in job["spec"]["pytorchReplicaSpecs"].values()]
    if job["kind"] == "JobSet":
        return [{"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": r["template"]["spec"]}
                for r in job["spec"]["replicatedJobs"]]
    trainer = job["spec"]["trainer"]
    patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    pod = copy.deepcopy(patch["template"]["spec"]["template"]["spec"])
    container = pod["containers"][0]
    container.update(image=trainer["image"], command=trainer["command"], resources=trainer["resourcesPerNode"])
    return [{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod}]


@pytest.mark.parametrize("executor", ["trainjob", "pytorchjob", "jobset"])
def test_the_pods_and_the_configmap_validate_with_kubernetes_validate(tmp_path: Path, executor: str) -> None:
    kv = require_oracle("kubernetes_validate")
    configmap, job = documents(files_of(tmp_path, executor)[f"{executor}.yaml"])
    for obj in [configmap, *pods_of(job)]:
        kv.validate(obj, "1.31", strict=True)
    bad = pods_of(job)[0]
    spec = bad["spec"] if bad["kind"] == "Pod" else (bad.get("template") or bad["spec"]["template"])["spec"] \
        if bad["kind"] == "PodTemplate" else bad["spec"]["template"]["spec"]
    spec["containers"][0]["volumeMount"] = []  # a typo: refused in strict mode
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, "1.31", strict=True)


SKY_CHECK = """
import json, sys, yaml, sky
from sky.utils import common_utils, registry, schemas
import sky.jobs.recovery_strategy
cfg = yaml.safe_load(open(sys.argv[1]))
common_utils.validate_schema(cfg, schemas.get_task_schema())
task = sky.Task.from_yaml(sys.argv[1])
strategy = cfg["resources"].get("job_recovery", {}).get("strategy")
print(json.dumps({"num_nodes": task.num_nodes,
                  "accelerators": [r.accelerators for r in task.resources],
                  "strategy_known": strategy is None or strategy.lower() in registry.JOBS_RECOVERY_STRATEGY_REGISTRY.keys()}))
"""


def sky_check(path: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """SkyPilot's own validation in a child (importing sky writes ~/.sky: a temp HOME). The
    interpreter: GEN_LAUNCH_SKYPILOT_PYTHON where skypilot lives apart (it pins click<8.2, which
    transformers' huggingface-hub refuses), else this one."""
    python = os.environ.get("GEN_LAUNCH_SKYPILOT_PYTHON", sys.executable)
    if python == sys.executable:
        require_oracle("sky")
    env = {**os.environ, "HOME": str(tmp_path / "home"), "SKYPILOT_DISABLE_USAGE_COLLECTION": "1"}
    (tmp_path / "home").mkdir(exist_ok=True)
    return subprocess.run([python, "-c", SKY_CHECK, str(path)], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


def test_the_skypilot_task_passes_skypilots_own_validation(tmp_path: Path) -> None:
    files = files_of(tmp_path, "skypilot", kubernetes=None,
                     skypilot={"accelerator": "H100", "infra": "k8s", "recovery": "FAILOVER", "disk_size": 512,
                               "buckets": {"/ckpt": "s3://team-bucket/ckpt"}})
    path = tmp_path / "sky.yaml"
    path.write_text(files["sky.yaml"])
    proc = sky_check(path, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"num_nodes": 2, "accelerators": [{"H100": 8}], "strategy_known": True}
    bad = yaml.safe_load(files["sky.yaml"])
    bad["num_node"] = bad.pop("num_nodes")  # a typo: refused
    path.write_text(yaml.safe_dump(bad))
    assert sky_check(path, tmp_path).returncode != 0


EXECUTOR_SAMPLES = [s for s in (ROOT / "samples").glob("*.yaml") if "executor:" in s.read_text()
                    and "executor: slurm" not in s.read_text()]


@pytest.mark.parametrize("sample", EXECUTOR_SAMPLES, ids=[s.stem for s in EXECUTOR_SAMPLES])
def test_the_samples_validate(sample: Path, tmp_path: Path) -> None:
    """Each sample on an executor: its file against the CRD and kubernetes-validate, or SkyPilot's."""
    spec = load_spec(sample)
    from generator.executors import executor_of

    record = executor_of(spec.launch.executor)
    files = render_all(resolve(spec))
    if not record.kubernetes:
        (tmp_path / "sky.yaml").write_text(files[record.file])
        proc = sky_check(tmp_path / "sky.yaml", tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return
    kv = require_oracle("kubernetes_validate")
    configmap, job = documents(files[record.file])
    jsonschema.Draft7Validator(crd_schema(job["kind"])).validate(job)
    assert cel_problems(job) == []
    for obj in [configmap, *pods_of(job)]:
        kv.validate(obj, "1.31", strict=True)


def test_a_trainjob_with_the_deepspeed_launcher_is_on_the_deepspeed_runtime(tmp_path: Path) -> None:
    """The DeepSpeed launcher's TrainJob names the deepspeed-distributed runtime, validates against
    the CRD, and patches the mounts into both of that runtime's replicated jobs (the launcher pod
    runs mpirun, the node pods the ranks), each by a job and container the runtime has."""
    files = files_of(tmp_path, "trainjob", framework="megatron-deepspeed",
                     launch={"executor": "trainjob", "launcher": "deepspeed"})
    _, job = documents(files["trainjob.yaml"])
    jsonschema.Draft7Validator(crd_schema("TrainJob")).validate(job)
    assert cel_problems(job) == [] and job["spec"]["runtimeRef"] == {"name": "deepspeed-distributed"}
    runtime = yaml.safe_load((REFERENCE / "runtimes" / "deepspeed_distributed.yaml").read_text())
    assert runtime["metadata"]["name"] == "deepspeed-distributed"
    containers = {r["name"]: {c["name"] for c in r["template"]["spec"]["template"]["spec"]["containers"]}
                  for r in runtime["spec"]["template"]["spec"]["replicatedJobs"]}
    patched = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert [r["name"] for r in patched] == ["launcher", "node"]
    for r in patched:
        pod = r["template"]["spec"]["template"]["spec"]
        assert {c["name"] for c in pod["containers"]} <= containers[r["name"]]
        assert {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]} >= {"/etc/gen-launch", "/dev/shm",
                                                                                 "/ckpt"}
    assert "&id" not in files["trainjob.yaml"]  # each patch written out, no YAML aliases


def test_volcano_gang_schedules_a_pytorchjob(tmp_path: Path) -> None:
    """kubernetes.scheduler volcano on a PyTorchJob: every pod's schedulerName is volcano and
    runPolicy.schedulingPolicy asks for all pods at once in Volcano's queue; the job validates
    against the CRD and its pods with kubernetes-validate; the Kueue label is not written."""
    kubernetes_validate = require_oracle("kubernetes_validate")
    files = files_of(tmp_path, "pytorchjob", kubernetes={**K8S, "scheduler": "volcano"})
    _, job = documents(files["pytorchjob.yaml"])
    jsonschema.Draft7Validator(crd_schema("PyTorchJob")).validate(job)
    assert job["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 2, "queue": "team-a",
                                                            "priorityClass": "high"}
    assert "kueue.x-k8s.io/queue-name" not in job["metadata"]["labels"]
    for pod in pods_of(job):
        kubernetes_validate.validate(pod, "1.31", strict=True)
    specs = [r["template"]["spec"] for r in job["spec"]["pytorchReplicaSpecs"].values()]
    assert [s["schedulerName"] for s in specs] == ["volcano", "volcano"]
    assert sum(r["replicas"] for r in job["spec"]["pytorchReplicaSpecs"].values()) == 2  # = minAvailable
