"""How a plan's run starts, as plan.json's ``executor`` object and explain say it: the executor's
file and object, its pods, the launcher, what gives the rendezvous, restarts and the time limit
(from the executor's record, generator/data/executors.yaml)."""

from __future__ import annotations

from typing import Any

from generator.executors import executor_of
from generator.plan.plan import Plan
from generator.units import slurm_minutes


def launch_summary(plan: Plan) -> dict[str, Any]:
    """How the run starts, for plan.json and explain: the executor's file and object, its pods
    (nodes), the processes each starts, the launcher, what gives the rendezvous, restarts and the
    time limit."""
    record = executor_of(plan.spec.launch.executor)
    launcher = plan.spec.launch.launcher
    mpi = record.mpi_for(launcher)
    nodes = plan.spec.cluster.nodes
    limit = None
    if record.time_limit is not None:
        section, field = record.time_limit.split(".")
        given = getattr(getattr(plan.spec, section), field)
        limit = {"setting": record.time_limit, "value": given,
                 "seconds": None if given is None else slurm_minutes(given) * 60}
    return {
        "name": record.name, "file": record.file,
        "kind": f"{record.api_version}/{record.kind}" if record.kind else None,
        "runtime": mpi.runtime if mpi else record.runtime,
        # an MPI runtime's launcher pod is a node too (runLauncherAsNode): max(nodes - 1, 1) more
        "pods": 1 + max(nodes - 1, 1) if mpi else nodes,
        "processes_per_pod": plan.procs_per_node,
        "launcher": "mpirun" if mpi else launcher,
        "rendezvous": mpi.injects if mpi else record.injects,
        "restarts": record.restarts,
        "time_limit": limit,
    }
