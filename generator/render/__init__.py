"""Render a plan through the Jinja templates in templates/ (one per artifact).

Templates only place values the plan computed: StrictUndefined, no autoescape, every JSON value
through ``tojson`` and every shell word through ``shq``. The rendered text is read back and
checked against the plan (lint/readback.py, run by artifacts.py) before anything is written.
"""

from __future__ import annotations

import contextlib
import json
import re
import textwrap
from functools import cache
from typing import Any

from generator import __version__
from generator.dialects import dialect
from generator.dialects.arguments import argument_lines
from generator.dialects.launchers import launcher, launchers
from generator.dialects.slurm import sbatch_lines, srun_options
from generator.executors import executor_of, executors
from generator.frameworks import framework_of
from generator.plan.launch import launch_summary
from generator.plan.plan import Plan
from generator.plan.torchtitan import (
    CONFIG_FUNCTION,
    CONFIG_MODULE,
    QUANTIZATION,
    fp8_converters,
    registry_dialect,
    registry_model,
    torchtitan_values,
)
from generator.plan.values import (
    accelerate_config,
    deepspeed_config,
    entry_point_arguments,
    megatron_values,
    trainer_values,
)
from generator.render.executor_files import SCRIPT, kubernetes_objects, sky_task, to_yaml
from generator.resources import cache_dir, data_dir, private_dir
from generator.shell import shq

# target name -> (file name, template)
ARTIFACTS = {
    "deepspeed": ("ds_config.json", "ds_config.json.j2"),
    "megatron": ("megatron_args.sh", "megatron_args.sh.j2"),
    "trainer": ("trainer_args.sh", "trainer_args.sh.j2"),
    "accelerate": ("accelerate_config.yaml", "accelerate_config.yaml.j2"),
    "torchtitan": ("torchtitan_args.sh", "torchtitan_args.sh.j2"),
    "torchtitan_config": (f"{CONFIG_MODULE}.py", f"{CONFIG_MODULE}.py.j2"),
    # the executors' files (launch.executor): launch.sbatch, trainjob.yaml, ... (data/executors.yaml)
    **{e.name: (e.file, e.template) for e in executors().values()},
}
POD_SCRIPT = "pod_launch.sh.j2"  # launch.sh: what a Kubernetes pod or SkyPilot node runs
PLAN_FILE = "plan.json"
PREFLIGHT = ("preflight.py", "preflight.py.j2")  # slurm.preflight: run by launch.sbatch
# the files lint does not read back: the preflight check and the plan's record
NOT_LINTED = (PREFLIGHT[0], PLAN_FILE)
# the torch device of each vendor's accelerators (preflight.py)
DEVICE = {"nvidia": "cuda", "amd": "cuda", "huawei": "npu", "intel": "hpu", "cpu": "cpu"}


def targets_for(framework: str, launcher: str = "torchrun", executor: str = "slurm") -> list[str]:
    """The artifacts a framework uses: no DeepSpeed JSON for megatron-lm, no Megatron arguments
    for plain DeepSpeed; Trainer arguments for FSDP2 and DeepSpeed through accelerate, whose
    launcher reads an accelerate config; a config registry's (torchtitan) arguments and function;
    last the executor's file (launch.sbatch, trainjob.yaml ...)."""
    record = framework_of(framework)
    trainer = record.uses_trainer(launcher)
    return [target for target, used in (
        ("deepspeed", record.deepspeed_engine), ("megatron", record.megatron_arguments),
        ("trainer", trainer), ("accelerate", trainer and launcher == "accelerate"),
        ("torchtitan", record.config_registry), ("torchtitan_config", record.config_registry),
        (executor, True)) if used]


_SBATCH_SAFE = re.compile(r"^[A-Za-z0-9_.,:%/@+=~-]+$")


def sbatch_value(value: Any) -> str:
    """A value for an ``#SBATCH --opt=value`` line, which sbatch reads without a shell."""
    text = str(value)
    if not _SBATCH_SAFE.match(text):
        raise ValueError(f"{text!r} cannot be written on an #SBATCH line")
    return text


