"""The objects of an executor's file, from the plan: a ConfigMap of the launch files and the
Kubernetes job that mounts it (TrainJob, PyTorchJob, JobSet), or a SkyPilot task. Built as data
and written as YAML (a template places them): every number is the plan's; the pods run
launch.sh (templates/pod_launch.sh.j2), the same launcher and arguments as launch.sbatch."""

from __future__ import annotations

from typing import Any

import yaml

from generator.executors import POD_SCRIPT, Executor, gpu_resource
from generator.plan.plan import Plan
from generator.units import slurm_minutes

MOUNT = "/etc/gen-launch"  # where the pods see the ConfigMap of the launch files
SCRIPT = POD_SCRIPT
SKY_MOUNT = "~/gen-launch"  # where a SkyPilot node sees the launch files
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def configmap_name(job: str) -> str:
    return f"{job}-launch"


def kubernetes_objects(plan: Plan, executor: Executor, files: dict[str, str]) -> list[dict[str, Any]]:
    """The ConfigMap of ``files`` (launch.sh and the framework's files) and the job object."""
    job = plan.spec.name
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _metadata(plan, configmap_name(job)),
                 "data": dict(sorted(files.items()))}
    build = {"TrainJob": _trainjob, "PyTorchJob": _pytorchjob, "JobSet": _jobset}[executor.kind]
    body = {"apiVersion": executor.api_version, "kind": executor.kind,
            "metadata": _metadata(plan, job, _job_labels(plan, executor)), "spec": build(plan, executor)}
    return [configmap, body]


def _metadata(plan: Plan, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if plan.spec.kubernetes.namespace is not None:
        out["namespace"] = plan.spec.kubernetes.namespace
    out["labels"] = {"app.kubernetes.io/managed-by": "gen-launch", **(labels or {})}
    return out


def _job_labels(plan: Plan, executor: Executor) -> dict[str, str]:
    k = plan.spec.kubernetes
    labels = {}
    if k.queue is not None and k.scheduler == "default":  # Volcano's queue is in its policy
        labels[QUEUE_LABEL] = k.queue
    if k.priority_class is not None and executor.priority == "label":
        labels[PRIORITY_LABEL] = k.priority_class
    return labels


def deadline_seconds(plan: Plan) -> int | None:
    """kubernetes.time in seconds (activeDeadlineSeconds), None without one."""
    time = plan.spec.kubernetes.time
    return None if time is None else slurm_minutes(time) * 60


def _limits(plan: Plan) -> dict[str, Any]:
    resource = gpu_resource(plan.gpu["vendor"])
    return {} if resource is None else {"limits": {resource: plan.spec.cluster.gpus_per_node}}


def _volumes(plan: Plan) -> tuple[list[dict], list[dict]]:
    """(volumes, mounts): the launch files, /dev/shm in memory, the claims."""
    k = plan.spec.kubernetes
    shm: dict[str, Any] = {"medium": "Memory"}
    if k.shm_size is not None:
        shm["sizeLimit"] = k.shm_size
    volumes = [{"name": "gen-launch", "configMap": {"name": configmap_name(plan.spec.name)}},
               {"name": "dshm", "emptyDir": shm}]
    mounts = [{"name": "gen-launch", "mountPath": MOUNT, "readOnly": True},
              {"name": "dshm", "mountPath": "/dev/shm"}]
    for index, volume in enumerate(k.volumes):
        name = f"volume-{index}"
        volumes.append({"name": name, "persistentVolumeClaim": {"claimName": volume.claim}})
        mounts.append({"name": name, "mountPath": volume.mount_path, **({"readOnly": True} if volume.read_only
                                                                        else {})})
    return volumes, mounts


def _scheduling(plan: Plan, executor: Executor) -> dict[str, Any]:
    """The pod's placement and identity: node selector, tolerations, account, pull secrets,
    priority class."""
    k = plan.spec.kubernetes
    out: dict[str, Any] = {}
    if k.node_selector:
        out["nodeSelector"] = dict(k.node_selector)
    if k.tolerations:
        out["tolerations"] = [_toleration(t) for t in k.tolerations]
    if k.service_account is not None:
        out["serviceAccountName"] = k.service_account
    if k.image_pull_secrets:
        out["imagePullSecrets"] = [{"name": s} for s in k.image_pull_secrets]
    if k.priority_class is not None and executor.priority == "pod":
        out["priorityClassName"] = k.priority_class
    if k.scheduler != "default":
        out["schedulerName"] = k.scheduler
    return out


def _gang(plan: Plan, executor: Executor) -> dict[str, Any]:
    """The gang-scheduling policy of kubernetes.scheduler (a PyTorchJob's schedulingPolicy): all
    pods placed at once, in the scheduler's queue and priority; {} with the default scheduler."""
    k = plan.spec.kubernetes
    if executor.gang_policy(k.scheduler) is None:
        return {}
    policy: dict[str, Any] = {"minAvailable": plan.spec.cluster.nodes}
    if k.queue is not None:
        policy["queue"] = k.queue
    if k.priority_class is not None:
        policy["priorityClass"] = k.priority_class
    return policy


def _toleration(t) -> dict[str, Any]:
    spelled = {"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect,
               "tolerationSeconds": t.toleration_seconds}
    return {key: value for key, value in spelled.items() if value is not None}


def _container(plan: Plan, executor: Executor, name: str) -> dict[str, Any]:
    volumes, mounts = _volumes(plan)
    container: dict[str, Any] = {"name": name, "image": plan.spec.kubernetes.image,
                                 "command": ["bash", f"{MOUNT}/{SCRIPT}"]}
    env = executor.env(plan.spec.name)
    if env:
        container["env"] = [{"name": key, "value": value} for key, value in env]
    if _limits(plan):
        container["resources"] = _limits(plan)
    container["volumeMounts"] = mounts
    return container


def pod_spec(plan: Plan, executor: Executor, container: str, restart: str) -> dict[str, Any]:
    volumes, _ = _volumes(plan)
    return {"restartPolicy": restart, "containers": [_container(plan, executor, container)],
            "volumes": volumes, **_scheduling(plan, executor)}


def _trainjob(plan: Plan, executor: Executor) -> dict[str, Any]:
    """The runtime's trainer container gets the image, command, sizes and GPUs; the volumes and
    the placement reach its pods through runtimePatches (Trainer v2.2+). On an MPI runtime the
    launcher pod runs the command (mpirun) and the node pods run the ranks: both get the mounts."""
    volumes, mounts = _volumes(plan)
    trainer: dict[str, Any] = {"image": plan.spec.kubernetes.image, "command": ["bash", f"{MOUNT}/{SCRIPT}"],
                               "numNodes": plan.spec.cluster.nodes, "numProcPerNode": plan.procs_per_node}
    if _limits(plan):
        trainer["resourcesPerNode"] = _limits(plan)
    pod = {"volumes": volumes, "containers": [{"name": "node", "volumeMounts": mounts}],
           **_scheduling(plan, executor)}
    mpi = executor.mpi_for(plan.spec.launch.launcher)
    spec: dict[str, Any] = {"runtimeRef": {"name": mpi.runtime if mpi else executor.runtime}}
    if deadline_seconds(plan) is not None:
        spec["activeDeadlineSeconds"] = deadline_seconds(plan)
    spec["trainer"] = trainer
    replicated = ["launcher", "node"] if mpi else ["node"]
    spec["runtimePatches"] = [{"manager": "gen-launch", "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": [{"name": name, "template": {"spec": {"template": {"spec": pod}}}}
                           for name in replicated]}}}}]
    return spec


