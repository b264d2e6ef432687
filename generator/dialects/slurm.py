"""Slurm's dialect (slurm.yaml): the #SBATCH options a plan writes, and the spellings of sbatch
and srun options the readers and `import` take apart."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from generator.resources import read_yaml
from generator.shell import shq
from generator.values import value

_DIR = Path(__file__).resolve().parent


@value
class SlurmOption:
    """One sbatch/srun option: its long and short spelling and what value it takes."""

    option: str
    short: str | None = None
    value: str | None = None
    switch: bool = False
    spec: str | None = None
    kind: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.option, self.short) if self.short else (self.option,)


@cache
def _table() -> dict[str, Any]:
    return read_yaml(_DIR / "slurm.yaml")["slurm"]


@cache
def options() -> tuple[SlurmOption, ...]:
    return tuple(SlurmOption(**entry) for entry in _table()["options"])


@cache
def value_options() -> frozenset[str]:
    """Every sbatch/srun spelling that takes a value."""
    own = {name for o in options() if not o.switch for name in o.names}
    return frozenset(own | set(_table()["value_options"]))


@cache
def switches() -> frozenset[str]:
    return frozenset({name for o in options() if o.switch for name in o.names} | set(_table()["switches"]))


def named(value: str) -> SlurmOption:
    """The option that writes a plan value (e.g. "name": --job-name)."""
    return next(o for o in options() if o.value == value)


def slurm_values(plan) -> dict[str, Any]:
    s = plan.spec.slurm
    return {"name": plan.spec.name, "nodes": plan.spec.cluster.nodes,
            "tasks_per_node": plan.tasks_per_node,
            "gpus_per_node": plan.spec.cluster.gpus_per_node if plan.gpu["gres"] else None,
            "cpus_per_task": s.cpus_per_task, "mem": s.mem, "time": s.time, "partition": s.partition,
            "account": s.account, "qos": s.qos, "exclusive": s.exclusive, "output": s.output,
            "error": s.error}


def sbatch_lines(plan) -> list[tuple[str, Any]]:
    """[(option, value or None for a switch)] of the #SBATCH header, in the table's order."""
    values = slurm_values(plan)
    out: list[tuple[str, Any]] = []
    for option in options():
        value = values.get(option.value) if option.value else None
        if option.switch and value:
            out.append((option.option, None))
        elif not option.switch and value not in (None, False, ""):
            out.append((option.option, value))
    return out


def enroot_image(image: str) -> str:
    """A container image as pyxis reads it: enroot's ``REGISTRY#IMAGE[:TAG]`` (pyxis takes
    ``nvcr.io/nvidia/pytorch:24.05-py3`` for an image of Docker Hub). A path (a squashfs file) or
    a name already in that form is kept."""
    if "#" in image or image.startswith(("/", ".", "~")) or image.endswith(".sqsh"):
        return image
    host, slash, rest = image.partition("/")
    if slash and ("." in host or ":" in host or host == "localhost"):
        return f"{host}#{rest}"
    return image


def srun_options(plan) -> list[str]:
    """The training step's srun options, as shell words (quoted): a failed task ends the step
    (--kill-on-bad-exit: otherwise the other ranks wait in a collective until a timeout); the
    CPUs per task (srun gives a task one CPU unless told, and since Slurm 22.05 does not inherit
    sbatch's --cpus-per-task: CPUS_PER_TASK, set by the script); the container (pyxis), with the
    launch folder mounted where the script passes it (its config files are read from there)."""
    s = plan.spec.slurm
    words = ["--kill-on-bad-exit=1", '--cpus-per-task="${CPUS_PER_TASK}"']
    if s.container_image:
        words.append(f"--container-image={shq(enroot_image(s.container_image))}")
        mounts = ",".join(s.container_mounts)
        words.append('--container-mounts="${GEN_LAUNCH_DIR}:${GEN_LAUNCH_DIR}"'
                     + (shq("," + mounts) if mounts else ""))
        if s.container_workdir:
            words.append(f"--container-workdir={shq(s.container_workdir)}")
    return words