def _tojson(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@cache
def _environment():
    import jinja2  # deferred: jinja2 only when a template is rendered (start-up of the other commands)

    class CompiledTemplates(jinja2.FileSystemBytecodeCache):
        """Jinja's compiled templates, kept in the cache folder (keyed by the template's text)
        when only this user can write there; a file that cannot be read or written is
        compiled again."""

        def load_bytecode(self, bucket) -> None:
            with contextlib.suppress(OSError):
                super().load_bytecode(bucket)

        def dump_bytecode(self, bucket) -> None:
            with contextlib.suppress(OSError):
                super().dump_bytecode(bucket)

    compiled = cache_dir("templates")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        bytecode_cache=CompiledTemplates(str(compiled)) if private_dir(compiled) else None,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters.update(shq=shq, sbatch_value=sbatch_value, tojson=_tojson)
    return env


def header(plan: Plan) -> str:
    stage = f", stage {plan.spec.stage}" if plan.spec.stage else ""
    return (f"Generated by gen-launch {__version__} from {plan.spec.source} "
            f"(sha256 {plan.spec.doc.digest[:16]}{stage}); do not edit.")


def plan_line(plan: Plan) -> str:
    return (f"Plan: world {plan.world_size} = {plan.spec.cluster.nodes} nodes × "
            f"{plan.spec.cluster.gpus_per_node}; dp {plan.dp}; global batch "
            f"{plan.global_batch_size} = micro {plan.micro_batch_size} × accumulation "
            f"{plan.gradient_accumulation_steps} × dp {plan.dp}; {plan.tokens_per_step:,} "
            "tokens per step.")


def render(plan: Plan, target: str) -> str:
    template = _environment().get_template(ARTIFACTS[target][1])
    extra: dict[str, Any] = {}
    if target == "megatron":
        extra = {"dialect": plan.dialect, "arguments": argument_lines(plan.dialect, megatron_values(plan))}
    elif target == "deepspeed":
        extra = {"config": deepspeed_config(plan)}
    elif target == "accelerate":
        extra = {"config": accelerate_config(plan)}
    elif target == "slurm":
        name = plan.spec.launch.launcher
        extra = {"sbatch": sbatch_lines(plan), "srun_options": srun_options(plan),
                 "entry_arguments": entry_point_arguments(plan.spec),
                 "launcher": launcher(name) if name in {x.name for x in launchers()} else None}
    elif target == "torchtitan":
        extra = {"arguments": argument_lines(registry_dialect(plan.spec), torchtitan_values(plan)),
                 "dialect": registry_dialect(plan.spec)}
    elif target == "torchtitan_config":
        extra = {"registry": registry_model(plan.spec), "module_name": CONFIG_MODULE,
                 "function": CONFIG_FUNCTION, "converters": fp8_converters(plan.spec),
                 "quantization": QUANTIZATION}
    elif target == "trainer":
        values = trainer_values(plan)
        extra = {"arguments": argument_lines(dialect("trainer"), values),
                 "wandb_project": values["wandb_project"]}
    return template.render(plan=plan, spec=plan.spec, model=plan.model,
                           header=header(plan), plan_line=plan_line(plan), **extra)


def render_plan_json(plan: Plan) -> str:
    return json.dumps({"header": header(plan), **plan.to_json(), "executor": launch_summary(plan)}, indent=2,
                      ensure_ascii=False) + "\n"


def pod_script(plan: Plan) -> str:
    """launch.sh: the launcher a pod or SkyPilot node runs, with the executor's node rank and
    rendezvous (or, on an MPI runtime, mpirun on the launcher pod and the program as each rank)."""
    record = executor_of(plan.spec.launch.executor)
    name = plan.spec.launch.launcher
    started = launcher(name)
    mpi = record.mpi_for(name)
    words = [*started.written(plan.framework, per_node=True, where="pod"),
             *started.written(plan.framework, where="pod")]
    return _environment().get_template(POD_SCRIPT).render(
        plan=plan, spec=plan.spec, header=header(plan), plan_line=plan_line(plan), executor=record,
        how=textwrap.wrap(f"{record.title}: {record.description}", 98), launcher=started, words=words,
        mpi=mpi, mpi_master=mpi.master.format(job=plan.spec.name) if mpi else None, **_mpi_rank(plan, mpi),
        injects=textwrap.wrap(f"This node's rank and the rendezvous: {record.injects}.", 98),
        entry_arguments=entry_point_arguments(plan.spec))


def _mpi_rank(plan: Plan, mpi) -> dict[str, Any]:
    """What mpirun forwards to each rank (-x: the plan's sizes, the rendezvous, launch.env) and
    the rank's shell: the world mpirun started checked against the plan, torch.distributed's
    variables from mpirun's (executors.yaml, mpi.rank_env)."""
    if mpi is None:
        return {}
    names = ["PATH", "NODES", "PROCS_PER_NODE", "WORLD_SIZE", "GEN_LAUNCH_DIR", "MASTER_ADDR", "MASTER_PORT",
             *(["CUDA_DEVICE_MAX_CONNECTIONS"] if plan.cuda_device_max_connections_1 else []),
             *(key for key, _ in plan.spec.launch.env)]
    source = dict(mpi.rank_env)
    check = (f'[[ "${{{source["WORLD_SIZE"]}}}" == "${{WORLD_SIZE}}" ]] || {{ echo "gen-launch: mpirun '
             f'started ${{{source["WORLD_SIZE"]}}} ranks but the plan needs ${{WORLD_SIZE}}" >&2; exit 1; }}')
    exports = " ".join(f'{name}="${{{var}}}"' for name, var in mpi.rank_env if name != "WORLD_SIZE")
    return {"forwarded": list(dict.fromkeys(names)), "rank_check": check, "rank_exports": exports}


def _executor_files(plan: Plan, files: dict[str, str]) -> dict[str, str]:
    """The executor's file (and a SkyPilot task's launch.sh) for the framework's ``files``."""
    record = executor_of(plan.spec.launch.executor)
    script = pod_script(plan)
    if record.kubernetes:
        objects = kubernetes_objects(plan, record, {SCRIPT: script, **files})
        out = {}
    else:
        objects = [sky_task(plan)]
        out = {SCRIPT: script}
    text = _environment().get_template(record.template).render(
        header=header(plan), plan_line=plan_line(plan), executor=record, documents=to_yaml(objects),
        restarts=textwrap.wrap(f"Restarts: {record.restarts}.", 98))
    return {**out, record.file: text}


def render_files(plan: Plan) -> dict[str, str]:
    """File name -> text for every artifact the framework uses, plus preflight.py and plan.json
    (artifacts.render_all reads the artifacts back and checks them against the plan)."""
    record = executor_of(plan.spec.launch.executor)
    files = {ARTIFACTS[t][0]: render(plan, t)
             for t in targets_for(plan.framework, plan.spec.launch.launcher) if t not in executors()}
    sbatch = record.style == "sbatch"
    files.update({record.file: render(plan, record.name)} if sbatch else _executor_files(plan, files))
    if plan.spec.slurm.preflight and sbatch:
        files[PREFLIGHT[0]] = _environment().get_template(PREFLIGHT[1]).render(
            plan=plan, header=header(plan), backend=plan.gpu["backend"], vendor=plan.gpu["vendor"],
            device=DEVICE[plan.gpu["vendor"]])
    files[PLAN_FILE] = render_plan_json(plan)
    return files
