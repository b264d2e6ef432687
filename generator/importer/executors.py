"""An executor's file (read by lint: readers/kubernetes.py) -> the spec's launch.executor and its
kubernetes or skypilot section: the job's name, image, placement, volumes, deadline and restarts,
or the SkyPilot task's resources, buckets and recovery."""

from __future__ import annotations

from typing import Any

from generator.executors import executors
from generator.importer.draft import Draft
from generator.readers.kubernetes import ExecutorFile, dig

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
_SPECIAL_VOLUMES = {"gen-launch", "dshm"}


def read_executor(read: ExecutorFile, draft: Draft) -> None:
    record = next((e for e in executors().values() if e.kind == read.kind), None) or \
        next(e for e in executors().values() if e.style == "skypilot")
    draft.set("launch.executor", record.name)
    name = dig(read.data, ["metadata", "name"]) if record.kubernetes else read.data.get("name")
    if isinstance(name, str):
        draft.set("name", name)
        draft.marks.pop("name", None)
    mpi = record.mpi
    if mpi is not None and dig(read.data, ["spec", "runtimeRef", "name"]) == mpi.runtime:
        # the runtime's mpirun starts the ranks (read as one process per task): the launcher it stands for
        draft.set("launch.launcher", mpi.launchers[0])
    if record.kubernetes:
        _kubernetes(read, record.priority, draft)
    else:
        _skypilot(read.data, draft)


def _pod(job: dict) -> tuple[dict, dict]:
    """(the pod spec with the volumes, the training container) of a job."""
    spec = job.get("spec") or {}
    if job.get("kind") == "TrainJob":
        patch = dig(spec, ["runtimePatches", 0, "trainingRuntimeSpec", "template", "spec",
                            "replicatedJobs", 0, "template", "spec", "template", "spec"]) or {}
        trainer = spec.get("trainer") or {}
        container = {**(dig(patch, ["containers", 0]) or {}), **trainer}
        return patch, container
    if job.get("kind") == "PyTorchJob":
        pod = dig(spec, ["pytorchReplicaSpecs", "Master", "template", "spec"]) or {}
    else:
        pod = dig(spec, ["replicatedJobs", 0, "template", "spec", "template", "spec"]) or {}
    return pod, dig(pod, ["containers", 0]) or {}


def _kubernetes(read: ExecutorFile, priority: str | None, draft: Draft) -> None:
    job = read.data
    pod, container = _pod(job)
    labels = dig(job, ["metadata", "labels"]) or {}
    gang = dig(job, ["spec", "runPolicy", "schedulingPolicy"]) or {}  # Volcano's queue (kubernetes.scheduler)
    values: dict[str, Any] = {
        "image": container.get("image"), "namespace": dig(job, ["metadata", "namespace"]),
        "queue": labels.get(QUEUE_LABEL) or gang.get("queue"),
        "scheduler": pod.get("schedulerName"),
        "priority_class": labels.get(PRIORITY_LABEL) if priority == "label" else pod.get("priorityClassName"),
        "service_account": pod.get("serviceAccountName"),
        "image_pull_secrets": [s.get("name") for s in pod.get("imagePullSecrets") or ()
                               if isinstance(s, dict)],
        "node_selector": pod.get("nodeSelector") or {},
        "tolerations": [_toleration(t) for t in pod.get("tolerations") or () if isinstance(t, dict)],
    }
    claims = {v.get("name"): dig(v, ["persistentVolumeClaim", "claimName"]) for v in pod.get("volumes") or ()
              if isinstance(v, dict)}
    volumes = []
    for mount in container.get("volumeMounts") or ():
        claim = claims.get(mount.get("name"))
        if claim and mount.get("name") not in _SPECIAL_VOLUMES:
            volumes.append({"claim": claim, "mount_path": mount.get("mountPath"),
                            **({"read_only": True} if mount.get("readOnly") else {})})
    values["volumes"] = volumes
    values["shm_size"] = next((dig(v, ["emptyDir", "sizeLimit"]) for v in pod.get("volumes") or ()
                               if isinstance(v, dict) and v.get("name") == "dshm"), None)
    deadline = dig(job, ["spec", "activeDeadlineSeconds"]) or \
        dig(job, ["spec", "runPolicy", "activeDeadlineSeconds"]) or \
        dig(job, ["spec", "replicatedJobs", 0, "template", "spec", "activeDeadlineSeconds"])
    values["time"] = _slurm_time(deadline) if isinstance(deadline, int) else None
    values["max_restarts"] = dig(job, ["spec", "runPolicy", "backoffLimit"]) if job["kind"] == "PyTorchJob" \
        else dig(job, ["spec", "failurePolicy", "maxRestarts"])
    for key, value in values.items():
        if value not in (None, [], {}):
            draft.set(f"kubernetes.{key}", value)


def _toleration(t: dict) -> dict:
    spelled = {"key": "key", "operator": "operator", "value": "value", "effect": "effect",
               "tolerationSeconds": "toleration_seconds"}
    return {ours: t[theirs] for theirs, ours in spelled.items() if theirs in t}


def _slurm_time(seconds: int) -> str:
    """Seconds as Slurm's D-HH:MM:SS (HH:MM:SS under a day)."""
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def _skypilot(task: dict, draft: Draft) -> None:
    resources = task.get("resources") or {}
    accelerators = resources.get("accelerators")
    accelerator = accelerators.rsplit(":", 1)[0] if isinstance(accelerators, str) else \
        next(iter(accelerators), None) if isinstance(accelerators, dict) else None
    recovery = resources.get("job_recovery") or {}
    values = {"accelerator": accelerator, "infra": resources.get("infra"),
              "image_id": resources.get("image_id"), "disk_size": resources.get("disk_size"),
              "use_spot": resources.get("use_spot"), "recovery": recovery.get("strategy"),
              "max_restarts_on_errors": recovery.get("max_restarts_on_errors"),
              "workdir": task.get("workdir"),
              "buckets": {path: mount["source"] for path, mount in (task.get("file_mounts") or {}).items()
                          if isinstance(mount, dict) and "source" in mount}}
    for key, value in values.items():
        if value not in (None, {}):
            draft.set(f"skypilot.{key}", value)