def _pytorchjob(plan: Plan, executor: Executor) -> dict[str, Any]:
    """One Master and nodes - 1 Workers, each a pod that restarts on failure."""
    run_policy: dict[str, Any] = {"backoffLimit": plan.spec.kubernetes.max_restarts}
    if deadline_seconds(plan) is not None:
        run_policy["activeDeadlineSeconds"] = deadline_seconds(plan)
    gang = _gang(plan, executor)
    if gang:  # executors.yaml: schedulers.volcano.gang
        run_policy[executor.gang_policy(plan.spec.kubernetes.scheduler).split(".")[-1]] = gang
    replicas = {"Master": 1, "Worker": plan.spec.cluster.nodes - 1}
    return {"nprocPerNode": str(plan.procs_per_node), "runPolicy": run_policy,
            "pytorchReplicaSpecs": {
                role: {"replicas": count, "restartPolicy": "OnFailure",
                       "template": {"spec": pod_spec(plan, executor, "pytorch", "OnFailure")}}
                for role, count in replicas.items() if count}}


def _jobset(plan: Plan, executor: Executor) -> dict[str, Any]:
    """One indexed Job of nodes pods; a failed pod fails it (backoffLimit 0) and the JobSet
    starts them all again (failurePolicy.maxRestarts)."""
    nodes = plan.spec.cluster.nodes
    job: dict[str, Any] = {"parallelism": nodes, "completions": nodes, "completionMode": "Indexed",
                           "backoffLimit": 0}
    if deadline_seconds(plan) is not None:
        job["activeDeadlineSeconds"] = deadline_seconds(plan)
    job["template"] = {"spec": pod_spec(plan, executor, "node", "Never")}
    return {"failurePolicy": {"maxRestarts": plan.spec.kubernetes.max_restarts},
            "network": {"enableDNSHostnames": True},
            "replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": job}}]}


def sky_task(plan: Plan) -> dict[str, Any]:
    """A SkyPilot task: nodes × GPUs, the launch files mounted from the task's folder, launch.sh run."""
    s = plan.spec.skypilot
    resources: dict[str, Any] = {}
    if gpu_resource(plan.gpu["vendor"]) is not None:
        resources["accelerators"] = f"{s.accelerator}:{plan.spec.cluster.gpus_per_node}"
    for key, given in (("infra", s.infra), ("image_id", s.image_id), ("disk_size", s.disk_size)):
        if given is not None:
            resources[key] = given
    if s.use_spot:
        resources["use_spot"] = True
    recovery: dict[str, Any] = {"max_restarts_on_errors": s.max_restarts_on_errors}
    if s.recovery is not None:
        recovery = {"strategy": s.recovery, **recovery}
    resources["job_recovery"] = recovery
    task: dict[str, Any] = {"name": plan.spec.name, "num_nodes": plan.spec.cluster.nodes,
                            "resources": resources}
    if s.workdir is not None:
        task["workdir"] = s.workdir
    buckets = {path: {"source": uri, "mode": "MOUNT"} for path, uri in s.buckets}
    task["file_mounts"] = {SKY_MOUNT: ".", **buckets}
    task["run"] = f"bash {SKY_MOUNT}/{SCRIPT}\n"
    return task


def to_yaml(documents: list[dict[str, Any]]) -> str:
    """YAML documents, keys in the order built, text of several lines as a literal block."""
    return "---\n".join(yaml.dump(d, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
                        for d in documents)


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:  # the same pod patch twice is written twice, not &id001
        return True


def _text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _text)
