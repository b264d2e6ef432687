"""A launch script's facts -> the spec's name, cluster, launch and slurm sections."""

from __future__ import annotations

import posixpath
import re

from generator.dialects.slurm import named, options
from generator.importer.draft import Draft
from generator.readers.bash.evaluate import UNKNOWN
from generator.rules import Fact
from generator.spec.model import CODE_ENV, SCRIPT_OWNED_ENV

# What a generated (or typical) script exports for the launcher itself, not the job's
# environment; CUDA_DEVICE_MAX_CONNECTIONS is rendered when the plan needs it.
PLUMBING = {"NODES", "PROCS_PER_NODE", "WORLD_SIZE", "GEN_LAUNCH_DIR", "MASTER_ADDR", "MASTER_PORT",
            "CUDA_DEVICE_MAX_CONNECTIONS", "RANK", "LOCAL_RANK", "NODE_RANK", "NNODES",
            "GPUS_PER_NODE", "NPROC_PER_NODE"}
# a Slurm GPU type (--gres=gpu:TYPE:N, --gpus-per-node=TYPE:N) -> a GPU preset; a100 is a guess
_GPU_TYPES = (("gh200", None), ("gb200", "gb200"), ("h200", "h200-141gb"), ("h100", "h100-80gb"),
              ("b200", "b200"), ("a100", "a100-80gb"), ("mi300", "mi300x"), ("mi325", "mi325x"))
_LAUNCHERS = ("torchrun", "deepspeed", "srun", "accelerate")
# what launch.sbatch sets itself on Ascend (templates/launch.sbatch.j2); None: any value
ASCEND_RENDERED = {"ASCEND_RT_VISIBLE_DEVICES": None, "HCCL_CONNECT_TIMEOUT": "1200",
                   "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"}


def _known(text: str | None) -> bool:
    return text is not None and UNKNOWN not in text


def _option(values: dict[str, str | None], names: tuple[str, ...]) -> tuple[bool, str | None]:
    for name in names:
        if name in values:
            return True, values[name]
    return False, None


def read_launch_facts(facts: dict[str, Fact], script: str, draft: Draft) -> None:
    sbatch = facts["sbatch_values"].value if "sbatch_values" in facts else {}
    srun = facts["srun_values"].value if "srun_values" in facts else {}
    _name(sbatch, script, draft)
    _cluster(facts, sbatch, srun, draft)
    _launcher(facts, draft)
    _environment(facts, draft)
    _slurm(facts, sbatch, srun, draft)
    # a generated launch.sbatch with slurm.preflight names the preflight's folder before it runs it
    exported = facts["exports"].value if "exports" in facts else ()
    if any(name == "GEN_LAUNCH_PREFLIGHT_DIR" for name, _ in exported):
        draft.set("slurm.preflight", True)


def _name(sbatch: dict, script: str, draft: Draft) -> None:
    given, name = _option(sbatch, named("name").names)
    if given and _known(name) and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name or ""):
        draft.set("name", name)
        return
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", posixpath.basename(script).split(".")[0]).strip("-._")
    draft.unknown("name", "no #SBATCH --job-name; named after the script", stem or "imported")


def _cluster(facts: dict[str, Fact], sbatch: dict, srun: dict, draft: Draft) -> None:
    nodes = facts.get("nodes")
    if nodes and isinstance(nodes.value, int):
        draft.set("cluster.nodes", nodes.value)
    else:
        draft.unknown("cluster.nodes", "no node count in #SBATCH --nodes or the launcher's arguments")
    per_node = facts.get("sbatch_gpus_per_node") or facts.get("procs_per_node")
    if per_node and isinstance(per_node.value, int):
        draft.set("cluster.gpus_per_node", per_node.value)
    else:
        draft.unknown("cluster.gpus_per_node", "no GPUs per node in --gpus-per-node, --gres or "
                      "the launcher's process count")
    if "ascend" in facts and facts["ascend"].value:
        draft.unknown("cluster.gpu", "the script sets HCCL_*/ASCEND_* variables: an Ascend NPU; "
                      "the 910B assumed", "ascend-910b")
        return
    _, request = _option({**srun, **sbatch}, ("--gpus-per-node", "--gres"))
    for name, preset in _GPU_TYPES:
        if request and name in request.lower() and preset:
            guess = " (80 GB assumed; a100-40gb is the other choice)" if name == "a100" else ""
            draft.unknown("cluster.gpu", f"from the Slurm GPU type {request!r}{guess}", preset)
            return
    draft.unknown("cluster.gpu", "no GPU type in the files; choose one of the presets "
                  "(gen-launch schema lists them)")


