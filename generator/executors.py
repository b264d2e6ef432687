"""One record per executor (``launch.executor``): where the plan's nodes start — a Slurm job, a
Kubeflow TrainJob or PyTorchJob, a JobSet, a SkyPilot task — which file it is written to, the
launchers it can start, and how each launcher takes its node rank and rendezvous there. The records are data
(data/executors.yaml); the code asks them (``executor_of(name).kubernetes``), it does not compare
executor names."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from generator.resources import read_yaml
from generator.values import value

POD_SCRIPT = "launch.sh"  # what a pod or a SkyPilot node runs, beside the framework's files
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_TABLE = Path(__file__).resolve().parent / "data" / "executors.yaml"


@value
class Required:
    """A setting only the user knows, refused when missing."""

    setting: str
    why: str
    example: str
    for_gpus: bool = False  # not needed for CPU processes


@value
class Mpi:
    """Launchers started by mpirun over ssh from a launcher pod (a TrainJob's MPI runtime)."""

    launchers: tuple[str, ...]
    runtime: str
    hostfile: str
    master: str  # the master's hostname ({job}): the launcher pod, the hostfile's first host
    rank_env: tuple[tuple[str, str], ...]  # (torch.distributed's variable, mpirun's variable)
    injects: str
    pod_name: str  # the launcher pod's name ({job}), a DNS-1035 label of at most 63 characters


@value
class Executor:
    name: str
    title: str
    description: str
    file: str
    template: str
    style: str  # sbatch | kubernetes | skypilot: how its file is rendered
    launchers: tuple[str, ...]
    restarts: str
    api_version: str | None = None  # the Kubernetes object that starts the pods (None: not Kubernetes)
    kind: str | None = None
    runtime: str | None = None  # a TrainJob's ClusterTrainingRuntime
    nodes_env: str | None = None  # the executor's variable for the number of pods
    node_env: tuple[tuple[str, str], ...] = ()  # NODE_RANK, MASTER_ADDR, MASTER_PORT as shell text
    injects: str | None = None  # what the executor gives the pod for the rendezvous
    pod_env: tuple[tuple[str, str], ...] = ()
    time_limit: str | None = None  # the spec field of the job's time limit
    chains: bool = False
    priority: str | None = None  # pod | label
    requires: Required | None = None
    pod_name: str | None = None  # the longest pod name ({job}, {last}); a DNS-1035 label
    volumes: str | None = None  # the setting of the persistent mounts checkpoint.dir must be on
    refused: tuple[tuple[str, str], ...] = ()  # (launcher, why it is refused)
    mpi: Mpi | None = None
    # kubernetes.scheduler beyond the default: (scheduler, gang-scheduling policy path, why refused)
    schedulers: tuple[tuple[str, str | None, str | None], ...] = ()

    def scheduler_refused(self, scheduler: str) -> str | None:
        """Why this executor's file cannot ask ``scheduler`` for its pods (None: it can)."""
        if scheduler == "default":
            return None
        found = next((s for s in self.schedulers if s[0] == scheduler), None)
        return f"{self.title} has no way to name {scheduler}" if found is None else found[2]

    def gang_policy(self, scheduler: str) -> str | None:
        """Where the job asks ``scheduler`` to place all its pods at once (a path in its spec)."""
        return next((s[1] for s in self.schedulers if s[0] == scheduler), None)

    def name_problem(self, job: str, nodes: int, launcher: str | None = None) -> str | None:
        """Why ``job`` cannot name this executor's job of ``nodes`` pods (None: it can); an MPI
        runtime's launcher pod counts too."""
        if self.pod_name is None:
            return None
        mpi = self.mpi_for(launcher) if launcher else None
        names = [self.pod_name.format(job=job, last=nodes - 1)]
        if mpi is not None:
            names.append(mpi.pod_name.format(job=job))
        longest = max(names, key=len)
        if not _DNS_1035.match(job):
            return ("a Kubernetes name is a DNS-1035 label: lower-case letters, digits and '-', starting "
                    "with a letter")
        if len(longest) > 63:
            return (f"its longest pod name {longest} has {len(longest)} characters, more than 63; "
                    f"use at most {63 - len(longest) + len(job)}")
        return None

    @property
    def kubernetes(self) -> bool:
        return self.style == "kubernetes"

    def mpi_for(self, launcher: str) -> Mpi | None:
        """The MPI runtime that starts ``launcher`` here (None: the executor's pods start it)."""
        return self.mpi if self.mpi is not None and launcher in self.mpi.launchers else None

    def env(self, job: str) -> tuple[tuple[str, str], ...]:
        """The container's environment the file sets, for the job named ``job``."""
        return tuple((k, v.format(job=job)) for k, v in self.pod_env)


@cache
def _table() -> dict:
    return read_yaml(_TABLE)


@cache
def executors() -> dict[str, Executor]:
    out = {}
    for name, t in _table().items():
        if name == "gpu_resources":
            continue
        kind = t.get("kind") or {}
        out[name] = Executor(
            name, t["title"], " ".join(t["description"].split()), t["file"], t["template"], t["style"],
            tuple(t["launchers"]), " ".join(t["restarts"].split()), kind.get("apiVersion"),
            kind.get("kind"), t.get("runtime"), t.get("nodes_env"), tuple((t.get("node_env") or {}).items()),
            " ".join(t.get("injects", "").split()) or None, tuple((t.get("pod_env") or {}).items()),
            t.get("time_limit"), t.get("chains", False), t.get("priority"),
            Required(**t["requires"]) if "requires" in t else None, t.get("pod_name"), t.get("volumes"),
            tuple((k, " ".join(v.split())) for k, v in (t.get("refused") or {}).items()),
            _mpi(t["mpi"]) if "mpi" in t else None,
            tuple((k, v.get("gang"), " ".join(v["refused"].split()) if "refused" in v else None)
                  for k, v in (t.get("schedulers") or {}).items()))
    return out


def _mpi(t: dict) -> Mpi:
    return Mpi(tuple(t["launchers"]), t["runtime"], t["hostfile"], t["master"], tuple(t["rank_env"].items()),
               " ".join(t["injects"].split()), t["pod_name"])


def executor_of(name: str) -> Executor:
    return executors()[name]


def gpu_resource(vendor: str) -> str | None:
    """The extended resource a pod asks for its accelerators (None: CPU processes)."""
    return _table()["gpu_resources"].get(vendor)
