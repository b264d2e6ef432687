"""GL320-GL321: the pods of a Kubernetes job or a SkyPilot task against the launcher they run
(read from the executor's file and the script its container runs, generator/readers/kubernetes.py)."""

from __future__ import annotations

from generator.rules.registry import rule


@rule("GL320", "executor-pods-mismatch",
      "The pods a Kubernetes job or SkyPilot task starts and the processes the launcher starts must agree.")
def pods_mismatch(executor_kind: str, pods: int | None = None, launcher_nodes: int | None = None,
                  gpus_per_pod: int | None = None, procs_per_node: int | None = None,
                  pod_procs: int | None = None) -> str | None:
    """torchrun waits at the rendezvous for the nodes it is told (--nnodes, else PET_NNODES): with
    fewer pods it hangs until its timeout, with more the extra pods fail or train a second run;
    a pod asking for other GPUs than the processes it starts wastes them or puts two ranks on one
    GPU; the job's declared processes per node (TrainJob numProcPerNode, PyTorchJob
    nprocPerNode) set PET_NPROC_PER_NODE and the world the operator reports, which a flag then
    contradicts. Fix: derive every count from one plan (gen-launch writes them together).

    Example: a TrainJob with numNodes 3 whose container runs torchrun --nnodes 2."""
    if pods is not None and launcher_nodes is not None and pods != launcher_nodes:
        return (f"the {executor_kind} starts {pods} pods but the launcher expects {launcher_nodes} nodes",
                ("pods", "launcher_nodes"))
    if gpus_per_pod is not None and procs_per_node is not None and gpus_per_pod != procs_per_node:
        return (f"each pod of the {executor_kind} asks for {gpus_per_pod} GPUs but the launcher starts "
                f"{procs_per_node} processes per node", ("gpus_per_pod", "procs_per_node"))
    if pod_procs is not None and procs_per_node is not None and pod_procs != procs_per_node:
        return (f"the {executor_kind} declares {pod_procs} processes per node but the launcher starts "
                f"{procs_per_node}", ("pod_procs", "procs_per_node"))
    return None


@rule("GL321", "executor-shm-default",
      "The pods of a Kubernetes job need /dev/shm in memory: Kubernetes gives 64 MB.", severity="warning")
def shm_default(executor_kind: str, shm_in_memory: bool) -> str | None:
    """A container's /dev/shm is 64 MB unless a Memory emptyDir is mounted there; NCCL takes about
    33 MB per communicator and Megatron creates several, so the first collectives fail with "No
    space left on device" or a bus error, and the data loaders' shared tensors fail too. Fix:
    mount `emptyDir: {medium: Memory}` at /dev/shm in every pod (TrainJob: a runtimePatch of the
    node container; gen-launch writes it, kubernetes.shm_size its limit).

    Example: a JobSet whose pod template mounts nothing at /dev/shm."""
    if shm_in_memory:
        return None
    return (f"the pods of the {executor_kind} keep Kubernetes' 64 MB /dev/shm; mount an emptyDir "
            "{medium: Memory} at /dev/shm", ("shm_in_memory",))