def _launcher(facts: dict[str, Fact], draft: Draft) -> None:
    launcher = facts["launcher"].value if "launcher" in facts else None
    if launcher in _LAUNCHERS:
        draft.set("launch.launcher", launcher)
    else:
        draft.unknown("launch.launcher", f"the script starts the training with "
                      f"{launcher or 'nothing found'}, which the spec does not render; torchrun "
                      "assumed", "torchrun")
    entry = facts["entrypoint"].value if "entrypoint" in facts else None
    if _known(entry):
        draft.set("launch.entrypoint", entry)
    else:
        draft.unknown("launch.entrypoint", "no training script found in the launch command",
                      "pretrain_gpt.py")
    python = facts["python"].value if "python" in facts else None
    if launcher == "srun" and _known(python):
        draft.set("launch.python", python)


def _environment(facts: dict[str, Fact], draft: Draft) -> None:
    env: dict[str, str] = {}
    skipped, owned = [], []
    ascend = "ascend" in facts and facts["ascend"].value
    for name, value in facts["exports"].value if "exports" in facts else ():
        if name in PLUMBING or name.startswith(("SLURM_", "GEN_LAUNCH_")):
            continue
        if name == "WANDB_PROJECT" and draft.get("logging.wandb_run_name") is not None:
            draft.set("logging.wandb_project", value)  # the Trainer's wandb project (trainer_args.sh)
            continue
        if name in SCRIPT_OWNED_ENV:  # the generated launch.sbatch sets these itself
            owned.append(name)
            continue
        if ascend and name in ASCEND_RENDERED and ASCEND_RENDERED[name] in (None, value):
            continue
        if _known(value):
            env[name] = value
        else:
            skipped.append(name)
    if env:
        draft.set("launch.env", env)
        unsafe = [name for name in env if name in CODE_ENV or name.startswith("BASH_")]
        if unsafe:  # the script exported them: say so, as the spec must
            draft.set("launch.unsafe_env", unsafe)
            draft.marks["launch.unsafe_env"] = (f"the script exports {', '.join(unsafe)}, which every bash "
                                                "child reads as code or as its search path")
    if owned:
        draft.notes.append(f"exported variables that the generated launch.sbatch sets itself were left "
                           f"out of launch.env: {', '.join(owned)}")
    if skipped:
        draft.notes.append(f"exported variables that depend on run-time values were left out of "
                           f"launch.env: {', '.join(skipped)}")


def _slurm(facts: dict[str, Fact], sbatch: dict, srun: dict, draft: Draft) -> None:
    if not sbatch:
        draft.notes.append("no #SBATCH lines: the slurm section is the spec's defaults")
    for option in options():  # the Slurm dialect's options that carry a spec field (slurm.yaml)
        if option.spec is None:
            continue
        given, value = _option(sbatch, option.names)
        if option.switch:
            if sbatch:
                draft.set(option.spec, given)
        elif given and _known(value):
            whole = option.kind == "int" and re.fullmatch(r"[0-9]+", value or "")
            if option.kind != "int" or whole:
                draft.set(option.spec, int(value) if whole else value)
        elif given:
            draft.notes.append(f"#SBATCH {option.option} is set at run time; left out")
    if sbatch and not _option(sbatch, named("time").names)[0]:
        draft.unknown("slurm.time", "no #SBATCH --time (the partition's default limit applies); "
                      "the spec's default written", "2-00:00:00")
    for key in ("container_image", "container_workdir"):
        given, value = _option(srun, (f"--{key.replace('_', '-')}",))
        if given and _known(value):
            draft.set(f"slurm.{key}", value)
    given, mounts = _option(srun, ("--container-mounts",))
    if given and mounts is not None:
        parts = [m for m in mounts.split(",") if m]
        # (gen-launch's own mount of the launch folder, "${GEN_LAUNCH_DIR}:${GEN_LAUNCH_DIR}", is
        # written for every container and is no spec value)
        if any(not _known(m) and m != f"{UNKNOWN}:{UNKNOWN}" for m in parts):
            draft.notes.append("srun --container-mounts names a folder known at run time only; left out")
        if any(_known(m) for m in parts):
            draft.set("slurm.container_mounts", [m for m in parts if _known(m)])
